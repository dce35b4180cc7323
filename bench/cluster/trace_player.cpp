// cluster/trace_player.cpp — the rate-changing thread (see trace_player.h).
#include "bench/cluster/trace_player.h"

namespace kvstream::cluster {

TracePlayer::TracePlayer(bench::LinkTrace trace, SetRate set_rate)
    : trace_(std::move(trace)), set_rate_(std::move(set_rate)) {}

TracePlayer::~TracePlayer() { Stop(); }

Status TracePlayer::Start() {
  if (thread_.joinable()) return Status::InvalidArgument("TracePlayer: already started");
  if (trace_.time_s.empty() || trace_.time_s.size() != trace_.rate_bps.size()) {
    return Status::InvalidArgument("TracePlayer: trace '" + trace_.name + "' has no rates");
  }
  start_ = std::chrono::steady_clock::now();
  KVSTREAM_RETURN_IF_ERROR(set_rate_(trace_.rate_bps[0]));
  {
    std::lock_guard lock(mu_);
    stop_ = false;
    applied_.assign(1, {0.0, trace_.rate_bps[0]});
  }
  thread_ = std::thread([this] { Play(); });
  return Status::Ok();
}

void TracePlayer::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status TracePlayer::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

std::vector<std::pair<double, double>> TracePlayer::applied() const {
  std::lock_guard lock(mu_);
  return applied_;
}

void TracePlayer::Play() {
  for (size_t i = 1; i < trace_.time_s.size(); ++i) {
    {
      std::unique_lock lock(mu_);
      const auto at = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(trace_.time_s[i]));
      if (cv_.wait_until(lock, at, [&] { return stop_; })) return;
    }
    // A rate equal to the current one is still applied: cheap, and the log stays the trace's.
    Status s = set_rate_(trace_.rate_bps[i]);
    const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::lock_guard lock(mu_);
    if (!s.ok()) {
      status_ = s.WithContext("trace " + trace_.name + " at " + std::to_string(trace_.time_s[i]) + " s");
      return;
    }
    applied_.emplace_back(now, trace_.rate_bps[i]);
  }
}

}  // namespace kvstream::cluster
