// A row-times-matrix product for the transform scheme's encoder side (the forward projection of rows on
// the kept components, in ProjectRows and the profile builder).
#pragma once

#include <cstdint>

namespace kvstream::codec {

// out[r][c] = the sum over k = 0..inner-1, in order, of a[r][k] * b[k][c], each term added with a fused
// multiply-add starting from +0. a is [rows][inner], b [inner][cols], out [rows][cols], all dense. Uses
// AVX-512 or AVX2 + FMA when the CPU has them; the portable path gives bit-identical results (not that
// the format needs them: the encoder's choice of symbols is free).
void MultiplyRows(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out);

// The vector kernels (matrix_rows_avx2.cpp, matrix_rows_avx512.cpp); call MultiplyRows instead.
void MultiplyRowsAvx2(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out);
void MultiplyRowsAvx512(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out);

}  // namespace kvstream::codec
