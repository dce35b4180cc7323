// SumComponents with AVX2 (compiled with -mavx2): the weights go in pairs through vpmaddwd, which
// multiplies 16 int16 pairs and adds each pair into an int32 lane. The basis rows j and j+1 are
// interleaved on the fly (vpunpck{l,h}wd), so the profile keeps the plain row-per-component layout. Tiles
// of 4 rows x 16 columns keep eight accumulators in registers; columns go outermost, so that the basis
// slice a tile reads (kept x 16 int16) stays in L1 while every row passes. Integer sums are exact, so the
// order of the additions does not matter.
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

// Rows [r, r + kRows), columns [c, c + 16).
template <int kRows>
void Tile(const int16_t* q, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc, int64_t r, int64_t c) {
  const int64_t stride = WeightStride(kept);
  __m256i lo_sum[kRows], hi_sum[kRows];
  for (int i = 0; i < kRows; ++i) lo_sum[i] = hi_sum[i] = _mm256_setzero_si256();
  const int16_t* qr = q + r * stride;
  for (int64_t k = 0; k < kept; k += 2) {
    const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(basis + k * cols + c));
    const __m256i second = k + 1 < kept ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(basis + (k + 1) * cols + c))
                                        : _mm256_setzero_si256();
    // lo: columns c+0..3 and c+8..11 as (B[k], B[k+1]) pairs; hi: c+4..7 and c+12..15.
    const __m256i lo = _mm256_unpacklo_epi16(first, second);
    const __m256i hi = _mm256_unpackhi_epi16(first, second);
    for (int i = 0; i < kRows; ++i) {
      const __m256i w = _mm256_set1_epi32(PairAt(qr + i * stride + k));
      lo_sum[i] = _mm256_add_epi32(lo_sum[i], _mm256_madd_epi16(lo, w));
      hi_sum[i] = _mm256_add_epi32(hi_sum[i], _mm256_madd_epi16(hi, w));
    }
  }
  for (int i = 0; i < kRows; ++i) {
    int32_t* out = acc + (r + i) * cols + c;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo_sum[i], hi_sum[i], 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(lo_sum[i], hi_sum[i], 0x31));
  }
}

}  // namespace

int64_t SumComponentsAvx2(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    int64_t r = 0;
    for (; r + 4 <= rows; r += 4) Tile<4>(q, kept, basis, cols, acc, r, c);
    for (; r < rows; ++r) Tile<1>(q, kept, basis, cols, acc, r, c);
  }
  return c;
}

}  // namespace kvstream::codec

#endif
