// The trace simulator against hand-computed cases, and policies run through it.
#include <gtest/gtest.h>

#include <memory>

#include "kvstream/scheduler.h"
#include "bench/manifest_file.h"
#include "bench/simulator.h"
#include "bench/trace.h"

namespace kvstream::bench {
namespace {

LinkTrace Trace(const std::string& text) {
  auto t = ParseTrace(text, "test");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

FetchManifest OneLevel(std::vector<uint64_t> chunk_bytes, int tokens) {
  FetchManifest m;
  m.num_chunks = static_cast<int>(chunk_bytes.size());
  m.levels = {{2, 0.9}};
  for (uint64_t b : chunk_bytes) {
    m.chunk_tokens.push_back(tokens);
    m.total_tokens += tokens;
    m.bytes.push_back({b});
  }
  return m;
}

TEST(Simulate, OneChunkPaysRttTransferAndDecode) {
  const LinkTrace trace = Trace("0 1\n");  // 1 Mbit/s
  const FetchManifest m = OneLevel({125000}, 100);  // 1 Mbit
  ReceiverCosts costs{{{2, 1e-3}}};  // 0.1 s per chunk
  FixedLevelPolicy policy(2);
  SimOptions o;
  o.rtt_s = 0.01;
  o.costs = &costs;
  auto out = Simulate(trace, o, {{0, 2.0, &m, &policy}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 1u);
  const SimOutcome& r = (*out)[0];
  ASSERT_EQ(r.chunks.size(), 1u);
  EXPECT_NEAR(r.chunks[0].received_s, 1.01, 1e-9);
  EXPECT_NEAR(r.ready_s, 1.11, 1e-9);
  EXPECT_TRUE(r.met);
  EXPECT_DOUBLE_EQ(r.quality, 0.9);
}

TEST(Simulate, TransferIntegratesARateChange) {
  const LinkTrace trace = Trace("0 1\n0.5 2\n");  // 0.5 Mbit in the first 0.5 s, then 2 Mbit/s
  const FetchManifest m = OneLevel({125000}, 100);
  ReceiverCosts costs{{{2, 0}}};
  FixedLevelPolicy policy(2);
  SimOptions o;
  o.rtt_s = 0;
  o.costs = &costs;
  auto out = Simulate(trace, o, {{0, 2.0, &m, &policy}});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].ready_s, 0.75, 1e-9);
}

TEST(Simulate, DecodeOfOneChunkOverlapsTransferOfTheNext) {
  const LinkTrace trace = Trace("0 1\n");
  const FetchManifest m = OneLevel({125000, 125000}, 100);
  ReceiverCosts costs{{{2, 5e-3}}};  // 0.5 s per chunk
  FixedLevelPolicy policy(2);
  SimOptions o;
  o.rtt_s = 0;
  o.costs = &costs;
  auto out = Simulate(trace, o, {{0, 5.0, &m, &policy}});
  ASSERT_TRUE(out.ok());
  // chunk 0: in at 1.0, decoded 1.5; chunk 1: in at 2.0 (requested at 1.0), decoded 2.5.
  EXPECT_NEAR((*out)[0].chunks[1].requested_s, 1.0, 1e-9);
  EXPECT_NEAR((*out)[0].ready_s, 2.5, 1e-9);
}

TEST(Simulate, ConcurrentFetchesShareTheLinkEqually) {
  const LinkTrace trace = Trace("0 2\n");
  const FetchManifest m = OneLevel({125000}, 100);
  ReceiverCosts costs{{{2, 0}}};
  FixedLevelPolicy a(2), b(2);
  SimOptions o;
  o.rtt_s = 0;
  o.costs = &costs;
  // b arrives at 0.25: alone, a moves 0.5 Mbit; then both at 1 Mbit/s: a done at 0.75; b has 0.5 Mbit
  // left and finishes alone at 2 Mbit/s at 1.0.
  auto out = Simulate(trace, o, {{0, 5.0, &m, &a}, {0.25, 5.0, &m, &b}});
  ASSERT_TRUE(out.ok());
  EXPECT_NEAR((*out)[0].ready_s, 0.75, 1e-9);
  EXPECT_NEAR((*out)[1].ready_s, 0.75, 1e-9);  // since its own arrival at 0.25
}

TEST(Simulate, RefusesALevelTheManifestDoesNotOffer) {
  const LinkTrace trace = Trace("0 1\n");
  const FetchManifest m = OneLevel({1000}, 10);
  ReceiverCosts costs{{{2, 0}}};
  FixedLevelPolicy policy(5);
  SimOptions o;
  o.costs = &costs;
  auto out = Simulate(trace, o, {{0, 1.0, &m, &policy}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("L5"), std::string::npos);
}

TEST(ParseTrace, RejectsMalformedTraces) {
  EXPECT_FALSE(ParseTrace("", "t").ok());
  EXPECT_FALSE(ParseTrace("1 100\n", "t").ok());              // must start at 0
  EXPECT_FALSE(ParseTrace("0 100\n0 200\n", "t").ok());       // times must increase
  EXPECT_FALSE(ParseTrace("0 0\n", "t").ok());                // zero rate
  EXPECT_FALSE(ParseTrace("0 100 7\n", "t").ok());            // extra field
  EXPECT_FALSE(ParseTrace("0 fast\n", "t").ok());
  auto ok = ParseTrace("# c\n\n0 100 # comment\n1.5 10\n", "t");
  ASSERT_TRUE(ok.ok());
  EXPECT_DOUBLE_EQ(ok->RateAt(1.4), 100e6);
  EXPECT_DOUBLE_EQ(ok->RateAt(1.5), 10e6);
  EXPECT_DOUBLE_EQ(ok->NextChangeAfter(0.2), 1.5);
}

// The shipped traces and manifest, and the bench's headline claims on drop10x in miniature.
class ShippedBench : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadManifestFile(std::string(KVSTREAM_SOURCE_DIR) + "/bench/traces/smollm2-4k.manifest.json");
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    manifest_ = *m;
  }

  // Runs `requests` sequential fetches of the manifest with deadlines spread over +-10%.
  std::vector<SimOutcome> Run(const std::string& trace_name, const std::string& policy_name, int requests) {
    auto trace = LoadTrace(trace_name, std::string(KVSTREAM_SOURCE_DIR) + "/bench/traces");
    EXPECT_TRUE(trace.ok()) << trace.status().ToString();
    KvstreamPolicyOptions o;
    o.prior_bandwidth_bps = trace->RateAt(0);
    // As `bench adapt` does: a receiver knows its own decode and recompute speed, not the link's.
    o.prior_decode_s_per_token = manifest_.costs.s_per_token.at(1);
    o.prior_recompute_s_per_token = manifest_.costs.s_per_token.at(kLevelText);
    std::vector<SimOutcome> all;
    for (int i = 0; i < requests; ++i) {
      auto policy = MakeLevelPolicy(policy_name, o);
      EXPECT_TRUE(policy.ok());
      SimOptions sim;
      sim.costs = &manifest_.costs;
      const double deadline = 2.0 * (0.9 + 0.2 * i / std::max(1, requests - 1));
      auto out = Simulate(*trace, sim, {{0, deadline, &manifest_.manifest, policy->get()}});
      EXPECT_TRUE(out.ok());
      all.push_back((*out)[0]);
    }
    return all;
  }

  static double Attainment(const std::vector<SimOutcome>& v) {
    double met = 0;
    for (const auto& o : v) met += o.met;
    return met / v.size();
  }
  static double Quality(const std::vector<SimOutcome>& v) {
    double q = 0;
    for (const auto& o : v) q += o.quality;
    return q / v.size();
  }

  ManifestFile manifest_;
};

TEST_F(ShippedBench, AllShippedTracesParse) {
  for (const char* name : {"constant", "drop10x", "step-up", "oscillating", "random-walk"}) {
    auto t = LoadTrace(name, std::string(KVSTREAM_SOURCE_DIR) + "/bench/traces");
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().ToString();
  }
}

// The target on the measured SmolLM2 manifest, in the simulator: kvstream meets >= 95 % of
// drop10x's deadlines at a mean quality no worse than the best fixed level that also does, and more of
// them than the CacheGen rule. (The rule's mean quality is higher here only because, missing every
// deadline, it falls back to text, which the simulator scores as exact; on the real link, where the
// decode node cannot recompute, kvstream beats it on both: lab/NOTEBOOK.md, "Adaptive streaming".)
TEST_F(ShippedBench, KvstreamMeetsTheDrop10xTargetInTheSimulator) {
  const auto kv = Run("drop10x", "kvstream", 8);
  EXPECT_GE(Attainment(kv), 0.95);
  double best_fixed = 0;
  for (const LevelInfo& l : manifest_.manifest.levels) {
    const auto fixed = Run("drop10x", "fixed-" + LevelName(l.level), 8);
    if (Attainment(fixed) >= 0.95) best_fixed = std::max(best_fixed, Quality(fixed));
  }
  EXPECT_GT(best_fixed, 0);
  EXPECT_GE(Quality(kv), best_fixed);
  const auto rule = Run("drop10x", "cachegen-rule", 8);
  EXPECT_GT(Attainment(kv), Attainment(rule));
}

TEST_F(ShippedBench, IsDeterministic) {
  const auto a = Run("random-walk", "kvstream", 2);
  const auto b = Run("random-walk", "kvstream", 2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ready_s, b[i].ready_s);
    ASSERT_EQ(a[i].chunks.size(), b[i].chunks.size());
    for (size_t c = 0; c < a[i].chunks.size(); ++c) EXPECT_EQ(a[i].chunks[c].level, b[i].chunks[c].level);
  }
}

}  // namespace
}  // namespace kvstream::bench
