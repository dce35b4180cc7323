// The transform scheme's reconstruction sums (quantizer.h): each coded row's integer weights against the
// profile's int16 basis, exact in int32, so the AVX-512 (VNNI or not), AVX2 and portable kernels (and any
// other decoder) agree.
#pragma once

#include <cstdint>
#include <vector>

namespace kvstream::codec {

// An int16 matrix [rows][cols] (a basis or a predictor block) rearranged once for the fastest kernel this
// CPU runs, which would spend longer building its layout per call than multiplying; a profile packs each
// of its matrices once (ProfileData::PrepareKernels). Three layouts:
//  - kAmx (AmxEnabled()): each value split into a signed high and an unsigned low byte, laid out as AMX
//    tiles (per 16 columns and 64 rows, a tile of high bytes then one of low bytes, four matrix rows
//    interleaved per tile row); a matrix whose values all lie within int8 (`bytes`) keeps just the one tile
//    of its values, and the kernel multiplies it in half the products (a quarter, against weights within
//    int8 too).
//  - kVnniBytes (AVX-512 VNNI without AMX, every value within int8): the values as signed bytes, four
//    matrix rows interleaved per int32 lane ([depth / 4][cols][4]) for vpdpbusd, which multiplies four
//    byte pairs per lane where vpdpwssd multiplies two int16 pairs; the kernel makes the weights unsigned
//    by adding 128, so `column_offsets` holds -128 x each column's sum.
//  - kVnniPairs (AVX-512 VNNI without AMX, any other matrix): two matrix rows interleaved per int32 lane
//    ([depth / 2][cols][2] int16) for vpdpwssd, which then needs no unpacking.
// Empty (kNone) for any other CPU or matrix, or when cols is not a multiple of 16.
struct PackedMatrix {
  enum class Layout { kNone, kAmx, kVnniBytes, kVnniPairs };
  Layout layout = Layout::kNone;
  int64_t depth = 0;  // the matrix's rows rounded up to 64 (kAmx), 4 (kVnniBytes) or 2 (kVnniPairs)
  int64_t cols = 0;
  bool bytes = false;  // every value within [-128, 127]
  std::vector<uint8_t> storage;  // from its first 64-byte boundary (an AMX tile load's rows must not
                                 // straddle cache lines: unaligned, the kernel ran at a third of its speed)
  std::vector<int32_t> column_offsets;  // kVnniBytes: -128 x sum over the rows of each column

  static PackedMatrix Pack(const int16_t* matrix, int64_t rows, int64_t cols);
  bool empty() const { return layout == Layout::kNone; }
  const uint8_t* data() const { return AlignedTo64(storage.data()); }

  static uint8_t* AlignedTo64(uint8_t* p) { return p + (-reinterpret_cast<std::uintptr_t>(p) & 63); }
  static const uint8_t* AlignedTo64(const uint8_t* p) { return p + (-reinterpret_cast<std::uintptr_t>(p) & 63); }
};

// acc[r][c] = sum over j < kept of q[r * stride + j] * basis[j * cols + c] for rows r < rows, where
// stride = kept rounded up to even and q[r * stride + kept] is 0 when kept is odd (the AVX2 kernel takes
// the weights in pairs). Needs every sum to fit in int32: kept x max|q| x max|basis| < 2^31 (the transform:
// |q| <= kMaxAbsQ, |basis| <= 2^kBasisScaleBits, kept <= kMaxTransformChannels; a predictor block:
// |z| <= kMaxPredictorInput, |P| <= MaxPredictorWeight(kept)).
// packed: the basis packed by PackedMatrix::Pack, or null; with it the kernel of its layout runs (while
// the CPU still runs that kernel: tests disable kernels after packing).
void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                   const PackedMatrix* packed = nullptr);

// The vector kernels (transform_sum_avx2.cpp, transform_sum_avx512.cpp, transform_sum_avx512vnni.cpp);
// call SumComponents instead. Each computes the columns [0, n) for the largest n <= cols that is a
// multiple of its tile width (16, 32 and 32 columns) and returns n.
int64_t SumComponentsAvx2(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512Vnni(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols,
                                int32_t* acc);
// transform_sum_amx.cpp: every column, or none (returns 0) when kept exceeds the packed rows.
int64_t SumComponentsAmx(const int16_t* q, int64_t rows, int64_t kept, const PackedMatrix& matrix, int32_t* acc);
// transform_sum_avx512vnni.cpp, against a kVnniPairs or kVnniBytes matrix: every column, or none (returns
// 0) when kept exceeds the packed rows or, against bytes, a weight lies outside int8.
int64_t SumComponentsAvx512VnniPacked(const int16_t* q, int64_t rows, int64_t kept, const PackedMatrix& matrix,
                                      int32_t* acc);

inline int64_t WeightStride(int64_t kept) { return kept + (kept & 1); }

}  // namespace kvstream::codec
