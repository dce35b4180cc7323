// The loops of row_kernels.h, written once for row_kernels.cpp and row_kernels_avx512.cpp. Everything
// here has internal linkage, so one file's instructions never stand in for another's.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "codec/common/quantizer.h"
#include "codec/common/row_kernels.h"
#include "common/half.h"
#include "common/half_rows.h"

namespace kvstream::codec {
namespace {  // internal linkage, see above

void DequantChannelsLoop(const uint8_t* symbols, const float* mean, const float* step, int64_t n, float* y) {
  for (int64_t c = 0; c < n; ++c) y[c] = DequantChannelUniform(symbols[c], mean[c], step[c]);
}

void DequantChannelsHalfLoop(const uint8_t* symbols, const float* mean, const float* step, int64_t n,
                             uint16_t* out) {
#if defined(__AVX512F__)
  // The compiler vectorises neither FloatToHalf nor this loop with it, so the AVX-512 build spells the
  // loop out: DequantChannelUniform's operations, each rounded once, then vcvtps2ph, which rounds to
  // nearest even as FloatToHalf does.
  const __m512i zero = _mm512_set1_epi32(kSymbolZero);
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512i q = _mm512_sub_epi32(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(symbols + c))), zero);
    const __m512 y = _mm512_add_ps(_mm512_loadu_ps(mean + c), _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_loadu_ps(step + c)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + c), _mm512_cvtps_ph(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  for (; c < n; ++c) out[c] = FloatToHalf(DequantChannelUniform(symbols[c], mean[c], step[c]));
#else
  // Elsewhere blocks of the float loop, each converted by half_rows.h (with F16C where the CPU has it).
  constexpr int64_t kBlock = 256;
  float y[kBlock];
  for (int64_t c = 0; c < n; c += kBlock) {
    const int64_t m = std::min(kBlock, n - c);
    DequantChannelsLoop(symbols + c, mean + c, step + c, m, y);
    FloatRowToHalf(y, out + c, m);
  }
#endif
}

void DequantLoop(const int32_t* acc, const float* offset, float scaled_step, int64_t n, float* y) {
  for (int64_t c = 0; c < n; ++c) y[c] = DequantTransform(acc[c], offset[c], scaled_step);
}

void AddEscapedLoop(float* y, float weight, float scaled_step, const int16_t* basis, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = AddEscapedComponent(y[c], weight, scaled_step, basis[c]);
}

// A slice has at most three predictor blocks; a block count known at compile time lets the channel loop
// vectorise with every block's terms in registers.
template <int kBlocks>
void PredictBlocks(const float* bias, const int32_t* const* sums, const float* const* scales, int64_t n, float* base) {
  for (int64_t c = 0; c < n; ++c) {
    float v = bias[c];
    for (int b = 0; b < kBlocks; ++b) v = AddPrediction(v, sums[b][c], scales[b][c]);
    base[c] = v;
  }
}

void PredictLoop(const float* bias, const int32_t* const* sums, const float* const* scales, int blocks, int64_t n,
                 float* base) {
  switch (blocks) {
    case 0: return PredictBlocks<0>(bias, sums, scales, n, base);
    case 1: return PredictBlocks<1>(bias, sums, scales, n, base);
    case 2: return PredictBlocks<2>(bias, sums, scales, n, base);
    default: return PredictBlocks<3>(bias, sums, scales, n, base);
  }
}

void PredictorInputLoop(const float* y, const float* inv_grid, int64_t n, int16_t* z) {
  for (int64_t c = 0; c < n; ++c) z[c] = PredictorInput(y[c], inv_grid[c]);
}

// PredictBlocks, DequantLoop and (with z) PredictorInputLoop in one pass over the row, each channel's
// prediction kept in a register instead of stored and read back.
template <int kBlocks, bool kInputs>
void PredictedRowBlocks(const float* bias, const int32_t* const* sums, const float* const* scales, const int32_t* acc,
                        float scaled_step, const float* inv_grid, int64_t n, float* y, int16_t* z) {
  for (int64_t c = 0; c < n; ++c) {
    float v = bias[c];
    for (int b = 0; b < kBlocks; ++b) v = AddPrediction(v, sums[b][c], scales[b][c]);
    const float out = DequantTransform(acc[c], v, scaled_step);
    y[c] = out;
    if constexpr (kInputs) z[c] = PredictorInput(out, inv_grid[c]);
  }
}

template <bool kInputs>
void PredictedRowInputs(const float* bias, const int32_t* const* sums, const float* const* scales, int blocks,
                        const int32_t* acc, float scaled_step, const float* inv_grid, int64_t n, float* y, int16_t* z) {
  switch (blocks) {
    case 0: return PredictedRowBlocks<0, kInputs>(bias, sums, scales, acc, scaled_step, inv_grid, n, y, z);
    case 1: return PredictedRowBlocks<1, kInputs>(bias, sums, scales, acc, scaled_step, inv_grid, n, y, z);
    case 2: return PredictedRowBlocks<2, kInputs>(bias, sums, scales, acc, scaled_step, inv_grid, n, y, z);
    default: return PredictedRowBlocks<3, kInputs>(bias, sums, scales, acc, scaled_step, inv_grid, n, y, z);
  }
}

void PredictedRowLoop(const float* bias, const int32_t* const* sums, const float* const* scales, int blocks,
                      const int32_t* acc, float scaled_step, const float* inv_grid, int64_t n, float* y, int16_t* z) {
  if (z) return PredictedRowInputs<true>(bias, sums, scales, blocks, acc, scaled_step, inv_grid, n, y, z);
  PredictedRowInputs<false>(bias, sums, scales, blocks, acc, scaled_step, inv_grid, n, y, z);
}

constexpr RowKernels kRowKernels{DequantChannelsLoop, DequantChannelsHalfLoop, DequantLoop,     AddEscapedLoop,
                                 PredictLoop,         PredictorInputLoop,      PredictedRowLoop};

}  // namespace
}  // namespace kvstream::codec
