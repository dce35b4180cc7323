// scheduler/estimator.h — what the scheduler learns from chunk telemetry: robust rates and decode costs.
#pragma once

#include <map>
#include <vector>

#include "kvstream/level.h"

namespace kvstream::scheduler {

// The lower median of `values` (the smaller middle element when the count is even, so that with two
// samples the more pessimistic one counts). 0 for an empty vector.
double LowerMedian(std::vector<double> values);

// Median of the last `window` samples, seeded with a prior that the first real samples push out. One
// outlier in either direction never moves it; a sustained change shows after window/2 + 1 samples.
class MedianWindow {
 public:
  MedianWindow(int window, double prior);
  void Add(double sample);
  double Estimate() const { return LowerMedian(samples_); }
  bool measured() const { return measured_; }

 private:
  int window_;
  bool measured_ = false;
  std::vector<double> samples_;  // most recent last
};

// Seconds per token to make a chunk usable at the receiver, per level: decode for KV levels, prefill for
// "text". A level's own measurements (EWMA) win; an unmeasured KV level borrows the latest measured KV
// level's cost (lossy decode dominates fp16/int8, so this errs on the slow side); otherwise the prior.
class DecodeCostEstimator {
 public:
  DecodeCostEstimator(double prior_kv_s_per_token, double prior_text_s_per_token);
  void Add(Level level, int tokens, double decode_s);
  double SecondsPerToken(Level level) const;

 private:
  double prior_kv_;
  double prior_text_;
  double latest_kv_ = -1;
  std::map<Level, double> per_level_;
};

}  // namespace kvstream::scheduler
