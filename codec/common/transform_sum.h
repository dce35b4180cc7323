// The transform scheme's reconstruction sums (quantizer.h): each coded row's integer weights against the
// profile's int16 basis, exact in int32, so the AVX-512 (VNNI or not), AVX2 and portable kernels (and any
// other decoder) agree.
#pragma once

#include <cstdint>
#include <vector>

namespace kvstream::codec {

// An int16 matrix [rows][cols] (a basis or a predictor block) rearranged for the AMX kernel: each value
// split into a signed high and an unsigned low byte, laid out as AMX tiles (per 16 columns and 64 rows, a
// tile of high bytes then one of low bytes, four matrix rows interleaved per tile row); a matrix whose
// values all lie within int8 (`bytes`) keeps just the one tile of its values, and the kernel multiplies it
// in half the products (a quarter, against weights within int8 too). The kernel needs
// this layout and would spend longer building it per call than multiplying, so a profile builds one per
// matrix once (ProfileData::PrepareKernels). Empty unless AmxEnabled() and cols is a multiple of 16.
struct AmxMatrix {
  int64_t depth = 0;  // the matrix's rows rounded up to 64
  int64_t cols = 0;
  bool bytes = false;  // every value within [-128, 127]: one tile per 16 columns and 64 rows
  std::vector<uint8_t> storage;  // the tiles, from its first 64-byte boundary (a tile load's rows must not
                                 // straddle cache lines: unaligned, the kernel ran at a third of its speed)

  static AmxMatrix Pack(const int16_t* matrix, int64_t rows, int64_t cols);
  bool empty() const { return storage.empty(); }
  const uint8_t* tiles() const { return AlignedTo64(storage.data()); }

  static uint8_t* AlignedTo64(uint8_t* p) { return p + (-reinterpret_cast<std::uintptr_t>(p) & 63); }
  static const uint8_t* AlignedTo64(const uint8_t* p) { return p + (-reinterpret_cast<std::uintptr_t>(p) & 63); }
};

// acc[r][c] = sum over j < kept of q[r * stride + j] * basis[j * cols + c] for rows r < rows, where
// stride = kept rounded up to even and q[r * stride + kept] is 0 when kept is odd (the AVX2 kernel takes
// the weights in pairs). Needs every sum to fit in int32: kept x max|q| x max|basis| < 2^31 (the transform:
// |q| <= kMaxAbsQ, |basis| <= 2^kBasisScaleBits, kept <= kMaxTransformChannels; a predictor block:
// |z| <= kMaxPredictorInput, |P| <= MaxPredictorWeight(kept)).
// amx: the basis packed by AmxMatrix::Pack, or null; with it (and AmxEnabled()) the AMX kernel runs.
void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                   const AmxMatrix* amx = nullptr);

// The vector kernels (transform_sum_avx2.cpp, transform_sum_avx512.cpp, transform_sum_avx512vnni.cpp);
// call SumComponents instead. Each computes the columns [0, n) for the largest n <= cols that is a
// multiple of its tile width (16, 32 and 32 columns) and returns n.
int64_t SumComponentsAvx2(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc);
int64_t SumComponentsAvx512Vnni(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols,
                                int32_t* acc);
// transform_sum_amx.cpp: every column, or none (returns 0) when kept exceeds the packed rows.
int64_t SumComponentsAmx(const int16_t* q, int64_t rows, int64_t kept, const AmxMatrix& matrix, int32_t* acc);

inline int64_t WeightStride(int64_t kept) { return kept + (kept & 1); }

}  // namespace kvstream::codec
