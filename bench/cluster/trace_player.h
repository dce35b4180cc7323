// cluster/trace_player.h — replays a bandwidth trace (bench/traces format, scheduler/trace.h) on a link:
// a thread sets the rate at each of the trace's change times, measured from Start.
//
// The setter is typically NetnsLink::SetRate. Stop (or destruction) ends the thread promptly; a setter
// error stops playback and is reported by status(). Start/Stop/status from one thread; applied() is
// safe at any time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kvstream/status.h"
#include "bench/trace.h"

namespace kvstream::cluster {

class TracePlayer {
 public:
  using SetRate = std::function<Status(double rate_bps)>;
  TracePlayer(bench::LinkTrace trace, SetRate set_rate);
  ~TracePlayer();
  TracePlayer(const TracePlayer&) = delete;
  TracePlayer& operator=(const TracePlayer&) = delete;

  // Sets the trace's first rate now (synchronously; its error is returned) and plays the rest on a thread.
  Status Start();
  void Stop();
  Status status() const;
  // (seconds since Start, rate in bit/s) of every change made so far.
  std::vector<std::pair<double, double>> applied() const;

 private:
  void Play();
  bench::LinkTrace trace_;
  SetRate set_rate_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  Status status_;
  std::vector<std::pair<double, double>> applied_;
  std::thread thread_;
};

}  // namespace kvstream::cluster
