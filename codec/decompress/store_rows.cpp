// StoreRow (store_rows.h).
#include "codec/decompress/store_rows.h"

#include <cstring>

#include "common/half.h"
#include "common/half_rows.h"

namespace kvstream::codec {
namespace {

// Copies a row of floats with streaming stores where the CPU has them: the decoded KV is written once and
// read later by someone else (a fetched context's fp32 KV is far larger than the caches), and ordinary
// stores first read every line they write: that was 7-11 % of a fetch's CPU.
void StreamRow(const float* row, int64_t n, float* p) {
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % 4 == 0) {
    for (int64_t c = 0; c < n; c += 4) _mm_stream_ps(p + c, _mm_loadu_ps(row + c));
    return;
  }
#endif
  std::memcpy(p, row, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

void StoreRow(const TensorView& v, int64_t layer, int64_t token, const float* row) {
  const int64_t c_n = v.channels();
  const int64_t base = layer * v.strides[0] + token * v.strides[1];
  const int64_t cs = v.strides[2];
  switch (v.dtype) {
    case DType::kF32: {
      float* p = static_cast<float*>(v.data) + base;
      if (cs == 1) {
        StreamRow(row, c_n, p);
      } else {
        for (int64_t c = 0; c < c_n; ++c) p[c * cs] = row[c];
      }
      break;
    }
    case DType::kF16: {
      uint16_t* p = static_cast<uint16_t*>(v.data) + base;
      if (cs == 1) {
        FloatRowToHalf(row, p, c_n);  // the scalar conversion was half of the decode time
      } else {
        for (int64_t c = 0; c < c_n; ++c) p[c * cs] = FloatToHalf(row[c]);
      }
      break;
    }
    case DType::kBF16: {
      uint16_t* p = static_cast<uint16_t*>(v.data) + base;
      for (int64_t c = 0; c < c_n; ++c) p[c * cs] = FloatToBFloat16(row[c]);
      break;
    }
  }
}

}  // namespace kvstream::codec
