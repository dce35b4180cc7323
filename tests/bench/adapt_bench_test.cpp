// `bench adapt`'s library: the workload is a pure function of its seed and varies what it says it varies,
// by no more than it says; the summary row counts what it claims; a simulated run on the shipped trace and
// manifest is deterministic, gives a row per default policy and refuses out-of-range options naming the flag.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "bench/adapt_bench.h"
#include "bench/data_dir.h"

namespace kvstream::bench {
namespace {

const std::string kBenchData = std::string(KVSTREAM_SOURCE_DIR) + "/bench";

ManifestFile Shipped() {
  auto m = LoadManifestFile(kBenchData + "/traces/smollm2-4k.manifest.json");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

// Points the data folder at the source tree's bench/, whatever folder the test binary was built in.
class WithBenchData : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv(kBenchDataEnv, kBenchData.c_str(), 1); }
  void TearDown() override { ::unsetenv(kBenchDataEnv); }
};

TEST(MakeWorkload, IsTheSameForTheSameSeedAndDiffersForAnother) {
  const ManifestFile base = Shipped();
  const Workload a = MakeWorkload(base, 12, 3, 2.0, 7);
  const Workload b = MakeWorkload(base, 12, 3, 2.0, 7);
  const Workload c = MakeWorkload(base, 12, 3, 2.0, 8);
  ASSERT_EQ(a.manifests.size(), 12u);
  EXPECT_EQ(a.deadlines_s, b.deadlines_s);
  EXPECT_EQ(a.arrivals_s, b.arrivals_s);
  for (size_t r = 0; r < a.manifests.size(); ++r) EXPECT_EQ(a.manifests[r].manifest.bytes, b.manifests[r].manifest.bytes);
  EXPECT_NE(a.deadlines_s, c.deadlines_s);
  EXPECT_NE(a.manifests[0].manifest.bytes, c.manifests[0].manifest.bytes);
}

TEST(MakeWorkload, VariesLossySizesAndDeadlinesWithinTenPercent) {
  const ManifestFile base = Shipped();
  const FetchManifest& m0 = base.manifest;
  const double deadline_s = 2.0;
  const Workload w = MakeWorkload(base, 40, 4, deadline_s, 1);
  bool some_lossy_changed = false;
  for (size_t r = 0; r < w.manifests.size(); ++r) {
    const FetchManifest& m = w.manifests[r].manifest;
    ASSERT_EQ(m.bytes.size(), m0.bytes.size());
    for (size_t c = 0; c < m.bytes.size(); ++c) {
      for (size_t li = 0; li < m.bytes[c].size(); ++li) {
        const double was = static_cast<double>(m0.bytes[c][li]), now = static_cast<double>(m.bytes[c][li]);
        if (IsLossyLevel(m0.levels[li].level)) {
          EXPECT_GE(now, std::floor(0.9 * was)) << "request " << r << " chunk " << c << " level " << li;
          EXPECT_LE(now, std::ceil(1.1 * was)) << "request " << r << " chunk " << c << " level " << li;
          some_lossy_changed |= now != was;
        } else {
          EXPECT_EQ(now, was) << "fp16, int8 and text keep their sizes";
        }
      }
    }
    EXPECT_GE(w.deadlines_s[r], 0.9 * deadline_s);
    EXPECT_LE(w.deadlines_s[r], 1.1 * deadline_s);
    // Batches of 4, staggered by a tenth of the deadline.
    EXPECT_DOUBLE_EQ(w.arrivals_s[r], 0.1 * deadline_s * static_cast<double>(r % 4));
  }
  EXPECT_TRUE(some_lossy_changed);
}

TEST(AdaptSummary, CountsMetQualityLevelsAndFlags) {
  const ManifestFile base = Shipped();
  const Workload w = MakeWorkload(base, 2, 1, 2.0, 1);
  PolicyRun run{"kvstream", {}};
  SimOutcome met;  // in time, all at L4
  met.ready_s = 1.0;
  met.met = true;
  met.quality = 0.97;
  met.chunks = {{0, 4, 1000, 100, 0.97, 0, 0.1, 0.2}};
  SimOutcome missed;  // late, flagged at 0.5 s, half fp16 and half L2
  missed.ready_s = 3.0;
  missed.quality = 0.99;
  missed.infeasible_at_s = 0.5;
  missed.chunks = {{0, kLevelFp16, 4000, 50, 1.0, 0, 1, 2}, {1, 2, 2000, 50, 0.98, 1, 2, 3}};
  run.outcomes = {met, missed};
  const nlohmann::ordered_json j = AdaptSummary(run, "drop10x", w);
  EXPECT_EQ(j["bench"], "adapt");
  EXPECT_EQ(j["trace"], "drop10x");
  EXPECT_EQ(j["requests"], 2);
  EXPECT_DOUBLE_EQ(j["slo_attainment"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["mean_quality"].get<double>(), 0.98);
  EXPECT_DOUBLE_EQ(j["mean_level"].get<double>(), (4.0 * 100 + 2.0 * 50) / 150);
  EXPECT_DOUBLE_EQ(j["p95_ready_ms"].get<double>(), 1000 + 0.95 * 2000);
  EXPECT_DOUBLE_EQ(j["mean_ready_ms"].get<double>(), 2000);
  EXPECT_DOUBLE_EQ(j["level_mix"]["L4"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["level_mix"]["fp16"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["flagged_infeasible"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(j["missed_and_flagged"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(j["mean_flagged_at_ms"].get<double>(), 500);
  EXPECT_DOUBLE_EQ(j["mean_deadline_ms"].get<double>(), 500 * (w.deadlines_s[0] + w.deadlines_s[1]));
  // Other policies carry no flag keys; no lossy tokens give a null mean level.
  PolicyRun fixed{"fixed-fp16", {missed}};
  fixed.outcomes[0].chunks.resize(1);
  const nlohmann::ordered_json f = AdaptSummary(fixed, "drop10x", w);
  EXPECT_TRUE(f["mean_level"].is_null());
  EXPECT_FALSE(f.contains("flagged_infeasible"));
}

using RunAdaptBenchTest = WithBenchData;

TEST_F(RunAdaptBenchTest, SimulatedRunsAreDeterministicWithARowPerDefaultPolicy) {
  AdaptBenchOptions o;
  o.trace = "drop10x";
  o.requests = 6;
  auto a = RunAdaptBench(o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = RunAdaptBench(o);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  // kvstream, cachegen-rule and fixed-<level> for the manifest's 9 levels.
  ASSERT_EQ(a->rows.size(), 11u);
  EXPECT_EQ(a->options.policies.front(), "kvstream");
  EXPECT_EQ(a->options.policies.back(), "fixed-text");
  EXPECT_EQ(a->manifest, kBenchData + "/traces/smollm2-4k.manifest.json");
  for (size_t i = 0; i < a->rows.size(); ++i) {
    EXPECT_EQ(a->rows[i].dump(), b->rows[i].dump());
    EXPECT_EQ(a->rows[i]["link"], "sim");
    EXPECT_EQ(a->rows[i]["requests"], 6);
    EXPECT_EQ(a->runs[i].outcomes.size(), 6u);
  }
}

TEST_F(RunAdaptBenchTest, DefaultsToFortyRequestsAndScalesTheTrace) {
  AdaptBenchOptions o;
  o.trace = "drop10x";
  o.policies = {"fixed-L3"};
  o.time_scale = 0.5;
  auto r = RunAdaptBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r->options.requests, 40);
  auto unscaled = LoadTrace("drop10x", kBenchData + "/traces");
  ASSERT_TRUE(unscaled.ok());
  ASSERT_EQ(r->trace.time_s.size(), unscaled->time_s.size());
  for (size_t i = 0; i < r->trace.time_s.size(); ++i) EXPECT_DOUBLE_EQ(r->trace.time_s[i], 0.5 * unscaled->time_s[i]);
}

TEST_F(RunAdaptBenchTest, RefusesOutOfRangeOptionsNamingTheFlag) {
  const auto refused = [](AdaptBenchOptions o, const std::string& flag) {
    if (o.trace.empty() && flag != "--trace") o.trace = "drop10x";
    auto r = RunAdaptBench(o);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().ToString();
  };
  AdaptBenchOptions o;
  refused(o, "--trace");
  o.requests = 0;
  refused(o, "--requests");
  o = {};
  o.concurrency = 65;
  refused(o, "--concurrency");
  o = {};
  o.deadline_ms = 0;
  refused(o, "--deadline-ms");
  o = {};
  o.drop_factor = 0.5;
  refused(o, "--drop-factor");
  o = {};
  o.time_scale = 0;
  refused(o, "--time-scale");
  o = {};
  o.link = AdaptLink::kReal;
  o.concurrency = 2;
  refused(o, "--concurrency 1");
}

TEST_F(RunAdaptBenchTest, AnUnknownTraceNamesWhereItLooked) {
  AdaptBenchOptions o;
  o.trace = "no-such-trace";
  auto r = RunAdaptBench(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(kBenchData + "/traces/no-such-trace.trace"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace kvstream::bench
