// scheduler/estimator.cpp — robust rate and decode-cost estimators.
#include "scheduler/estimator.h"

#include <algorithm>

namespace kvstream::scheduler {

double LowerMedian(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<long>(mid), values.end());
  return values[mid];
}

MedianWindow::MedianWindow(int window, double prior) : window_(std::max(1, window)), samples_{prior} {}

void MedianWindow::Add(double sample) {
  if (!measured_) samples_.clear();  // the prior only stands in until the first measurement
  measured_ = true;
  samples_.push_back(sample);
  if (static_cast<int>(samples_.size()) > window_) samples_.erase(samples_.begin());
}

DecodeCostEstimator::DecodeCostEstimator(double prior_kv_s_per_token, double prior_text_s_per_token)
    : prior_kv_(prior_kv_s_per_token), prior_text_(prior_text_s_per_token) {}

void DecodeCostEstimator::Add(Level level, int tokens, double decode_s) {
  if (tokens <= 0 || !(decode_s >= 0)) return;
  const double sample = decode_s / tokens;
  // Half weight on the newest sample: follows a receiver that slows down within two chunks while a
  // single hiccup moves the estimate by half.
  auto [it, inserted] = per_level_.try_emplace(level, sample);
  if (!inserted) it->second = 0.5 * it->second + 0.5 * sample;
  if (level != kLevelText) latest_kv_ = it->second;
}

double DecodeCostEstimator::SecondsPerToken(Level level) const {
  auto it = per_level_.find(level);
  if (it != per_level_.end()) return it->second;
  if (level == kLevelText) return prior_text_;
  return latest_kv_ >= 0 ? latest_kv_ : prior_kv_;
}

}  // namespace kvstream::scheduler
