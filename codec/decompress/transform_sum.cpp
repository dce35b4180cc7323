#include "codec/decompress/transform_sum.h"

#include <algorithm>

#include "codec/common/cpu_features.h"

namespace kvstream::codec {

void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
#if defined(__x86_64__) || defined(_M_X64)
  if (Avx2Enabled()) return SumComponentsAvx2(q, rows, kept, basis, cols, acc);
#endif
  const int64_t stride = WeightStride(kept);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* out = acc + r * cols;
    std::fill(out, out + cols, 0);
    for (int64_t j = 0; j < kept; ++j) {
      const int32_t w = q[r * stride + j];
      if (w == 0) continue;
      const int16_t* row = basis + j * cols;
      for (int64_t c = 0; c < cols; ++c) out[c] += w * row[c];
    }
  }
}

}  // namespace kvstream::codec
