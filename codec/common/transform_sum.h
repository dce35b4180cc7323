// The transform scheme's reconstruction sums (quantizer.h): each coded row's integer weights against the
// profile's int16 basis, exact in int32, so the AVX-512 (VNNI or not), AVX2 and portable kernels (and any
// other decoder) agree.
#pragma once

#include <cstdint>

namespace kvstream::codec {

// acc[r][c] = sum over j < kept of q[r * stride + j] * basis[j * cols + c] for rows r < rows, where
// stride = kept rounded up to even and q[r * stride + kept] is 0 when kept is odd (the AVX2 kernel takes
// the weights in pairs). Needs every sum to fit in int32: kept x max|q| x max|basis| < 2^31 (the transform:
// |q| <= kMaxAbsQ, |basis| <= 2^kBasisScaleBits, kept <= kMaxTransformChannels; a predictor block:
// |z| <= kMaxPredictorInput, |P| <= MaxPredictorWeight(kept)).
void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);

// The vector kernels (transform_sum_avx2.cpp, transform_sum_avx512.cpp, transform_sum_avx512vnni.cpp);
// call SumComponents instead. Each computes the columns [0, n) for the largest n <= cols that is a
// multiple of its tile width (16, 32 and 32 columns) and returns n.
int64_t SumComponentsAvx2(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512Vnni(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols,
                                int32_t* acc);

inline int64_t WeightStride(int64_t kept) { return kept + (kept & 1); }

}  // namespace kvstream::codec
