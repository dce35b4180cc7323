// The transform's integer sums alone (Google Benchmark): SumComponents on the shapes the decoder gives it,
// with the matrix packed for this CPU (PackedMatrix: the AMX kernel, or the AVX-512 VNNI byte kernel
// against a matrix of bytes) and unpacked (the AVX-512 VNNI, AVX-512 or AVX2 kernel), so that one run
// shows what packing gains. MAC/s counts multiply-adds.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "codec/common/cpu_features.h"
#include "codec/common/quantizer.h"
#include "codec/common/transform_sum.h"

namespace kvstream::codec {
namespace {

// The factors' bounds of the blocks the decoder multiplies.
enum Kind : int64_t {
  kTransform,           // a transform or residual block: weights within int8 against the int16 basis
  kInt16Predictor,      // a predictor block at the format's bounds: int16 inputs and weights
  kPredictorOfBytes,    // a predictor block as kvstream's profiles make it: inputs and weights within int8
};

// Args: rows, kept (the weights per row), Kind, 1 to leave the matrix unpacked. Columns: 192 (SmolLM2).
void BM_SumComponents(benchmark::State& state) {
  const int64_t rows = state.range(0), kept = state.range(1), cols = 192;
  const Kind kind = static_cast<Kind>(state.range(2));
  const bool unpacked = state.range(3) != 0;
  const int largest = kind == kInt16Predictor ? kMaxPredictorInput : kMaxAbsQ;
  const int matrix_bound = kind == kTransform ? 1 << kBasisScaleBits : kind == kInt16Predictor ? MaxPredictorWeight(kept) : 127;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> weight(-largest, largest);
  std::uniform_int_distribution<int> matrix_value(-matrix_bound, matrix_bound);
  std::vector<int16_t> q(static_cast<size_t>(rows * WeightStride(kept)), 0), matrix(static_cast<size_t>(kept * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < kept; ++j) q[static_cast<size_t>(r * WeightStride(kept) + j)] = static_cast<int16_t>(weight(rng));
  }
  for (int16_t& m : matrix) m = static_cast<int16_t>(matrix_value(rng));
  const PackedMatrix packed = PackedMatrix::Pack(matrix.data(), kept, cols);
  std::vector<int32_t> acc(static_cast<size_t>(rows * cols));
  const char* layout = packed.layout == PackedMatrix::Layout::kAmx         ? "amx"
                       : packed.layout == PackedMatrix::Layout::kVnniBytes ? "vnni-bytes"
                       : packed.layout == PackedMatrix::Layout::kVnniPairs ? "vnni-pairs"
                                                                           : "none";
  state.SetLabel(std::string(SimdKernels()) + ", packed: " + (unpacked ? "unused" : layout));
  for (auto _ : state) {
    SumComponents(q.data(), rows, kept, matrix.data(), cols, acc.data(), unpacked ? nullptr : &packed);
    benchmark::DoNotOptimize(acc.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(rows * kept * cols) * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int unpacked : {0, 1}) {
    b->Args({64, 192, kTransform, unpacked});         // a predicted block's residual
    b->Args({64, 192, kInt16Predictor, unpacked});    // a predicted block's prediction from one slice
    b->Args({64, 192, kPredictorOfBytes, unpacked});  // the same as kvstream's profiles make it
    b->Args({252, 186, kTransform, unpacked});        // a transform segment (256 tokens less the sinks)
  }
}

BENCHMARK(BM_SumComponents)->Apply(Args);

}  // namespace
}  // namespace kvstream::codec

BENCHMARK_MAIN();
