// The kvstream and cachegen-rule policies driven by synthetic telemetry, and fetches sharing a link.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "kvstream/scheduler.h"
#include "bench/simulator.h"
#include "bench/trace.h"

namespace kvstream {
namespace {

// 16 chunks of 256 tokens at fp16, L1, L3, L6 and text.
FetchManifest Manifest(bool with_text) {
  FetchManifest m;
  m.num_chunks = 16;
  m.levels = {{kLevelFp16, 1.0}, {1, 0.99}, {3, 0.96}, {6, 0.80}};
  if (with_text) m.levels.push_back({kLevelText, 1.0});
  const uint64_t sizes[] = {5'898'240, 1'280'000, 665'600, 220'160, 1024};
  for (int c = 0; c < m.num_chunks; ++c) {
    m.chunk_tokens.push_back(256);
    m.total_tokens += 256;
    m.bytes.emplace_back(sizes, sizes + m.levels.size());
  }
  return m;
}

int IndexOf(const FetchManifest& m, Level level) {
  for (size_t i = 0; i < m.levels.size(); ++i) {
    if (m.levels[i].level == level) return static_cast<int>(i);
  }
  return -1;
}

// Feeds chunk `c` as if it moved at `bps` and decoded in 1 ms; returns when it was decoded.
double Feed(LevelPolicy& p, const FetchManifest& m, int c, Level level, double now, double bps) {
  ChunkTelemetry t;
  t.chunk = c;
  t.level = level;
  t.bytes = m.bytes[c][IndexOf(m, level)];
  t.requested_at_s = now;
  t.transfer_s = static_cast<double>(t.bytes) * 8 / bps;
  t.received_at_s = now + 1e-3 + t.transfer_s;
  t.decode_s = 1e-3;
  t.decoded_at_s = t.received_at_s + t.decode_s;
  p.ObserveTransfer(t);
  p.Observe(t);
  return t.received_at_s;
}

double Quality(const FetchManifest& m, Level level) { return m.levels[IndexOf(m, level)].quality; }

// A sender without a profile advertises NaN quality for int8 and the lossy levels: the policy ranks them by
// size, so it takes the biggest level the link affords and a smaller one when the link is short, never a
// NaN-quality level "because it compares best".
TEST(KvstreamPolicy, LevelsOfUnknownQualityAreRankedBySize) {
  FetchManifest m = Manifest(false);
  for (auto& l : m.levels) {
    if (l.level != kLevelFp16) l.quality = std::nan("");
  }
  KvstreamPolicyOptions o;
  o.min_gain = 0;
  o.prior_bandwidth_bps = 10e9;  // fp16 throughout: 75 ms of a 5 s deadline
  auto fast = MakeKvstreamPolicy(o);
  fast->Begin(m, 5.0);
  EXPECT_EQ(fast->Choose(0, 0), kLevelFp16);
  EXPECT_TRUE(fast->feasible());

  o.prior_bandwidth_bps = 100e6;  // fp16 7.5 s, L1 1.6 s, L3 0.85 s, L6 0.28 s
  auto slow = MakeKvstreamPolicy(o);
  slow->Begin(m, 1.0);
  const Level chosen = slow->Choose(0, 0);
  EXPECT_TRUE(chosen == 3 || chosen == 6) << LevelName(chosen);
  EXPECT_TRUE(slow->feasible()) << slow->status().ToString();

  // With every quality unknown the ranking still holds: plenty of link buys the biggest level.
  for (auto& l : m.levels) l.quality = std::nan("");
  o.prior_bandwidth_bps = 10e9;
  auto unknown = MakeKvstreamPolicy(o);
  unknown->Begin(m, 5.0);
  EXPECT_EQ(unknown->Choose(0, 0), kLevelFp16);
}

// The ladder's real size steps are uneven (SmolLM2, 256-token chunks, in-chunk tables): ranked by size
// alone most levels fall off the planner's hull and a short link gets some chunks big and the others at
// L6. Assumed qualities that are concave in bytes spread the link evenly.
TEST(KvstreamPolicy, LevelsOfUnknownQualityShareTheLinkEvenly) {
  FetchManifest m;
  m.num_chunks = 4;
  m.levels = {{kLevelFp16, 1.0}, {kLevelInt8, 0}, {1, 0}, {2, 0}, {3, 0}, {4, 0}, {5, 0}, {6, 0}};
  for (size_t li = 1; li < m.levels.size(); ++li) m.levels[li].quality = std::nan("");
  const uint64_t sizes[] = {5'899'748, 2'981'348, 2'058'970, 1'837'690, 1'563'828, 1'386'128, 1'200'662, 854'754};
  for (int c = 0; c < m.num_chunks; ++c) {
    m.chunk_tokens.push_back(256);
    m.total_tokens += 256;
    m.bytes.emplace_back(sizes, sizes + m.levels.size());
  }
  KvstreamPolicyOptions o;
  o.drop_factor = 1;
  o.prior_bandwidth_bps = 250e6;  // 0.85 x 200 ms affords about 1.3 MB a chunk: L4 or L5 each
  auto p = MakeKvstreamPolicy(o);
  p->Begin(m, 0.2);
  double now = 0;
  std::vector<Level> chosen;
  for (int c = 0; c < m.num_chunks; ++c) {
    chosen.push_back(p->Choose(c, now));
    now = Feed(*p, m, c, chosen.back(), now, o.prior_bandwidth_bps);
  }
  EXPECT_TRUE(p->feasible()) << p->status().ToString();
  // Ranked by size alone this went L6 L6 L3 L1. The last chunk may still go bigger than the first (the
  // safety margin is a fraction of the time left, so slack comes free as the fetch goes on), but no chunk
  // is left at the smallest level while the link affords more on average.
  for (Level level : chosen) {
    EXPECT_TRUE(IsLossyLevel(level) && level < 6)
        << LevelName(chosen[0]) << " " << LevelName(chosen[1]) << " " << LevelName(chosen[2]) << " " << LevelName(chosen[3]);
  }
}

TEST(KvstreamPolicy, ReactsToASustainedDropAtOnceAndShrugsOffASingleSlowChunk) {
  const FetchManifest m = Manifest(false);
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 1e9;
  o.min_gain = 0;
  auto p = MakeKvstreamPolicy(o);
  p->Begin(m, 5.0);  // fp16 throughout takes 0.75 s at 1 Gbit/s, 7.5 s at 100 Mbit/s
  double now = 0;
  Level level = p->Choose(0, now);
  for (int c = 0; c < 4; ++c) {
    now = Feed(*p, m, c, level, now, 1e9);
    level = p->Choose(c + 1, now);
  }
  const double steady_quality = Quality(m, level);
  EXPECT_EQ(level, kLevelFp16);
  // One slow chunk: the next chunk may be cautious, the one after is back to the steady level.
  now = Feed(*p, m, 4, level, now, 1e8);
  level = p->Choose(5, now);
  now = Feed(*p, m, 5, level, now, 1e9);
  level = p->Choose(6, now);
  EXPECT_EQ(Quality(m, level), steady_quality);
  EXPECT_NEAR(p->bandwidth_estimate_bps(), 1e9, 1e3);
  // A sustained 10x drop: the very next choice is planned with the lower rate.
  now = Feed(*p, m, 6, level, now, 1e8);
  EXPECT_NEAR(p->bandwidth_estimate_bps(), 1e8, 1e3);
  level = p->Choose(7, now);
  EXPECT_LT(Quality(m, level), steady_quality);
  EXPECT_TRUE(p->feasible());
}

TEST(KvstreamPolicy, SaysEarlyWhenTheDeadlineCannotBeMet) {
  const FetchManifest m = Manifest(false);
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 1e6;  // 16 chunks of L6 need 28 s
  auto p = MakeKvstreamPolicy(o);
  p->Begin(m, 1.0);
  EXPECT_EQ(p->Choose(0, 0), 6);  // the fastest, to be as little late as possible
  EXPECT_FALSE(p->feasible());
  EXPECT_EQ(p->status().code(), StatusCode::kTimeout);
  EXPECT_NE(p->status().message().find("deadline"), std::string::npos);
}

TEST(KvstreamPolicy, FallsBackToTextWhenTheLinkIsTooSlow) {
  const FetchManifest m = Manifest(true);
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 1e6;
  o.prior_recompute_s_per_token = 1e-4;  // 26 ms per chunk: all 16 in 0.4 s
  auto p = MakeKvstreamPolicy(o);
  p->Begin(m, 1.0);
  EXPECT_EQ(p->Choose(0, 0), kLevelText);
  EXPECT_TRUE(p->feasible());
}

TEST(KvstreamPolicy, RejectsAMalformedManifestWithoutCrashing) {
  FetchManifest m = Manifest(false);
  m.bytes[3].pop_back();
  auto p = MakeKvstreamPolicy();
  p->Begin(m, 1.0);
  EXPECT_EQ(p->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p->status().message().find("bytes[3]"), std::string::npos);
  EXPECT_TRUE(IsValidLevel(p->Choose(0, 0)));
}

TEST(CacheGenRule, TakesTheBestLevelUnderAnEvenSplitOfTheDeadlineElseText) {
  const FetchManifest m = Manifest(true);
  CacheGenRuleOptions o;
  o.prior_bandwidth_bps = 1e9;
  auto p = MakeCacheGenRulePolicy(o);
  p->Begin(m, 1.6);  // 0.1 s per chunk: 100 Mbit at 1 Gbit/s
  EXPECT_EQ(p->Choose(0, 0), kLevelFp16);  // 47 Mbit: 47 ms
  Feed(*p, m, 0, kLevelFp16, 0, 1e8);      // measured 100 Mbit/s: fp16 needs 0.47 s, L1 0.10 s (not under)
  EXPECT_EQ(p->Choose(1, 0.5), 3);
  Feed(*p, m, 1, 3, 0.5, 1e6);  // 1 Mbit/s: nothing fits
  EXPECT_EQ(p->Choose(2, 6), kLevelText);
}

TEST(MakeLevelPolicy, KnowsTheNames) {
  for (const char* name : {"kvstream", "cachegen-rule", "fixed-L3", "fixed-int8", "fixed-fp16", "fixed-text"}) {
    auto p = MakeLevelPolicy(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ((*p)->name(), name);
  }
  EXPECT_FALSE(MakeLevelPolicy("fixed-L99").ok());
  EXPECT_FALSE(MakeLevelPolicy("greedy").ok());
}

// A stream layer that reports chunks only once decoded (no ObserveTransfer), with its Choose calls
// still overlapping decodes: the policy must treat unreported chunks as on the wire and stay in time.
class DecodeReportsOnly final : public LevelPolicy {
 public:
  explicit DecodeReportsOnly(LevelPolicy* inner) : inner_(inner) {}
  std::string name() const override { return inner_->name(); }
  void Begin(const FetchManifest& m, double d) override { inner_->Begin(m, d); }
  Level Choose(int c, double now) override { return inner_->Choose(c, now); }
  void Observe(const ChunkTelemetry& t) override { inner_->Observe(t); }

 private:
  LevelPolicy* inner_;
};

TEST(KvstreamPolicy, StaysInTimeWhenArrivalsAreReportedOnlyWithDecodes) {
  const FetchManifest m = Manifest(true);
  auto trace = bench::ParseTrace("0 500\n0.2 50\n", "drop");  // fixed-L1 would need 1.5 s
  ASSERT_TRUE(trace.ok());
  bench::ReceiverCosts costs{{{kLevelFp16, 2e-6}, {1, 5e-5}, {3, 5e-5}, {6, 5e-5}, {kLevelText, 5e-4}}};
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 5e8;
  o.prior_decode_s_per_token = 5e-5;
  o.prior_recompute_s_per_token = 5e-4;
  auto inner = MakeKvstreamPolicy(o);
  DecodeReportsOnly policy(inner.get());
  bench::SimOptions sim;
  sim.costs = &costs;
  auto out = bench::Simulate(*trace, sim, {{0, 1.0, &m, &policy}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE((*out)[0].met) << (*out)[0].ready_s;
  EXPECT_GT((*out)[0].quality, 0.8);
  FixedLevelPolicy fixed(1);
  auto baseline = bench::Simulate(*trace, sim, {{0, 1.0, &m, &fixed}});
  ASSERT_TRUE(baseline.ok());
  EXPECT_FALSE((*baseline)[0].met);  // the case is not trivial
}

// The stream layer's LinkPrior replaces the configured prior for the first chunk.
TEST(KvstreamPolicy, LinkPriorFromTheStreamLayerSetsTheFirstChoice) {
  const FetchManifest m = Manifest(false);
  KvstreamPolicyOptions o;
  o.min_gain = 0;
  o.prior_bandwidth_bps = 100e6;  // fp16 would take 7.5 s
  auto p = MakeKvstreamPolicy(o);
  p->Begin(m, 5.0);
  EXPECT_NE(p->Choose(0, 0), kLevelFp16);
  auto told = MakeKvstreamPolicy(o);
  told->SetLinkPrior({40e9, 1e-4});  // fp16 throughout: 19 ms, and 75 ms after a fourfold drop
  told->Begin(m, 5.0);
  EXPECT_EQ(told->Choose(0, 0), kLevelFp16);
  EXPECT_DOUBLE_EQ(told->bandwidth_estimate_bps(), 40e9);
}

// With drop_factor F the plan stays feasible if the link falls to 1/F at any moment: on a link that falls
// fourfold at different points of the fetch, F = 4 meets every deadline; trusting the estimate (F = 1)
// buys fp16 (0.75 s of a 1 s deadline) and misses when the fall comes early.
TEST(KvstreamPolicy, SurvivesAFallOfTheLinkByItsDropFactor) {
  // Manifest()'s context in 4 chunks of 1024 tokens: fp16 0.75 s at 1 Gbit/s, 3 s at 250 Mbit/s.
  FetchManifest m = Manifest(false);
  m.num_chunks = 4;
  m.chunk_tokens.assign(4, 1024);
  for (auto& row : m.bytes) {
    for (auto& b : row) b *= 4;
  }
  m.bytes.resize(4);
  bench::ReceiverCosts costs{{{kLevelFp16, 1e-6}, {1, 1e-5}, {3, 1e-5}, {6, 1e-5}}};
  bench::SimOptions sim;
  sim.costs = &costs;
  int missed_trusting = 0;
  for (double fall_at : {0.05, 0.2, 0.4, 0.6, 0.8}) {
    auto trace = bench::ParseTrace("0 1000\n" + std::to_string(fall_at) + " 250\n", "fall");
    ASSERT_TRUE(trace.ok()) << trace.status().ToString();
    for (double factor : {4.0, 1.0}) {
      KvstreamPolicyOptions o;
      o.min_gain = 0;
      o.prior_bandwidth_bps = 1e9;
      o.drop_factor = factor;
      auto p = MakeKvstreamPolicy(o);
      auto out = bench::Simulate(*trace, sim, {{0, 1.0, &m, p.get()}});
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      if (factor > 1) {
        EXPECT_TRUE((*out)[0].met) << "fall at " << fall_at << ": ready at " << (*out)[0].ready_s;
      } else {
        missed_trusting += !(*out)[0].met;
      }
    }
  }
  EXPECT_GT(missed_trusting, 0);  // the case is not trivial
}

TEST(SharedLinkPolicies, ConcurrentFetchesBothMeetTheirDeadlinesWithSimilarQuality) {
  const FetchManifest m = Manifest(false);
  auto trace = bench::ParseTrace("0 200\n", "200M");
  ASSERT_TRUE(trace.ok());
  bench::ReceiverCosts costs{{{kLevelFp16, 1e-6}, {1, 1e-5}, {3, 1e-5}, {6, 1e-5}}};
  KvstreamPolicyOptions o;
  o.prior_bandwidth_bps = 2e8;
  auto link = std::make_shared<SharedLink>(o);
  auto a = MakeKvstreamPolicy(o, link);
  auto b = MakeKvstreamPolicy(o, link);
  bench::SimOptions sim;
  sim.costs = &costs;
  // b starts when a is a quarter through; alone at 200 Mbit/s, either could afford L1 throughout.
  auto out = bench::Simulate(*trace, sim, {{0, 1.0, &m, a.get()}, {0.25, 1.0, &m, b.get()}});
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE((*out)[0].met) << (*out)[0].ready_s;
  EXPECT_TRUE((*out)[1].met) << (*out)[1].ready_s;
  EXPECT_NEAR((*out)[0].quality, (*out)[1].quality, 0.03);
  EXPECT_EQ(link->registered(), 0);  // both left the link when done
}

}  // namespace
}  // namespace kvstream
