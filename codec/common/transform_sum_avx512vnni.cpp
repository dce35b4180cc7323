// SumComponents with AVX-512 VNNI (compiled with -mavx512vnni besides AVX-512F and BW): the AVX-512 tiles
// with each multiply-accumulate one vpdpwssd instead of vpmaddwd then vpaddd, which halves the
// instructions of the inner loop (the transform decode ran 1.25x faster on an Intel Xeon host); and the
// kernel of the matrices packed for it (PackedMatrix::Layout::kVnniPairs and kVnniBytes), which reads
// them without unpacking, and against a matrix of bytes (kvstream's predictor blocks) with weights within
// int8 too multiplies with vpdpbusd: four byte pairs per int32 lane where vpdpwssd takes two int16 pairs.
#include "codec/common/transform_sum.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cstring>
#include <vector>

#include "codec/common/transform_sum_avx512_ops.h"
#include "codec/common/transform_sum_tiles.h"

namespace kvstream::codec {
namespace {

// sum + vpdpbusd(u, s), sum + vpdpwssd(u, s). Written as instructions: with the intrinsics, GCC 12 copied
// each accumulator to a new register before the (destructive) instruction and, out of registers, kept a
// tile's sums on the stack (the byte tile ran 1.4x slower, the int16 tiles 1.2x).
__m512i DotBytes(__m512i sum, __m512i u, __m512i s) {
  asm("vpdpbusd %[s], %[u], %[sum]" : [sum] "+v"(sum) : [u] "v"(u), [s] "v"(s));
  return sum;
}
__m512i DotPairs(__m512i sum, __m512i u, __m512i s) {
  asm("vpdpwssd %[s], %[u], %[sum]" : [sum] "+v"(sum) : [u] "v"(u), [s] "v"(s));
  return sum;
}

struct Avx512VnniOps : Avx512Ops {
  // vpdpwssd adds the two int16 products of each pair to the int32 lane without saturation: the same
  // integers as vpmaddwd then vpaddd (|q| <= kMaxAbsQ and |basis| <= 2^kBasisScaleBits keep every sum exact).
  static Vec MaddAdd(Vec sum, Vec a, Vec b) { return DotPairs(sum, a, b); }
};

// Against a kVnniBytes matrix, vpdpbusd multiplies unsigned by signed bytes, so each weight w goes in as
// w + 128 and the matrix's column_offsets (-128 x the column's sum) start each sum:
// sum((w + 128) m) - 128 sum(m) = sum(w m). Every term and partial sum is far inside int32
// (|sum| < 2^8 x 2^7 x 1024), and vpdpbusd does not saturate: the same integers as every other kernel.

// A row's weights as w + 128 in depth bytes: 128 (a weight of 0) past kept. False when a weight lies
// outside int8.
bool OffsetBytes(const int16_t* q, int64_t kept, int64_t depth, uint8_t* u) {
  const __m512i bias = _mm512_set1_epi16(128);
  __mmask32 outside = 0;
  for (int64_t j = 0; j < depth; j += 32) {
    const int64_t in_row = depth - j;
    const __mmask32 load = FirstLanes(kept - j);
    const __m512i v = _mm512_add_epi16(_mm512_maskz_loadu_epi16(load, load ? q + j : q), bias);
    outside |= BeyondInt8(v);
    // vpmovwb into a register, then a plain store: straight to memory, it cost 8 % of a predicted decode.
    const __m256i lanes = _mm512_cvtepi16_epi8(v);
    if (in_row >= 32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(u + j), lanes);
    } else {
      alignas(32) uint8_t last[32];
      _mm256_store_si256(reinterpret_cast<__m256i*>(last), lanes);
      std::memcpy(u + j, last, static_cast<size_t>(in_row));
    }
  }
  return outside == 0;
}

// Where a packed kernel reads its weights: `groups` int32 lanes of each row (four offset bytes, or two
// int16 weights), rows `stride` bytes apart.
struct LaneWeights {
  const uint8_t* at;
  int64_t stride, groups;
};

// Rows [0, kRows) of w against the columns [c, c + 16 kVectors) of the packed matrix m, whose lane group g
// holds cols x 4 bytes (columns c.. start 4 c bytes in: 64-byte aligned, as cols and c are multiples of
// 16); the sums start at the column offsets against bytes, at 0 against pairs. kRows x kVectors accumulators
// (8 x 3, with 3 matrix vectors and a broadcast, take 28 of the 32 registers).
// Inlined: called with the struct in memory, each call's reload of it stalled on the store just made
// (8 % of a predicted decode).
template <int kRows, int kVectors, bool kBytes>
[[gnu::always_inline]] inline void LaneTile(LaneWeights w, const uint8_t* m, int64_t cols, const int32_t* offsets,
                                            int32_t* acc, int64_t c) {
  __m512i sum[kRows * kVectors];
  for (int v = 0; v < kVectors; ++v) {
    const __m512i offset = kBytes ? _mm512_loadu_si512(offsets + c + 16 * v) : _mm512_setzero_si512();
    for (int i = 0; i < kRows; ++i) sum[i * kVectors + v] = offset;
  }
  for (int64_t g = 0; g < w.groups; ++g) {
    __m512i b[kVectors];
    for (int v = 0; v < kVectors; ++v) b[v] = _mm512_load_si512(m + 4 * (g * cols + c + 16 * v));
    for (int i = 0; i < kRows; ++i) {
      int32_t lane;
      std::memcpy(&lane, w.at + i * w.stride + 4 * g, 4);
      const __m512i a = _mm512_set1_epi32(lane);
      for (int v = 0; v < kVectors; ++v) {
        __m512i& s = sum[i * kVectors + v];
        s = kBytes ? DotBytes(s, a, b[v]) : DotPairs(s, a, b[v]);
      }
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int v = 0; v < kVectors; ++v) _mm512_storeu_si512(acc + i * cols + c + 16 * v, sum[i * kVectors + v]);
  }
}

template <int kVectors, bool kBytes>
void LaneColumns(LaneWeights w, int64_t rows, const PackedMatrix& matrix, const int32_t* offsets, int32_t* acc,
                 int64_t c) {
  const int64_t cols = matrix.cols;
  const uint8_t* m = matrix.data();
  const auto from = [&](int64_t r) { return LaneWeights{w.at + r * w.stride, w.stride, w.groups}; };
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) LaneTile<8, kVectors, kBytes>(from(r), m, cols, offsets, acc + r * cols, c);
  for (; r + 4 <= rows; r += 4) LaneTile<4, kVectors, kBytes>(from(r), m, cols, offsets, acc + r * cols, c);
  for (; r < rows; ++r) LaneTile<1, kVectors, kBytes>(from(r), m, cols, offsets, acc + r * cols, c);
}

// Columns go outermost, so that a column block's matrix lanes (depth x 48 x 4 bytes at most) stay in L1
// while every row passes.
template <bool kBytes>
void SumLaneColumns(LaneWeights w, int64_t rows, const PackedMatrix& matrix, const int32_t* offsets, int32_t* acc) {
  int64_t c = 0;
  for (; c + 48 <= matrix.cols; c += 48) LaneColumns<3, kBytes>(w, rows, matrix, offsets, acc, c);
  for (; c < matrix.cols; c += 16) LaneColumns<1, kBytes>(w, rows, matrix, offsets, acc, c);
}

}  // namespace

int64_t SumComponentsAvx512Vnni(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols,
                                int32_t* acc) {
  return SumTiledColumns<Avx512VnniOps>(q, rows, kept, basis, cols, acc);
}

int64_t SumComponentsAvx512VnniPacked(const int16_t* q, int64_t rows, int64_t kept, const PackedMatrix& matrix,
                                      int32_t* acc) {
  const int64_t depth = matrix.depth, stride = WeightStride(kept);
  if (kept > depth || rows <= 0) return 0;
  if (matrix.layout == PackedMatrix::Layout::kVnniPairs) {
    // q's rows are the lanes already: pairs of int16 weights (a 0 after an odd kept).
    const LaneWeights w{reinterpret_cast<const uint8_t*>(q), 2 * stride, stride / 2};
    SumLaneColumns<false>(w, rows, matrix, nullptr, acc);
    return matrix.cols;
  }
  if (matrix.layout != PackedMatrix::Layout::kVnniBytes) return 0;
  // Every row's bytes first, then the columns (see SumLaneColumns). All of depth, not just kept: the
  // column offsets count every matrix row.
  thread_local std::vector<uint8_t> offset_weights;
  offset_weights.resize(static_cast<size_t>(rows * depth));
  uint8_t* u = offset_weights.data();
  bool bytes = true;
  for (int64_t r = 0; r < rows; ++r) bytes &= OffsetBytes(q + r * stride, kept, depth, u + r * depth);
  if (!bytes) return 0;
  SumLaneColumns<true>(LaneWeights{u, depth, depth / 4}, rows, matrix, matrix.column_offsets.data(), acc);
  return matrix.cols;
}

}  // namespace kvstream::codec

#endif
