// The per-element loops of the lossy schemes' reconstruction (quantizer.h's arithmetic over a row of
// channels), compiled twice like the other kernels: row_kernels.cpp for any CPU (SSE2 on
// x86-64: 4 floats per instruction) and row_kernels_avx512.cpp (16), from the one body in
// row_kernels_body.h. Every operation is separately rounded and the codec compiles with
// -ffp-contract=off, so both give the same floats (and the same halves: the fp16 row loop's AVX-512 form
// is spelled out with intrinsics, the same operations).
#pragma once

#include <cstdint>

namespace kvstream::codec {

struct RowKernels {
  // y[c] = DequantChannelUniform(symbols[c], mean[c], step[c])
  void (*dequant_channels)(const uint8_t* symbols, const float* mean, const float* step, int64_t n, float* y);
  // out[c] = FloatToHalf(DequantChannelUniform(symbols[c], mean[c], step[c])): a row without escapes
  // straight into an fp16 destination, without a pass over a float row between
  void (*dequant_channels_half)(const uint8_t* symbols, const float* mean, const float* step, int64_t n,
                                uint16_t* out);
  // y[c] = DequantTransform(acc[c], offset[c], scaled_step)
  void (*dequant)(const int32_t* acc, const float* offset, float scaled_step, int64_t n, float* y);
  // y[c] = AddEscapedComponent(y[c], weight, scaled_step, basis[c])
  void (*add_escaped)(float* y, float weight, float scaled_step, const int16_t* basis, int64_t n);
  // base[c] = bias[c], then base[c] = AddPrediction(base[c], sums[b][c], scales[b][c]) for b = 0 ..
  // blocks - 1 in that order (one pass over the row for all of a slice's predictor blocks, 0..3)
  void (*predict)(const float* bias, const int32_t* const* sums, const float* const* scales, int blocks, int64_t n,
                  float* base);
  // z[c] = PredictorInput(y[c], inv_grid[c])
  void (*predictor_input)(const float* y, const float* inv_grid, int64_t n, int16_t* z);
  // A predicted row in one pass: y[c] = DequantTransform(acc[c], v, scaled_step) with v what `predict`
  // puts in base[c], then z[c] = PredictorInput(y[c], inv_grid[c]) unless z is null (a row with escapes
  // takes its inputs after them).
  void (*predicted_row)(const float* bias, const int32_t* const* sums, const float* const* scales, int blocks,
                        const int32_t* acc, float scaled_step, const float* inv_grid, int64_t n, float* y, int16_t* z);
};

// The widest loops this CPU runs (AVX-512 unless Avx512Enabled() says no).
const RowKernels& RowKernelsForCpu();

// row_kernels_avx512.cpp's; call RowKernelsForCpu instead.
const RowKernels& RowKernelsAvx512();

}  // namespace kvstream::codec
