// TracePlayer: replays every rate of a trace in order, stops promptly, and stops at a setter error.
#include "bench/cluster/trace_player.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace kvstream::cluster {
namespace {

// Waits (bounded) until `done` holds.
template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 500 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done();
}

TEST(TracePlayer, AppliesEveryRateInOrder) {
  std::mutex mu;
  std::vector<double> rates;
  bench::LinkTrace trace{"t", {0.0, 0.02, 0.04}, {5e8, 5e7, 1e8}};
  TracePlayer player(trace, [&](double bps) {
    std::lock_guard lock(mu);
    rates.push_back(bps);
    return Status::Ok();
  });
  ASSERT_TRUE(player.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return player.applied().size() == 3; }));
  player.Stop();
  EXPECT_TRUE(player.status().ok());
  EXPECT_EQ(rates, (std::vector<double>{5e8, 5e7, 1e8}));
  const auto applied = player.applied();
  EXPECT_LE(applied[0].first, applied[1].first);
  EXPECT_LE(applied[1].first, applied[2].first);
}

TEST(TracePlayer, StopBeforeTheNextChangeAppliesNothingMore) {
  int calls = 0;
  bench::LinkTrace trace{"t", {0.0, 3600.0}, {1e9, 1e8}};
  TracePlayer player(trace, [&](double) {
    ++calls;
    return Status::Ok();
  });
  ASSERT_TRUE(player.Start().ok());
  player.Stop();  // must not wait an hour
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(player.applied().size(), 1u);
}

TEST(TracePlayer, SetterErrorStopsPlaybackAndIsReported) {
  bench::LinkTrace trace{"t", {0.0, 0.01, 0.02}, {1e9, 1e8, 1e7}};
  TracePlayer player(trace, [&](double bps) { return bps < 5e8 ? Status::IoError("tc failed") : Status::Ok(); });
  ASSERT_TRUE(player.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return !player.status().ok(); }));
  player.Stop();
  EXPECT_NE(player.status().message().find("tc failed"), std::string::npos) << player.status().ToString();
  EXPECT_EQ(player.applied().size(), 1u);
}

TEST(TracePlayer, FirstRateErrorFailsStart) {
  bench::LinkTrace trace{"t", {0.0}, {1e9}};
  TracePlayer player(trace, [](double) { return Status::IoError("no link"); });
  EXPECT_FALSE(player.Start().ok());
}

}  // namespace
}  // namespace kvstream::cluster
