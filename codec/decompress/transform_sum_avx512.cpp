// SumComponents with AVX-512 (compiled with -mavx512f -mavx512bw): the AVX2 kernel's scheme
// (transform_sum_avx2.cpp) at twice the width. vpmaddwd multiplies 32 int16 pairs and adds each pair into
// an int32 lane; basis rows j and j+1 are interleaved on the fly (vpunpck{l,h}wd, per 128-bit lane);
// tiles of 4 rows x 32 columns keep eight accumulators in registers; columns go outermost so that the
// basis slice a tile reads stays in L1. Integer sums are exact, so the order of the additions does not
// matter.
#include "codec/decompress/transform_sum.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstring>

namespace kvstream::codec {
namespace {

int32_t PairAt(const int16_t* q) {
  int32_t pair;
  std::memcpy(&pair, q, 4);
  return pair;
}

// Rows [r, r + kRows), columns [c, c + 32).
template <int kRows>
void Tile(const int16_t* q, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc, int64_t r, int64_t c) {
  const int64_t stride = WeightStride(kept);
  __m512i lo_sum[kRows], hi_sum[kRows];
  for (int i = 0; i < kRows; ++i) lo_sum[i] = hi_sum[i] = _mm512_setzero_si512();
  const int16_t* qr = q + r * stride;
  for (int64_t k = 0; k < kept; k += 2) {
    const __m512i first = _mm512_loadu_si512(basis + k * cols + c);
    const __m512i second = k + 1 < kept ? _mm512_loadu_si512(basis + (k + 1) * cols + c) : _mm512_setzero_si512();
    // In 128-bit lane L, lo holds columns c+8L+0..3 as (B[k], B[k+1]) pairs and hi columns c+8L+4..7.
    const __m512i lo = _mm512_unpacklo_epi16(first, second);
    const __m512i hi = _mm512_unpackhi_epi16(first, second);
    for (int i = 0; i < kRows; ++i) {
      const __m512i w = _mm512_set1_epi32(PairAt(qr + i * stride + k));
      lo_sum[i] = _mm512_add_epi32(lo_sum[i], _mm512_madd_epi16(lo, w));
      hi_sum[i] = _mm512_add_epi32(hi_sum[i], _mm512_madd_epi16(hi, w));
    }
  }
  // Columns in order: lane 0 of lo, lane 0 of hi, lane 1 of lo, ... (64-bit indices; 8+ picks from hi).
  const __m512i first_half = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i second_half = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int i = 0; i < kRows; ++i) {
    int32_t* out = acc + (r + i) * cols + c;
    _mm512_storeu_si512(out, _mm512_permutex2var_epi64(lo_sum[i], first_half, hi_sum[i]));
    _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(lo_sum[i], second_half, hi_sum[i]));
  }
}

}  // namespace

int64_t SumComponentsAvx512(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) Tile<4>(q, kept, basis, cols, acc, r, c);
    for (; r < rows; ++r) Tile<1>(q, kept, basis, cols, acc, r, c);
  }
  return c;
}

}  // namespace kvstream::codec

#endif
