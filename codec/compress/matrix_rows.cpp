#include "codec/compress/matrix_rows.h"

#include <algorithm>
#include <cmath>

#include "codec/common/cpu_features.h"

namespace kvstream::codec {

void MultiplyRows(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out) {
#if defined(__x86_64__) || defined(_M_X64)
  if (Avx512Enabled()) return MultiplyRowsAvx512(a, rows, inner, b, cols, out);
  if (Avx2Enabled()) return MultiplyRowsAvx2(a, rows, inner, b, cols, out);
#endif
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    std::fill(o, o + cols, 0.0f);
    for (int64_t k = 0; k < inner; ++k) {
      const float w = a[r * inner + k];
      const float* row = b + k * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = std::fma(w, row[c], o[c]);
    }
  }
}

}  // namespace kvstream::codec
