// fp16 / bf16 <-> fp32 conversion shared by the CPU codec and the CUDA kernels.
//
// Plain integer arithmetic (no intrinsics, no host-only calls) so the same code compiles for host and
// device; results are bit-identical on both, which is what lets the CPU decoder be the GPU's reference.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define KVSTREAM_HD __host__ __device__ __forceinline__
#else
#define KVSTREAM_HD inline
#endif

namespace kvstream {

KVSTREAM_HD uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

KVSTREAM_HD float BitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// IEEE binary16 -> binary32, exact (subnormals, infinities and NaN included).
KVSTREAM_HD float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return BitsToFloat(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return BitsToFloat(sign);
    // Subnormal: normalise the mantissa.
    exp = 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    mant &= 0x3ffu;
    return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// binary32 -> binary16 with round-to-nearest-even; overflow gives infinity. A NaN stays NaN with the top
// 10 bits of its payload, made quiet: what x86's F16C conversion (the CPU decoder's row stores) gives, so
// that scalar, vector and GPU stores agree on every bit, NaN payloads included.
KVSTREAM_HD uint16_t FloatToHalf(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                               // below the smallest normal half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // rounds to zero
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t half = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = ((abs - 0x38000000u) >> 13);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

KVSTREAM_HD float BFloat16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// binary32 -> bfloat16 with round-to-nearest-even; NaN stays NaN.
KVSTREAM_HD uint16_t FloatToBFloat16(float f) {
  const uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace kvstream
