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

// Args: distribution, period, tokens, distinct tables, path (0: one stream, AVX2 where the CPU has it;
// 1: one stream, portable kernel; 2: two streams decoded as a pair, as the chunk decoder decodes a
// layer's keys and values).
void BM_RansDecode(benchmark::State& state) {
  const Workload w = Make(static_cast<int>(state.range(0)), state.range(1), state.range(2), state.range(3));
  const int path = static_cast<int>(state.range(4));
  // The pair's second stream has its own symbols and tables, like a layer's values beside its keys.
  const Workload w2 = Make(static_cast<int>(state.range(0)), state.range(1), state.range(2), state.range(3), 54321);
  std::vector<uint8_t> out(w.symbols.size()), second(w2.symbols.size());
  if (path == 1) setenv("KVSTREAM_DISABLE_AVX2", "1", 1);
  const RansDecodeJob a{w.stream.data(), w.stream.size(), w.ptrs.data(), w.ptrs.size(), out.data(), out.size()};
  const RansDecodeJob b{w2.stream.data(), w2.stream.size(), w2.ptrs.data(), w2.ptrs.size(), second.data(), second.size()};
  for (auto _ : state) {
    if (path == 2) {
      Status sa, sb;
      RansDecodePair(a, b, &sa, &sb);
      if (!sa.ok() || !sb.ok()) std::abort();
    } else if (!RansDecode(a.data, a.size, a.models, a.period, a.out, a.n).ok()) {
      std::abort();
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(second.data());
  }
  unsetenv("KVSTREAM_DISABLE_AVX2");
  if (out != w.symbols || (path == 2 && second != w2.symbols)) std::abort();
  SetCounters(state, w);
  if (path == 2) state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(w.symbols.size() + w2.symbols.size()));
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
  for (int path : {0, 1, 2}) {
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
