// The tiled integer sums that the vector SumComponents kernels share (transform_sum_avx2.cpp,
// transform_sum_avx512.cpp), written once over a vector type's operations `V`:
//   Vec, kColumns (int16 columns per vector), kRows (rows per tile), Zero(), Load(const int16_t*), UnpackLo/UnpackHi(a, b)
//   (vpunpck{l,h}wd), Broadcast(int32_t), MaddAdd(sum, a, b) (sum + vpmaddwd(a, b)) and
//   Store(lo_sum, hi_sum, int32_t*), which writes a tile row's kColumns sums in column order.
// vpmaddwd multiplies int16 pairs and adds each pair into an int32 lane, so the weights go in pairs and
// the basis rows j and j+1 are interleaved on the fly (the profile keeps its row-per-component layout).
// A tile of kRows rows keeps 2 x kRows accumulators in registers (8 rows on AVX-512's 32 registers, so
// that each interleaving of two basis rows serves 8 rows; 4 on AVX2's 16); columns go outermost, so that
// the basis slice a tile reads (kept x kColumns int16) stays in L1 while every row passes. Integer sums are exact, so the
// order of the additions does not matter.
//
// Only for files compiled with the vector ISA: everything here has internal linkage, so one file's
// instructions never stand in for another's.
#pragma once

#include <cstdint>
#include <cstring>

#include "codec/common/transform_sum.h"

namespace kvstream::codec {
namespace {  // internal linkage, see above

inline int32_t WeightPairAt(const int16_t* q) {
  int32_t pair;
  std::memcpy(&pair, q, 4);
  return pair;
}

// Rows [r, r + kRows), columns [c, c + V::kColumns).
template <typename V, int kRows>
void SumTile(const int16_t* q, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc, int64_t r, int64_t c) {
  using Vec = typename V::Vec;
  const int64_t stride = WeightStride(kept);
  Vec lo_sum[kRows], hi_sum[kRows];
  for (int i = 0; i < kRows; ++i) lo_sum[i] = hi_sum[i] = V::Zero();
  const int16_t* qr = q + r * stride;
  for (int64_t k = 0; k < kept; k += 2) {
    const Vec first = V::Load(basis + k * cols + c);
    const Vec second = k + 1 < kept ? V::Load(basis + (k + 1) * cols + c) : V::Zero();
    const Vec lo = V::UnpackLo(first, second);
    const Vec hi = V::UnpackHi(first, second);
    for (int i = 0; i < kRows; ++i) {
      const Vec w = V::Broadcast(WeightPairAt(qr + i * stride + k));
      lo_sum[i] = V::MaddAdd(lo_sum[i], lo, w);
      hi_sum[i] = V::MaddAdd(hi_sum[i], hi, w);
    }
  }
  for (int i = 0; i < kRows; ++i) V::Store(lo_sum[i], hi_sum[i], acc + (r + i) * cols + c);
}

// SumComponents over the columns [0, n), n the largest multiple of V::kColumns <= cols; returns n.
template <typename V>
int64_t SumTiledColumns(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  int64_t c = 0;
  for (; c + V::kColumns <= cols; c += V::kColumns) {
    int64_t r = 0;
    for (; r + V::kRows <= rows; r += V::kRows) SumTile<V, V::kRows>(q, kept, basis, cols, acc, r, c);
    for (; r + 4 <= rows; r += 4) SumTile<V, 4>(q, kept, basis, cols, acc, r, c);
    for (; r < rows; ++r) SumTile<V, 1>(q, kept, basis, cols, acc, r, c);
  }
  return c;
}

}  // namespace
}  // namespace kvstream::codec
