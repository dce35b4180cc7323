// kvstream/scheduler.h — adaptive level policies: which level each chunk of a fetch is sent at.
//
// The stream layer drives a LevelPolicy (kvstream/level_policy.h). This header adds the scheduler's
// policies and what they share:
//   * `kvstream`: estimates bandwidth, RTT, decode and text-recompute cost from the fetch's own
//     telemetry and, before every chunk, plans all remaining chunks so that the context is ready by the
//     deadline at the best quality the link allows (docs/scheduler.md explains the estimator and planner);
//   * `cachegen-rule`: the released CacheGen rule, kept as the baseline it is compared with;
//   * `fixed-<level>`: FixedLevelPolicy.
// Concurrent fetches over one link share a SharedLink so each plans with its share of the link's rate.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kvstream/level_policy.h"
#include "kvstream/status.h"

namespace kvstream {

// Options of the `kvstream` policy. The priors are used until the fetch has measured the quantity; the
// defaults suit a 1 Gbit/s-class link and a CPU receiver decoding SmolLM2-sized chunks.
struct KvstreamPolicyOptions {
  // Plan to be ready within this fraction of the time left (the rest absorbs estimation error).
  double safety = 0.85;
  // An upgrade that spends a fraction f of the deadline on the link must raise the context's mean quality
  // by at least min_gain x f. Time on the wire is exposure to a link that may fall, and the last
  // thousandths of quality are not worth it (docs/scheduler.md). 0 spends the whole budget.
  double min_gain = 0.02;
  // Plan so that the context would still be ready if the link fell to 1/drop_factor of its estimate
  // before the next chunk: the plan's link seconds (and the min_gain exposure) are counted at that rate.
  // When no plan survives such a drop, the policy plans with the estimate itself. 1 trusts the estimate.
  double drop_factor = 4;
  // Bandwidth samples kept; the estimate is their median (lower middle when even), so one slow or fast
  // chunk does not move it and a sustained change shows after window/2 + 1 chunks.
  int window = 3;
  // Chunks smaller than this say more about latency than bandwidth and are not bandwidth samples.
  uint64_t min_sample_bytes = 16 * 1024;
  double prior_bandwidth_bps = 1e9;
  double prior_rtt_s = 1e-3;
  double prior_decode_s_per_token = 20e-6;     // fp16/int8/lossy chunk decode, seconds per token
  double prior_recompute_s_per_token = 1e-3;  // "text": receiver prefill, seconds per token
};

// The link state shared by the `kvstream` policies of concurrent fetches over one link. Thread-safe.
// Each policy registers on Begin and leaves when its last chunk is in (or it is destroyed); bandwidth
// samples are pooled as capacity samples (a fetch's throughput times the fetches registered when it
// was measured), and each fetch plans with capacity / registered fetches (fair share).
class SharedLink {
 public:
  explicit SharedLink(const KvstreamPolicyOptions& options = {});

  // A prior for fetches that have not measured anything yet (a LinkPrior from the stream layer). A value
  // of 0 leaves that prior as it was; a measured RTT is not overridden.
  void SetPrior(double capacity_bps, double rtt_s);
  int Register();
  void Unregister(int id);
  int registered() const;
  // A fetch's measured throughput over one chunk; scaled by the registered count into a capacity sample.
  void AddThroughputSample(double throughput_bps);
  void AddRttSample(double rtt_s);
  double capacity_bps() const;  // median of the recent capacity samples (or the prior)
  double latest_capacity_bps() const;  // the newest capacity sample (or the prior)
  double share_bps() const;     // capacity_bps() / max(1, registered())
  double rtt_s() const;

 private:
  mutable std::mutex mu_;
  int window_;
  int next_id_ = 1;
  std::vector<int> ids_;
  std::vector<double> capacity_samples_;  // most recent last, at most window_
  double prior_capacity_bps_;
  double rtt_s_;
  bool rtt_measured_ = false;
};

// The `kvstream` policy. Besides LevelPolicy it answers whether the fetch can still meet its deadline:
// feasible() turns false (and status() explains) as soon as a plan finds that even the fastest option
// for every remaining chunk would be late; the policy then sends the fastest options to be as little
// late as possible.
class AdaptivePolicy : public LevelPolicy {
 public:
  virtual bool feasible() const = 0;
  virtual Status status() const = 0;               // OK, or Timeout naming the predicted and allowed times
  virtual double predicted_ready_s() const = 0;    // of the last plan, seconds since Begin
  virtual double bandwidth_estimate_bps() const = 0;  // the share this fetch plans with
};

// `link` may be null (the fetch owns its link estimate) or shared with the policies of other fetches.
std::unique_ptr<AdaptivePolicy> MakeKvstreamPolicy(const KvstreamPolicyOptions& options = {},
                                                   std::shared_ptr<SharedLink> link = nullptr);

struct CacheGenRuleOptions {
  double prior_bandwidth_bps = 1e9;  // until the first chunk has been measured
};
// Released CacheGen rule: levels from highest quality to lowest, the first whose bytes*8/bandwidth is
// under deadline/num_chunks, else "text" (or the smallest level when text is not offered); bandwidth is
// the last chunk's measured throughput.
std::unique_ptr<LevelPolicy> MakeCacheGenRulePolicy(const CacheGenRuleOptions& options = {});

// "kvstream", "cachegen-rule", or "fixed-<level>" ("fixed-L3", "fixed-int8", "fixed-text").
Result<std::unique_ptr<LevelPolicy>> MakeLevelPolicy(const std::string& name,
                                                     const KvstreamPolicyOptions& options = {},
                                                     std::shared_ptr<SharedLink> link = nullptr);

}  // namespace kvstream
