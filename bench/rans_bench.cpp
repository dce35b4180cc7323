// Google Benchmark microbenchmark of the rANS coder alone: encode, and decode of one stream through the
// AVX2 kernel and the portable one (the baseline, measured in the same run) and of two streams as a pair,
// on discretised Laplacian and Gaussian
// symbols with one table per channel, as the chunk codec uses it. Counters: symbols per second, coded
// bytes per symbol, the ideal (model entropy) bytes per symbol and the overhead over it in percent.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "codec/common/rans.h"

namespace kvstream::codec {
namespace {

enum Dist { kLaplace3 = 0, kLaplace10 = 1, kGauss6 = 2 };

const char* DistName(int d) {
  switch (d) {
    case kLaplace3: return "laplace(b=3)";
    case kLaplace10: return "laplace(b=10)";
    default: return "gauss(sigma=6)";
  }
}

// A segment of `tokens` rows of `period` channels. Channel c draws with spread 0.5x..1.4x picked by c % 8;
// `tables` distinct models are built (one per channel when tables == period, else channel c uses model
// c % tables, like a clustered table bank).
struct Workload {
  std::vector<uint8_t> symbols;
  std::vector<RansModel> models;
  std::vector<const RansModel*> ptrs;
  std::vector<uint8_t> stream;
  double ideal_bits = 0;
};

Workload Make(int dist, size_t period, size_t tokens, size_t tables, uint32_t seed = 12345) {
  Workload w;
  std::mt19937 rng(seed);
  w.symbols.resize(period * tokens);
  for (size_t i = 0; i < w.symbols.size(); ++i) {
    const double spread = 0.5 + 0.9 * static_cast<double>((i % period) % 8) / 7.0;
    double v = 0;
    if (dist == kGauss6) {
      v = std::normal_distribution<double>(0, 6.0 * spread)(rng);
    } else {
      const double b = (dist == kLaplace3 ? 3.0 : 10.0) * spread;
      v = std::exponential_distribution<double>(1.0 / b)(rng) * ((rng() & 1) ? 1 : -1);
    }
    w.symbols[i] = static_cast<uint8_t>(std::clamp(128 + static_cast<int>(std::lround(v)), 0, 255));
  }
  std::vector<std::vector<uint32_t>> counts(tables, std::vector<uint32_t>(256, 0));
  for (size_t i = 0; i < w.symbols.size(); ++i) ++counts[(i % period) % tables][w.symbols[i]];
  for (auto& c : counts) w.models.push_back(RansModel::FromCounts(c.data(), 256).value());
  for (size_t c = 0; c < period; ++c) w.ptrs.push_back(&w.models[c % tables]);
  if (!RansEncode(w.symbols.data(), w.symbols.size(), w.ptrs.data(), period, &w.stream).ok()) std::abort();
  w.ideal_bits = RansIdealBits(w.symbols.data(), w.symbols.size(), w.ptrs.data(), period);
  return w;
}

void SetCounters(benchmark::State& state, const Workload& w) {
  const double n = static_cast<double>(w.symbols.size());
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(w.symbols.size()));
  state.counters["B/sym"] = static_cast<double>(w.stream.size()) / n;
  state.counters["ideal_B/sym"] = w.ideal_bits / 8 / n;
  state.counters["overhead_%"] = (8.0 * static_cast<double>(w.stream.size()) / w.ideal_bits - 1) * 100;
  state.SetLabel(DistName(static_cast<int>(state.range(0))));
}

// Args: distribution, period (channels), tokens, distinct tables.
void BM_RansEncode(benchmark::State& state) {
  const Workload w = Make(static_cast<int>(state.range(0)), state.range(1), state.range(2), state.range(3));
  std::vector<uint8_t> out;
  for (auto _ : state) {
    out.clear();
    if (!RansEncode(w.symbols.data(), w.symbols.size(), w.ptrs.data(), w.ptrs.size(), &out).ok()) std::abort();
    benchmark::DoNotOptimize(out.data());
  }
  SetCounters(state, w);
}

// Args: distribution, period, tokens, distinct tables, path (0: one stream, the best vector kernel the
// CPU has; 1: one stream, portable kernel; 2: two streams decoded together, as the chunk decoder decodes
// a layer's keys and values; 4: four streams together, two layers' keys and values, as the chunk decoder
// hands them to an AVX-512 CPU). KVSTREAM_DISABLE_AVX512=1 in the environment measures the AVX2 kernel.
void BM_RansDecode(benchmark::State& state) {
  const int path = static_cast<int>(state.range(4));
  const size_t streams = path >= 2 ? static_cast<size_t>(path) : 1;
  // Each further stream has its own symbols and tables, like a layer's values beside its keys.
  std::vector<Workload> w;
  std::vector<std::vector<uint8_t>> out;
  std::vector<RansDecodeJob> jobs;
  for (size_t i = 0; i < streams; ++i) {
    w.push_back(Make(static_cast<int>(state.range(0)), state.range(1), state.range(2), state.range(3),
                     i == 0 ? 12345u : 54320u + static_cast<unsigned>(i)));
  }
  for (size_t i = 0; i < streams; ++i) {
    out.emplace_back(w[i].symbols.size());
    jobs.push_back({w[i].stream.data(), w[i].stream.size(), w[i].ptrs.data(), w[i].ptrs.size(), out[i].data(), out[i].size()});
  }
  if (path == 1) setenv("KVSTREAM_DISABLE_AVX2", "1", 1);
  std::vector<Status> statuses(streams);
  for (auto _ : state) {
    RansDecodeTogether(jobs.data(), streams, statuses.data());
    for (const Status& s : statuses) {
      if (!s.ok()) std::abort();
    }
    benchmark::DoNotOptimize(out[0].data());
  }
  unsetenv("KVSTREAM_DISABLE_AVX2");
  int64_t symbols = 0;
  for (size_t i = 0; i < streams; ++i) {
    if (out[i] != w[i].symbols) std::abort();
    symbols += static_cast<int64_t>(w[i].symbols.size());
  }
  SetCounters(state, w[0]);
  state.SetItemsProcessed(state.iterations() * symbols);
  state.counters["path"] = path;
}

void EncodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dist", "period", "tokens", "tables"});
  for (int d : {kLaplace3, kLaplace10, kGauss6}) {
    b->Args({d, 192, 256, 192});
    b->Args({d, 192, 256, 8});
    b->Args({d, 1, 49152, 1});
  }
  b->Args({kLaplace3, 192, 4096, 192});
}

void DecodeArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dist", "period", "tokens", "tables", "path"});
  for (int path : {0, 1, 2, 4}) {
    for (int d : {kLaplace3, kLaplace10, kGauss6}) {
      b->Args({d, 192, 256, 192, path});
      b->Args({d, 192, 256, 8, path});
      b->Args({d, 1, 49152, 1, path});
    }
    b->Args({kLaplace3, 192, 4096, 192, path});
  }
}

BENCHMARK(BM_RansEncode)->Apply(EncodeArgs);
BENCHMARK(BM_RansDecode)->Apply(DecodeArgs);

}  // namespace
}  // namespace kvstream::codec

BENCHMARK_MAIN();
