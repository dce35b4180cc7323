// MultiplyRows with AVX2 + FMA (compiled with -mavx2 -mfma). The output is cut into tiles of 4 rows x 16
// columns (then 8, then the last few with masked loads), each summed in eight registers (as many
// independent FMA chains as the two FMA pipes need); columns go outermost, so that the slice of b a tile
// reads (inner x 16 floats) stays in L1 while every row passes. Each sum is the same chain of fused multiply-adds as the portable kernel's.
#include "codec/compress/matrix_rows.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <cstdint>

namespace kvstream::codec {
namespace {

// out[r + i][c + 8v + lane] for i < kRows, v < kVecs: the edges of the output.
template <int kRows, int kVecs>
void Tile(const float* a, int64_t inner, const float* b, int64_t cols, float* out, int64_t r, int64_t c) {
  __m256 acc[kRows][kVecs];
  for (auto& row : acc)
    for (auto& v : row) v = _mm256_setzero_ps();
  const float* ar = a + r * inner;
  for (int64_t k = 0; k < inner; ++k) {
    __m256 bv[kVecs];
    for (int v = 0; v < kVecs; ++v) bv[v] = _mm256_loadu_ps(b + k * cols + c + 8 * v);
    for (int i = 0; i < kRows; ++i) {
      const __m256 w = _mm256_broadcast_ss(ar + i * inner + k);
      for (int v = 0; v < kVecs; ++v) acc[i][v] = _mm256_fmadd_ps(w, bv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < kRows; ++i)
    for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(out + (r + i) * cols + c + 8 * v, acc[i][v]);
}

// The 4 x 16 tile, the bulk of the work, with its eight accumulators as named variables: GCC 12 keeps the
// template's array in memory, storing every accumulator on every step (3x slower).
template <>
void Tile<4, 2>(const float* a, int64_t inner, const float* b, int64_t cols, float* out, int64_t r, int64_t c) {
  __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
  const float* a0 = a + r * inner;
  const float* a1 = a0 + inner;
  const float* a2 = a1 + inner;
  const float* a3 = a2 + inner;
  const float* bk = b + c;
  for (int64_t k = 0; k < inner; ++k, bk += cols) {
    const __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
    __m256 w = _mm256_broadcast_ss(a0 + k);
    a00 = _mm256_fmadd_ps(w, b0, a00);
    a01 = _mm256_fmadd_ps(w, b1, a01);
    w = _mm256_broadcast_ss(a1 + k);
    a10 = _mm256_fmadd_ps(w, b0, a10);
    a11 = _mm256_fmadd_ps(w, b1, a11);
    w = _mm256_broadcast_ss(a2 + k);
    a20 = _mm256_fmadd_ps(w, b0, a20);
    a21 = _mm256_fmadd_ps(w, b1, a21);
    w = _mm256_broadcast_ss(a3 + k);
    a30 = _mm256_fmadd_ps(w, b0, a30);
    a31 = _mm256_fmadd_ps(w, b1, a31);
  }
  float* o = out + r * cols + c;
  _mm256_storeu_ps(o, a00);
  _mm256_storeu_ps(o + 8, a01);
  _mm256_storeu_ps(o + cols, a10);
  _mm256_storeu_ps(o + cols + 8, a11);
  _mm256_storeu_ps(o + 2 * cols, a20);
  _mm256_storeu_ps(o + 2 * cols + 8, a21);
  _mm256_storeu_ps(o + 3 * cols, a30);
  _mm256_storeu_ps(o + 3 * cols + 8, a31);
}

// The last cols % 8 columns, for rows [r, r + kRows): masked loads and stores of one vector.
template <int kRows>
void TailTile(const float* a, int64_t inner, const float* b, int64_t cols, float* out, int64_t r, int64_t c,
              __m256i mask) {
  __m256 acc[kRows];
  for (auto& v : acc) v = _mm256_setzero_ps();
  const float* ar = a + r * inner;
  for (int64_t k = 0; k < inner; ++k) {
    const __m256 bv = _mm256_maskload_ps(b + k * cols + c, mask);
    for (int i = 0; i < kRows; ++i) acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(ar + i * inner + k), bv, acc[i]);
  }
  for (int i = 0; i < kRows; ++i) _mm256_maskstore_ps(out + (r + i) * cols + c, mask, acc[i]);
}

template <int kVecs>
void Columns(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out, int64_t c) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) Tile<4, kVecs>(a, inner, b, cols, out, r, c);
  for (; r < rows; ++r) Tile<1, kVecs>(a, inner, b, cols, out, r, c);
}

}  // namespace

void MultiplyRowsAvx2(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out) {
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) Columns<2>(a, rows, inner, b, cols, out, c);
  for (; c + 8 <= cols; c += 8) Columns<1>(a, rows, inner, b, cols, out, c);
  if (c == cols) return;
  alignas(32) int32_t lanes[8];
  for (int i = 0; i < 8; ++i) lanes[i] = c + i < cols ? -1 : 0;
  const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) TailTile<4>(a, inner, b, cols, out, r, c, mask);
  for (; r < rows; ++r) TailTile<1>(a, inner, b, cols, out, r, c, mask);
}

}  // namespace kvstream::codec

#endif
