// scheduler/planner.cpp — the search behind PlanRemaining (see docs/scheduler.md, "Planner").
#include "scheduler/planner.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <tuple>

namespace kvstream::scheduler {
namespace {

double TransferS(const PlanRequest& r, int chunk, int li) {
  return r.rtt_s + static_cast<double>(r.manifest->bytes[chunk][li]) * 8.0 / r.bandwidth_bps;
}

double DecodeS(const PlanRequest& r, int chunk, int li) {
  return r.manifest->chunk_tokens[chunk] * r.s_per_token[li];
}

double Quality(const PlanRequest& r, const std::vector<int>& plan) {
  double weighted = 0, tokens = 0;
  for (size_t k = 0; k < plan.size(); ++k) {
    const int t = r.manifest->chunk_tokens[r.first_chunk + static_cast<int>(k)];
    weighted += t * r.manifest->levels[plan[k]].quality;
    tokens += t;
  }
  return tokens > 0 ? weighted / tokens : 1.0;
}

// The non-dominated KV options of one chunk along the upper concave hull of (link seconds, quality x
// tokens), cheapest first: walking it step by step is the best quality bought per second of link.
std::vector<std::pair<double, int>> Hull(const PlanRequest& r, int chunk, const std::vector<int>& kv_levels) {
  std::vector<std::tuple<double, double, int>> options;  // cost, value, level index
  for (int li : kv_levels) {
    options.emplace_back(TransferS(r, chunk, li), r.manifest->levels[li].quality * r.manifest->chunk_tokens[chunk], li);
  }
  std::sort(options.begin(), options.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) < std::get<0>(b);
    return std::get<1>(a) > std::get<1>(b);
  });
  std::vector<std::tuple<double, double, int>> hull;
  for (const auto& o : options) {
    if (!hull.empty() && std::get<1>(o) <= std::get<1>(hull.back())) continue;  // dominated
    while (hull.size() >= 2) {
      const auto& a = hull[hull.size() - 2];
      const auto& b = hull.back();
      // Drop b when it lies on or under the segment a-o (its slope from a is no better than o's).
      const double lhs = (std::get<1>(b) - std::get<1>(a)) * (std::get<0>(o) - std::get<0>(a));
      const double rhs = (std::get<1>(o) - std::get<1>(a)) * (std::get<0>(b) - std::get<0>(a));
      if (lhs > rhs) break;
      hull.pop_back();
    }
    hull.push_back(o);
  }
  std::vector<std::pair<double, int>> out;
  for (const auto& h : hull) out.emplace_back(std::get<0>(h), std::get<2>(h));
  return out;
}

// Chooses KV levels for chunks [from, end) spending at most `budget_s` link seconds, starting from each
// chunk's cheapest option and buying the best quality per second first. Returns false when even the
// cheapest options exceed the budget (`out` then holds them).
bool FillKv(const PlanRequest& r, int from, const std::vector<std::vector<std::pair<double, int>>>& hulls,
            double budget_s, std::vector<int>& out) {
  const int n = static_cast<int>(hulls.size());
  std::vector<int> step(n, 0);
  double spent = 0;
  for (int k = from; k < n; ++k) spent += hulls[k][0].first;
  // Highest gain per second first; ties go to the later chunk, so the chunk sent now keeps the cheaper
  // level and the slack stays in hand until the link has shown more of itself.
  using Item = std::pair<double, int>;
  std::priority_queue<Item> queue;
  auto push = [&](int k) {
    const auto& h = hulls[k];
    if (step[k] + 1 >= static_cast<int>(h.size())) return;
    const int chunk = r.first_chunk + k;
    const double gain = (r.manifest->levels[h[step[k] + 1].second].quality - r.manifest->levels[h[step[k]].second].quality) *
                        r.manifest->chunk_tokens[chunk];
    const double rate = gain / (h[step[k] + 1].first - h[step[k]].first);
    if (rate >= r.min_gain_per_s) queue.emplace(rate, k);
  };
  for (int k = from; k < n; ++k) push(k);
  while (!queue.empty()) {
    const int k = queue.top().second;
    queue.pop();
    const double extra = hulls[k][step[k] + 1].first - hulls[k][step[k]].first;
    if (spent + extra > budget_s) continue;  // this chunk stays where it is
    spent += extra;
    ++step[k];
    push(k);
  }
  for (int k = from; k < n; ++k) out[k] = hulls[k][step[k]].second;
  double cheapest = 0;
  for (int k = from; k < n; ++k) cheapest += hulls[k][0].first;
  return cheapest <= budget_s;
}

}  // namespace

double PredictReady(const PlanRequest& r, const std::vector<int>& level_index) {
  double link = r.link_free_s;
  double decoder = r.decoder_free_s;
  for (size_t k = 0; k < level_index.size(); ++k) {
    const int chunk = r.first_chunk + static_cast<int>(k);
    link += TransferS(r, chunk, level_index[k]);
    decoder = std::max(decoder, link) + DecodeS(r, chunk, level_index[k]);
  }
  return std::max(decoder, r.decoder_free_s);
}

Plan PlanRemaining(const PlanRequest& r) {
  const FetchManifest& m = *r.manifest;
  const int remaining = std::max(0, m.num_chunks - r.first_chunk);
  Plan best;
  best.ready_s = std::numeric_limits<double>::infinity();
  if (remaining == 0) {
    best.feasible = r.decoder_free_s <= r.ready_by_s;
    best.ready_s = r.decoder_free_s;
    best.quality = 1.0;
    return best;
  }
  int text = -1;
  std::vector<int> kv_levels;
  for (int li = 0; li < static_cast<int>(m.levels.size()); ++li) {
    if (m.levels[li].level == kLevelText) {
      text = li;
    } else {
      kv_levels.push_back(li);
    }
  }
  std::vector<std::vector<std::pair<double, int>>> hulls(remaining);
  double max_kv_decode_s_per_token = 0;
  for (int li : kv_levels) max_kv_decode_s_per_token = std::max(max_kv_decode_s_per_token, r.s_per_token[li]);
  if (!kv_levels.empty()) {
    for (int k = 0; k < remaining; ++k) hulls[k] = Hull(r, r.first_chunk + k, kv_levels);
  }

  // How many of the remaining chunks, counted from the next one, go as text: text first lets its
  // prefill overlap the transfer of everything after it. Every count up to 24 is tried, then a grid.
  std::vector<int> text_counts;
  if (text < 0) {
    text_counts = {0};
  } else if (kv_levels.empty()) {
    text_counts = {remaining};
  } else {
    const int dense = std::min(remaining, 24);
    for (int t = 0; t <= dense; ++t) text_counts.push_back(t);
    const int stride = std::max(1, (remaining - dense + 11) / 12);
    for (int t = dense + stride; t < remaining; t += stride) text_counts.push_back(t);
    if (text_counts.back() != remaining) text_counts.push_back(remaining);
  }

  Plan fastest;
  fastest.ready_s = std::numeric_limits<double>::infinity();
  std::vector<int> plan(remaining);
  for (int t : text_counts) {
    for (int k = 0; k < t; ++k) plan[k] = text;
    // Fastest with this many text chunks: every KV chunk at its cheapest option.
    for (int k = t; k < remaining; ++k) plan[k] = hulls[k][0].second;
    const double fastest_ready = PredictReady(r, plan);
    if (fastest_ready < fastest.ready_s) {
      fastest.ready_s = fastest_ready;
      fastest.level_index = plan;
    }
    if (fastest_ready > r.ready_by_s) continue;
    if (t < remaining) {
      double link = r.link_free_s;
      for (int k = 0; k < t; ++k) link += TransferS(r, r.first_chunk + k, text);
      const int last = m.num_chunks - 1;
      double budget = r.ready_by_s - link - m.chunk_tokens[last] * max_kv_decode_s_per_token;
      // The budget counts link seconds only; when decode or text prefill turns out to be the bottleneck
      // the exact prediction overshoots, and the budget shrinks by the overshoot.
      bool ok = false;
      for (int attempt = 0; attempt < 6 && budget > 0; ++attempt) {
        if (!FillKv(r, t, hulls, budget, plan)) break;
        const double ready = PredictReady(r, plan);
        if (ready <= r.ready_by_s) {
          ok = true;
          break;
        }
        budget -= (ready - r.ready_by_s) + 1e-9;
      }
      if (!ok) {
        for (int k = t; k < remaining; ++k) plan[k] = hulls[k][0].second;  // known to fit
      }
    }
    const double quality = Quality(r, plan);
    if (!best.feasible || quality > best.quality + 1e-12) {
      best.feasible = true;
      best.level_index = plan;
      best.quality = quality;
      best.ready_s = PredictReady(r, plan);
    }
  }
  if (best.feasible) return best;
  fastest.feasible = false;
  fastest.quality = Quality(r, fastest.level_index);
  return fastest;
}

}  // namespace kvstream::scheduler
