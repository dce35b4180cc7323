// The loops of row_kernels.h, written once for row_kernels.cpp and row_kernels_avx512.cpp. Everything
// here has internal linkage, so one file's instructions never stand in for another's.
#pragma once

#include <cstdint>

#include "codec/common/quantizer.h"
#include "codec/common/row_kernels.h"

namespace kvstream::codec {
namespace {  // internal linkage, see above

void DequantLoop(const int32_t* acc, const float* offset, float scaled_step, int64_t n, float* y) {
  for (int64_t c = 0; c < n; ++c) y[c] = DequantTransform(acc[c], offset[c], scaled_step);
}

void AddEscapedLoop(float* y, float weight, float scaled_step, const int16_t* basis, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = AddEscapedComponent(y[c], weight, scaled_step, basis[c]);
}

void AddPredictionLoop(float* base, const int32_t* sums, const float* scale, int64_t n) {
  for (int64_t c = 0; c < n; ++c) base[c] = AddPrediction(base[c], sums[c], scale[c]);
}

void PredictorInputLoop(const float* y, const float* inv_grid, int64_t n, int16_t* z) {
  for (int64_t c = 0; c < n; ++c) z[c] = PredictorInput(y[c], inv_grid[c]);
}

constexpr RowKernels kRowKernels{DequantLoop, AddEscapedLoop, AddPredictionLoop, PredictorInputLoop};

}  // namespace
}  // namespace kvstream::codec
