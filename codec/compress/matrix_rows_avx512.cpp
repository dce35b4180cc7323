// MultiplyRows with AVX-512F (compiled with -mavx512f): the output is cut into tiles of 8 rows x 32
// columns, each summed in sixteen registers (twice the AVX2 kernel's work per loaded slice of b, which
// AVX-512's 32 registers hold); columns go outermost, so that the slice of b a tile reads (inner x 32
// floats) stays in L1 while every row passes. Column tails use masked loads and stores. Each sum is the
// same chain of fused multiply-adds as the portable kernel's.
#include "codec/compress/matrix_rows.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstdint>

namespace kvstream::codec {
namespace {

// out[r + i][c + 16v + lane] for i < kRows, v < kVecs, lanes set in mask[v].
template <int kRows, int kVecs>
void Tile(const float* a, int64_t inner, const float* b, int64_t cols, float* out, int64_t r, int64_t c,
          const __mmask16 (&mask)[2]) {
  __m512 acc[kRows][kVecs];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_setzero_ps();
  const float* ar = a + r * inner;
  const float* bk = b + c;
  for (int64_t k = 0; k < inner; ++k, bk += cols) {
    __m512 bv[kVecs];
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) bv[v] = _mm512_maskz_loadu_ps(mask[v], bk + 16 * v);
#pragma GCC unroll 8
    for (int i = 0; i < kRows; ++i) {
      const __m512 w = _mm512_set1_ps(ar[i * inner + k]);
#pragma GCC unroll 2
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm512_fmadd_ps(w, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i)
#pragma GCC unroll 2
    for (int v = 0; v < kVecs; ++v) _mm512_mask_storeu_ps(out + (r + i) * cols + c + 16 * v, mask[v], acc[i][v]);
}

template <int kVecs>
void Columns(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out, int64_t c,
             const __mmask16 (&mask)[2]) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) Tile<8, kVecs>(a, inner, b, cols, out, r, c, mask);
  for (; r + 4 <= rows; r += 4) Tile<4, kVecs>(a, inner, b, cols, out, r, c, mask);
  for (; r < rows; ++r) Tile<1, kVecs>(a, inner, b, cols, out, r, c, mask);
}

// The lanes of the 16 columns from `first` that are below `cols`.
__mmask16 LanesBelow(int64_t first, int64_t cols) {
  const int64_t n = cols - first;
  return n >= 16 ? __mmask16{0xffff} : n <= 0 ? __mmask16{0} : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace

void MultiplyRowsAvx512(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out) {
  for (int64_t c = 0; c < cols; c += 32) {
    const __mmask16 mask[2] = {LanesBelow(c, cols), LanesBelow(c + 16, cols)};
    if (mask[1] != 0) {
      Columns<2>(a, rows, inner, b, cols, out, c, mask);
    } else {
      Columns<1>(a, rows, inner, b, cols, out, c, mask);
    }
  }
}

}  // namespace kvstream::codec

#endif
