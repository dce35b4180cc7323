// SumComponents with AVX2 (compiled with -mavx2): the shared tiles (transform_sum_tiles.h) on 256-bit
// vectors, 16 columns per tile.
#include "codec/common/transform_sum.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "codec/common/transform_sum_tiles.h"

namespace kvstream::codec {
namespace {

struct Avx2Ops {
  using Vec = __m256i;
  static constexpr int64_t kColumns = 16;
  static constexpr int kRows = 4;
  static Vec Zero() { return _mm256_setzero_si256(); }
  static Vec Load(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Vec UnpackLo(Vec a, Vec b) { return _mm256_unpacklo_epi16(a, b); }
  static Vec UnpackHi(Vec a, Vec b) { return _mm256_unpackhi_epi16(a, b); }
  static Vec Broadcast(int32_t pair) { return _mm256_set1_epi32(pair); }
  static Vec MaddAdd(Vec sum, Vec a, Vec b) { return _mm256_add_epi32(sum, _mm256_madd_epi16(a, b)); }
  // In 128-bit lane L, lo holds the sums of columns 8L+0..3 and hi those of 8L+4..7.
  static void Store(Vec lo, Vec hi, int32_t* out) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
};

}  // namespace

int64_t SumComponentsAvx2(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  return SumTiledColumns<Avx2Ops>(q, rows, kept, basis, cols, acc);
}

}  // namespace kvstream::codec

#endif
