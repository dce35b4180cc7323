// The order statistics the benchmarks report: interpolated percentiles, the measured-value median, means.
#include <gtest/gtest.h>

#include <vector>

#include "bench/statistics.h"

namespace kvstream::bench {
namespace {

TEST(Percentile, InterpolatesBetweenTheNearestRanks) {
  const std::vector<double> v = {40, 10, 30, 20};  // sorted: 10 20 30 40, ranks 0..3
  EXPECT_DOUBLE_EQ(Percentile(v, 0.0), 10);
  EXPECT_DOUBLE_EQ(Percentile(v, 1.0), 40);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 25);    // rank 1.5
  EXPECT_DOUBLE_EQ(Percentile(v, 0.95), 38.5); // rank 2.85
  EXPECT_DOUBLE_EQ(Percentile({7}, 0.95), 7);
  EXPECT_DOUBLE_EQ(Percentile({}, 0.95), 0);
}

TEST(Percentile, OfOneToAHundredIsTheRankPlusOne) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(v, 0.95), 95.05);  // rank 94.05
  EXPECT_DOUBLE_EQ(Percentile(v, 0.5), 50.5);
}

TEST(Median, IsAMeasuredValueTheUpperMiddleOfAnEvenCount) {
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 3, 2}), 3);
  EXPECT_DOUBLE_EQ(Median({5}), 5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

TEST(Mean, AveragesAndIsZeroForNoSamples) {
  EXPECT_DOUBLE_EQ(Mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(Mean({}), 0);
}

}  // namespace
}  // namespace kvstream::bench
