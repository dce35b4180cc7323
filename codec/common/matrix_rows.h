// The transform scheme's matrix product, shared by the encoder (components of a row) and the decoder
// (a row from its components).
#pragma once

#include <cstdint>

namespace kvstream::codec {

// out[r][c] = the sum over k = 0..inner-1, in order, of a[r][k] * b[k][c], each term added with a fused
// multiply-add starting from +0, terms with a[r][k] == 0 skipped (that leaves every sum unchanged): the
// transform scheme's reconstruction (quantizer.h, AccumulateComponent). a is [rows][inner], b
// [inner][cols], out [rows][cols], all dense. Uses AVX2 + FMA when the CPU has them; the portable path
// gives bit-identical results.
void MultiplyRows(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out);

// The AVX2 + FMA kernel (matrix_rows_avx2.cpp); call MultiplyRows instead.
void MultiplyRowsAvx2(const float* a, int64_t rows, int64_t inner, const float* b, int64_t cols, float* out);

}  // namespace kvstream::codec
