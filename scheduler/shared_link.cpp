// scheduler/shared_link.cpp — the link state that concurrent fetches' policies share.
#include <algorithm>

#include "kvstream/scheduler.h"
#include "scheduler/estimator.h"

namespace kvstream {

SharedLink::SharedLink(const KvstreamPolicyOptions& options)
    : window_(std::max(1, options.window)),
      prior_capacity_bps_(options.prior_bandwidth_bps),
      rtt_s_(options.prior_rtt_s) {}

void SharedLink::SetPrior(double capacity_bps, double rtt_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_bps > 0) prior_capacity_bps_ = capacity_bps;
  if (rtt_s > 0 && !rtt_measured_) rtt_s_ = rtt_s;
}

int SharedLink::Register() {
  std::lock_guard<std::mutex> lock(mu_);
  ids_.push_back(next_id_);
  return next_id_++;
}

void SharedLink::Unregister(int id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_.erase(std::remove(ids_.begin(), ids_.end(), id), ids_.end());
}

int SharedLink::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(ids_.size());
}

void SharedLink::AddThroughputSample(double throughput_bps) {
  if (!(throughput_bps > 0)) return;
  std::lock_guard<std::mutex> lock(mu_);
  // Under fair sharing each of n fetches sees about capacity / n.
  capacity_samples_.push_back(throughput_bps * static_cast<double>(std::max<size_t>(1, ids_.size())));
  if (static_cast<int>(capacity_samples_.size()) > window_) capacity_samples_.erase(capacity_samples_.begin());
}

void SharedLink::AddRttSample(double rtt_s) {
  if (!(rtt_s >= 0)) return;
  std::lock_guard<std::mutex> lock(mu_);
  // RTT moves slowly and matters little next to transfer time: a plain EWMA.
  rtt_s_ = rtt_measured_ ? 0.75 * rtt_s_ + 0.25 * rtt_s : rtt_s;
  rtt_measured_ = true;
}

double SharedLink::capacity_bps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_samples_.empty() ? prior_capacity_bps_ : scheduler::LowerMedian(capacity_samples_);
}

double SharedLink::latest_capacity_bps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return capacity_samples_.empty() ? prior_capacity_bps_ : capacity_samples_.back();
}

double SharedLink::share_bps() const {
  const double capacity = capacity_bps();
  return capacity / std::max(1, registered());
}

double SharedLink::rtt_s() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rtt_s_;
}

}  // namespace kvstream
