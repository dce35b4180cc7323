// The requests of `kvstream bench adapt` (see the header).
#include "bench/adapt_workload.h"

#include <cmath>
#include <random>
#include <utility>

namespace kvstream::bench {
namespace {

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

Workload MakeWorkload(const ManifestFile& base, int requests, int concurrency, double deadline_s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Workload w;
  for (int r = 0; r < requests; ++r) {
    ManifestFile m = base;
    for (auto& row : m.manifest.bytes) {
      const double scale = 0.9 + 0.2 * Uniform(rng);
      for (size_t li = 0; li < row.size(); ++li) {
        if (IsLossyLevel(m.manifest.levels[li].level)) row[li] = static_cast<uint64_t>(std::llround(row[li] * scale));
      }
    }
    w.manifests.push_back(std::move(m));
    w.deadlines_s.push_back(deadline_s * (0.9 + 0.2 * Uniform(rng)));
    w.arrivals_s.push_back(0.1 * deadline_s * (r % concurrency));
  }
  return w;
}

}  // namespace kvstream::bench
