// The integer tensor-core product the kernels' exact sums use: PTX mma.sync.aligned.m16n8k32.row.col
// with int32 accumulators and signed or unsigned byte operands, D = A x B + D for A 16 x 32 and B 32 x 8.
// Each of a warp's 32 lanes holds a fragment: 4 32-bit words of A (16 bytes), 2 of B (8 bytes) and 4
// accumulators, at the positions below (the PTX ISA's fragment layout for .s8/.u8 m16n8k32). The products
// are integers, so MmaEmulate (the CPU launcher's) gives exactly what the hardware does.
#pragma once

#include <cstdint>

#include "common/half.h"

namespace kvstream::cuda {

inline constexpr int kMmaM = 16, kMmaN = 8, kMmaK = 32;

// Where lane `lane`'s fragment elements sit: A's word `reg` byte `byte` at (row, k); B's word `reg` byte
// `byte` at (k, column); accumulator `reg` at (row, column).
KVSTREAM_HD int MmaARow(int lane, int reg) { return (lane >> 2) + ((reg & 1) ? 8 : 0); }
KVSTREAM_HD int MmaAK(int lane, int reg, int byte) { return (lane & 3) * 4 + byte + ((reg & 2) ? 16 : 0); }
KVSTREAM_HD int MmaBK(int lane, int reg, int byte) { return (lane & 3) * 4 + byte + (reg ? 16 : 0); }
KVSTREAM_HD int MmaBColumn(int lane) { return lane >> 2; }
KVSTREAM_HD int MmaCRow(int lane, int reg) { return (lane >> 2) + (reg >= 2 ? 8 : 0); }
KVSTREAM_HD int MmaCColumn(int lane, int reg) { return (lane & 3) * 2 + (reg & 1); }

KVSTREAM_HD int32_t MmaByte(uint32_t word, int byte, bool is_unsigned) {
  const uint32_t v = (word >> (8 * byte)) & 0xffu;
  return is_unsigned ? static_cast<int32_t>(v) : static_cast<int32_t>(static_cast<int8_t>(v));
}

// One warp's product from its lanes' fragments (a[lane]: 4 words, b[lane]: 2, d[lane]: 4 accumulators).
template <bool kAUnsigned, bool kBUnsigned>
inline void MmaEmulate(const uint32_t* const* a, const uint32_t* const* b, int32_t* const* d) {
  int32_t A[kMmaM][kMmaK], B[kMmaK][kMmaN];
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      for (int byte = 0; byte < 4; ++byte) {
        A[MmaARow(lane, reg)][MmaAK(lane, reg, byte)] = MmaByte(a[lane][reg], byte, kAUnsigned);
      }
    }
    for (int reg = 0; reg < 2; ++reg) {
      for (int byte = 0; byte < 4; ++byte) B[MmaBK(lane, reg, byte)][MmaBColumn(lane)] = MmaByte(b[lane][reg], byte, kBUnsigned);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      const int row = MmaCRow(lane, reg), column = MmaCColumn(lane, reg);
      uint32_t sum = static_cast<uint32_t>(d[lane][reg]);  // modulo 2^32, as the hardware wraps
      for (int k = 0; k < kMmaK; ++k) sum += static_cast<uint32_t>(A[row][k] * B[k][column]);
      d[lane][reg] = static_cast<int32_t>(sum);
    }
  }
}

#if defined(__CUDACC__)
template <bool kAUnsigned, bool kBUnsigned>
__device__ __forceinline__ void MmaDevice(const uint32_t* a, const uint32_t* b, int32_t* d) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define KVSTREAM_MMA(types)                                                                        \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32." types ".s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
               "{%8,%9}, {%0,%1,%2,%3};\n"                                                          \
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                     \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if constexpr (!kAUnsigned && !kBUnsigned) {
    KVSTREAM_MMA("s8.s8");
  } else if constexpr (!kAUnsigned && kBUnsigned) {
    KVSTREAM_MMA("s8.u8");
  } else if constexpr (kAUnsigned && !kBUnsigned) {
    KVSTREAM_MMA("u8.s8");
  } else {
    KVSTREAM_MMA("u8.u8");
  }
#undef KVSTREAM_MMA
#endif
}
#endif

}  // namespace kvstream::cuda
