#include "codec/common/transform_sum.h"

#include <algorithm>

#include "codec/common/cpu_features.h"

namespace kvstream::codec {

namespace {

// The columns [first, cols), portable: zero weights (the small components of a row) are skipped.
void SumColumnsPortable(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                        int64_t first) {
  const int64_t stride = WeightStride(kept);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* out = acc + r * cols;
    std::fill(out + first, out + cols, 0);
    for (int64_t j = 0; j < kept; ++j) {
      const int32_t w = q[r * stride + j];
      if (w == 0) continue;
      const int16_t* row = basis + j * cols;
      for (int64_t c = first; c < cols; ++c) out[c] += w * row[c];
    }
  }
}

}  // namespace

void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  int64_t done = 0;
#if defined(__x86_64__) || defined(_M_X64)
  if (Avx512VnniEnabled()) {
    done = SumComponentsAvx512Vnni(q, rows, kept, basis, cols, acc);
  } else if (Avx512Enabled()) {
    done = SumComponentsAvx512(q, rows, kept, basis, cols, acc);
  } else if (Avx2Enabled()) {
    done = SumComponentsAvx2(q, rows, kept, basis, cols, acc);
  }
#endif
  if (done < cols) SumColumnsPortable(q, rows, kept, basis, cols, acc, done);
}

}  // namespace kvstream::codec
