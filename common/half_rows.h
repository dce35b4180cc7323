// Contiguous rows of fp16 <-> fp32 for the CPU codec: F16C instructions where the CPU has them, the
// scalar conversions of common/half.h elsewhere. Results equal HalfToFloat / FloatToHalf bit for bit,
// except that a NaN may come out with a different payload (still a NaN).
#pragma once

#include <cstdint>

namespace kvstream {

void HalfRowToFloat(const uint16_t* in, float* out, int64_t n);
void FloatRowToHalf(const float* in, uint16_t* out, int64_t n);

}  // namespace kvstream
