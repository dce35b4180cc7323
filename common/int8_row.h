// Per-token symmetric int8 quantisation: one fp16 scale per row, scale = max|x| / 127.
//
// The one definition behind the codec's int8 level, the int8 baseline of the benchmarks and the model's
// int8 KvTransform, so the three cannot drift apart. The encoder quantises with the fp16-rounded scale
// the decoder will see; non-finite inputs are ignored by the scale and coded as 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/half.h"

namespace kvstream {

inline constexpr float kInt8MaxQ = 127.0f;

// The fp16 scale of a row of n values, saturated to the largest finite fp16.
inline uint16_t Int8RowScale(const float* row, int64_t n) {
  float max_abs = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isfinite(row[i])) max_abs = std::max(max_abs, std::fabs(row[i]));
  }
  return FloatToHalf(std::min(max_abs / kInt8MaxQ, 65504.0f));
}

// 1 / scale, or 0 for an all-zero row (every value then codes as 0).
inline float Int8InverseScale(uint16_t scale_fp16) {
  const float scale = HalfToFloat(scale_fp16);
  return scale > 0.0f ? 1.0f / scale : 0.0f;
}

inline int8_t QuantizeInt8(float x, float inverse_scale) {
  if (!std::isfinite(x)) return 0;
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inverse_scale), -kInt8MaxQ, kInt8MaxQ));
}

KVSTREAM_HD float DequantizeInt8(int8_t q, uint16_t scale_fp16) {
  return static_cast<float>(q) * HalfToFloat(scale_fp16);
}

}  // namespace kvstream
