// Estimators on synthetic telemetry: robust to one outlier, quick on a sustained change.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kvstream/scheduler.h"
#include "scheduler/estimator.h"

namespace kvstream::scheduler {
namespace {

TEST(MedianWindow, StartsAtThePriorAndForgetsItOnTheFirstSample) {
  MedianWindow w(3, 100);
  EXPECT_DOUBLE_EQ(w.Estimate(), 100);
  EXPECT_FALSE(w.measured());
  w.Add(40);
  EXPECT_DOUBLE_EQ(w.Estimate(), 40);
  w.Add(60);
  EXPECT_DOUBLE_EQ(w.Estimate(), 40);  // two samples: the lower counts
}

TEST(MedianWindow, OneSlowOrFastSampleDoesNotMoveTheEstimate) {
  MedianWindow w(3, 100);
  for (int i = 0; i < 5; ++i) w.Add(100);
  w.Add(10);
  EXPECT_DOUBLE_EQ(w.Estimate(), 100);
  w.Add(100);
  w.Add(1000);
  EXPECT_DOUBLE_EQ(w.Estimate(), 100);
}

TEST(MedianWindow, SustainedDropShowsWithinTwoSamples) {
  MedianWindow w(3, 100);
  for (int i = 0; i < 5; ++i) w.Add(100);
  w.Add(10);
  w.Add(10);
  EXPECT_DOUBLE_EQ(w.Estimate(), 10);
}

TEST(MedianWindow, SustainedRiseShowsWithinTwoSamples) {
  MedianWindow w(3, 100);
  for (int i = 0; i < 5; ++i) w.Add(100);
  w.Add(500);
  EXPECT_DOUBLE_EQ(w.Estimate(), 100);
  w.Add(500);
  EXPECT_DOUBLE_EQ(w.Estimate(), 500);
}

TEST(DecodeCostEstimator, PriorsUntilMeasuredThenMeasurements) {
  DecodeCostEstimator c(1e-5, 1e-3);
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(3), 1e-5);
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(kLevelText), 1e-3);
  c.Add(3, 100, 0.004);  // 40 us/token
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(3), 4e-5);
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(5), 4e-5);  // unmeasured KV level borrows the measured one
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(kLevelText), 1e-3);
  c.Add(kLevelText, 100, 0.02);
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(kLevelText), 2e-4);
  c.Add(3, 100, 0.002);  // EWMA, half weight on the newest
  EXPECT_DOUBLE_EQ(c.SecondsPerToken(3), 3e-5);
}

TEST(SharedLink, CapacitySamplesScaleWithRegisteredFetchesAndSharesSplitIt) {
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 1e9;
  SharedLink link(o);
  EXPECT_DOUBLE_EQ(link.share_bps(), 1e9);
  const int a = link.Register();
  const int b = link.Register();
  EXPECT_DOUBLE_EQ(link.share_bps(), 5e8);
  link.AddThroughputSample(2e8);  // each of two sees 200 Mbit/s: the link carries 400
  EXPECT_DOUBLE_EQ(link.capacity_bps(), 4e8);
  EXPECT_DOUBLE_EQ(link.share_bps(), 2e8);
  link.Unregister(a);
  EXPECT_DOUBLE_EQ(link.share_bps(), 4e8);
  link.Unregister(b);
  EXPECT_EQ(link.registered(), 0);
}

TEST(SharedLink, ConcurrentUseIsSafe) {
  SharedLink link;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&link] {
      for (int i = 0; i < 2000; ++i) {
        const int id = link.Register();
        link.AddThroughputSample(1e8);
        link.AddRttSample(1e-3);
        (void)link.share_bps();
        link.Unregister(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(link.registered(), 0);
  EXPECT_GT(link.capacity_bps(), 0);
}

}  // namespace
}  // namespace kvstream::scheduler
