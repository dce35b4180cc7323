// The AVX-512 vector operations of the shared sum tiles (transform_sum_tiles.h), for the files compiled
// with AVX-512: transform_sum_avx512.cpp and transform_sum_avx512vnni.cpp, which replaces MaddAdd; and
// the weight-row helpers of the kernels that take weights as bytes (transform_sum_avx512vnni.cpp,
// transform_sum_amx.cpp). Internal linkage, as the tiles': each file gets its own copy, compiled with its
// own ISA flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace kvstream::codec {
namespace {  // internal linkage, see above

// The first n of 32 int16 lanes (none for n <= 0): a weight row's components left from some j.
inline __mmask32 FirstLanes(int64_t n) { return n >= 32 ? ~__mmask32{0} : n > 0 ? (__mmask32{1} << n) - 1 : 0; }

// The lanes of weights w beyond int8, given w + 128 (what vpdpbusd takes as unsigned bytes): those
// outside [0, 255].
inline __mmask32 BeyondInt8(__m512i offset_weights) {
  return _mm512_test_epi16_mask(offset_weights, _mm512_set1_epi16(static_cast<int16_t>(0xff00)));
}

struct Avx512Ops {
  using Vec = __m512i;
  static constexpr int64_t kColumns = 32;
  static constexpr int kRows = 8;
  static Vec Zero() { return _mm512_setzero_si512(); }
  static Vec Load(const int16_t* p) { return _mm512_loadu_si512(p); }
  static Vec UnpackLo(Vec a, Vec b) { return _mm512_unpacklo_epi16(a, b); }
  static Vec UnpackHi(Vec a, Vec b) { return _mm512_unpackhi_epi16(a, b); }
  static Vec Broadcast(int32_t pair) { return _mm512_set1_epi32(pair); }
  static Vec MaddAdd(Vec sum, Vec a, Vec b) { return _mm512_add_epi32(sum, _mm512_madd_epi16(a, b)); }
  // In 128-bit lane L, lo holds the sums of columns 8L+0..3 and hi those of 8L+4..7: the 64-bit halves
  // go lo lane 0, hi lane 0, lo lane 1, ... (indices 8 and up pick from hi).
  static void Store(Vec lo, Vec hi, int32_t* out) {
    _mm512_storeu_si512(out, _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi));
    _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), hi));
  }
};

}  // namespace
}  // namespace kvstream::codec
