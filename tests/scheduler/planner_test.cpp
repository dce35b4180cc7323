// Planner invariants: feasible plans predict in time, infeasible ones are truly so, text when it must,
// deterministic; and a hand-computed pipeline.
#include <gtest/gtest.h>

#include <random>

#include "scheduler/planner.h"

namespace kvstream::scheduler {
namespace {

// Levels: fp16, L1, L3, L6 and text; sizes per token roughly those of a small model.
FetchManifest MakeManifest(int chunks, int tokens, bool with_text, std::mt19937_64* rng = nullptr) {
  FetchManifest m;
  m.num_chunks = chunks;
  m.levels = {{kLevelFp16, 1.0}, {1, 0.99}, {3, 0.96}, {6, 0.80}};
  if (with_text) m.levels.push_back({kLevelText, 1.0});
  const double bytes_per_token[] = {23040, 5000, 2600, 860, 4};
  for (int c = 0; c < chunks; ++c) {
    const double jitter = rng ? 0.7 + 0.6 * static_cast<double>((*rng)() % 1000) / 1000 : 1.0;
    m.chunk_tokens.push_back(tokens);
    m.total_tokens += tokens;
    std::vector<uint64_t> row;
    for (size_t li = 0; li < m.levels.size(); ++li) {
      const double j = (m.levels[li].level >= 1) ? jitter : 1.0;
      row.push_back(static_cast<uint64_t>(bytes_per_token[li] * tokens * j));
    }
    m.bytes.push_back(row);
  }
  return m;
}

PlanRequest MakeRequest(const FetchManifest& m, double bandwidth_bps, double ready_by_s) {
  PlanRequest r;
  r.manifest = &m;
  r.ready_by_s = ready_by_s;
  r.bandwidth_bps = bandwidth_bps;
  r.rtt_s = 1e-3;
  for (const auto& l : m.levels) r.s_per_token.push_back(l.level == kLevelText ? 5e-4 : 1e-5);
  return r;
}

std::vector<int> Fastest(const PlanRequest& r, int text_prefix) {
  const FetchManifest& m = *r.manifest;
  std::vector<int> plan;
  for (int c = r.first_chunk; c < m.num_chunks; ++c) {
    int best = -1;
    for (int li = 0; li < static_cast<int>(m.levels.size()); ++li) {
      const bool text = m.levels[li].level == kLevelText;
      if (text != (c - r.first_chunk < text_prefix)) continue;
      if (best < 0 || m.bytes[c][li] < m.bytes[c][best]) best = li;
    }
    plan.push_back(best);
  }
  return plan;
}

TEST(PredictReady, MatchesAHandComputedPipeline) {
  FetchManifest m;
  m.num_chunks = 2;
  m.levels = {{1, 0.9}};
  m.chunk_tokens = {100, 100};
  m.bytes = {{125000}, {250000}};  // 1 Mbit and 2 Mbit
  PlanRequest r;
  r.manifest = &m;
  r.bandwidth_bps = 1e6;
  r.rtt_s = 0.1;
  r.s_per_token = {0.005};  // 0.5 s per chunk
  r.link_free_s = 1.0;
  // chunk 0 in at 1 + 0.1 + 1 = 2.1, decoded 2.6; chunk 1 in at 2.1 + 0.1 + 2 = 4.2, decoded 4.7.
  EXPECT_NEAR(PredictReady(r, {0, 0}), 4.7, 1e-12);
  r.s_per_token = {0.05};  // decode-bound: 5 s per chunk; chunk 1 waits for the decoder (7.1) -> 12.1
  EXPECT_NEAR(PredictReady(r, {0, 0}), 12.1, 1e-12);
}

TEST(PlanRemaining, AmpleTimeGivesTheBestQuality) {
  const FetchManifest m = MakeManifest(8, 256, false);
  PlanRequest r = MakeRequest(m, 1e9, 100.0);
  const Plan p = PlanRemaining(r);
  ASSERT_TRUE(p.feasible);
  for (int li : p.level_index) EXPECT_EQ(m.levels[li].level, kLevelFp16);
  EXPECT_DOUBLE_EQ(p.quality, 1.0);
}

TEST(PlanRemaining, InvariantsOverRandomCases) {
  std::mt19937_64 rng(7);
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const bool text = trial % 2 == 0;
    const FetchManifest m = MakeManifest(1 + static_cast<int>(rng() % 24), 64 + static_cast<int>(rng() % 512), text, &rng);
    const double bw = 1e6 * (1 + static_cast<double>(rng() % 2000));
    const double ready_by = 0.005 + 1.0 * static_cast<double>(rng() % 1000) / 1000;
    PlanRequest r = MakeRequest(m, bw, ready_by);
    r.first_chunk = static_cast<int>(rng() % m.num_chunks);
    r.link_free_s = 0.001 * static_cast<double>(rng() % 100);
    r.decoder_free_s = 0.001 * static_cast<double>(rng() % 200);
    const Plan p = PlanRemaining(r);
    ASSERT_EQ(static_cast<int>(p.level_index.size()), m.num_chunks - r.first_chunk);
    EXPECT_NEAR(PredictReady(r, p.level_index), p.ready_s, 1e-9);
    if (p.feasible) {
      ++feasible;
      EXPECT_LE(p.ready_s, ready_by + 1e-9);
      // Never worse than sending every chunk at its fastest level when that is in time.
      double fastest_quality = 0;
      for (size_t k = 0; k < p.level_index.size(); ++k) fastest_quality += m.levels[Fastest(r, 0)[k]].quality;
      double quality = 0;
      for (int li : p.level_index) quality += m.levels[li].quality;
      EXPECT_GE(quality + 1e-9, fastest_quality);
    } else {
      ++infeasible;
      // Infeasible only when no text prefix with the smallest levels would be in time either.
      const int remaining = m.num_chunks - r.first_chunk;
      for (int t = 0; t <= (text ? remaining : 0); ++t) {
        EXPECT_GT(PredictReady(r, Fastest(r, t)), ready_by) << "trial " << trial << " text prefix " << t;
        EXPECT_LE(p.ready_s, PredictReady(r, Fastest(r, t)) + 1e-9);
      }
    }
  }
  EXPECT_GT(feasible, 50);
  EXPECT_GT(infeasible, 20);
}

TEST(PlanRemaining, FallsBackToTextWhenNoLevelIsFastEnough) {
  const FetchManifest m = MakeManifest(4, 256, true);
  // 1 Mbit/s: the smallest level takes 1.76 s per chunk; text recompute 0.128 s per chunk.
  const PlanRequest r = MakeRequest(m, 1e6, 1.0);
  const Plan p = PlanRemaining(r);
  ASSERT_TRUE(p.feasible);
  for (int li : p.level_index) EXPECT_EQ(m.levels[li].level, kLevelText);
}

TEST(PlanRemaining, PutsTextFirstSoItsRecomputeOverlapsLaterTransfers) {
  const FetchManifest m = MakeManifest(8, 256, true);
  // Neither all-text (8 x 0.128 s = 1.02 s) nor all-L6 (8 x 1.76 Mbit at 10 Mbit/s = 1.41 s) fits in
  // 0.8 s; a text prefix recomputed while the rest transfers does.
  const PlanRequest r = MakeRequest(m, 1e7, 0.8);
  const Plan p = PlanRemaining(r);
  ASSERT_TRUE(p.feasible);
  bool seen_kv = false, mixed = false;
  for (int li : p.level_index) {
    if (m.levels[li].level == kLevelText) {
      EXPECT_FALSE(seen_kv) << "text after a KV chunk";
    } else {
      seen_kv = true;
    }
    mixed |= seen_kv;
  }
  EXPECT_TRUE(mixed);
  EXPECT_EQ(m.levels[p.level_index[0]].level, kLevelText);
}

TEST(PlanRemaining, SaysInfeasibleWhenEvenTheFastestIsLate) {
  const FetchManifest m = MakeManifest(4, 256, false);
  const PlanRequest r = MakeRequest(m, 1e6, 1.0);
  const Plan p = PlanRemaining(r);
  EXPECT_FALSE(p.feasible);
  for (int li : p.level_index) EXPECT_EQ(m.levels[li].level, 6);  // the fastest, to be as little late as possible
}

TEST(PlanRemaining, IsDeterministic) {
  std::mt19937_64 rng(3);
  const FetchManifest m = MakeManifest(30, 256, true, &rng);
  const PlanRequest r = MakeRequest(m, 2e8, 0.9);
  const Plan a = PlanRemaining(r);
  const Plan b = PlanRemaining(r);
  EXPECT_EQ(a.level_index, b.level_index);
  EXPECT_EQ(a.ready_s, b.ready_s);
}

TEST(PlanRemaining, MinGainStopsBuyingTinyQualityWithLinkTime) {
  const FetchManifest m = MakeManifest(8, 256, false);
  PlanRequest r = MakeRequest(m, 1e9, 10.0);
  r.min_gain_per_s = 1e6;  // nothing is worth that much: every chunk stays at its cheapest level
  const Plan p = PlanRemaining(r);
  ASSERT_TRUE(p.feasible);
  for (int li : p.level_index) EXPECT_EQ(m.levels[li].level, 6);
}

}  // namespace
}  // namespace kvstream::scheduler
