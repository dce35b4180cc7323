// Per-element quantisation and dequantisation of the lossy schemes, written once as host/device code.
//
// The decoder's reconstruction is part of the format: it is defined here bit for bit in IEEE fp32 with
// every operation rounded separately (no fused multiply-add), so the CPU decoder, the CUDA kernels and
// an independent implementation all produce identical floats. The encoder's choice of q is free (it
// rounds to nearest); only the reconstruction is normative.
#pragma once

#include <cmath>
#include <cstdint>

#include "codec/common/container_format.h"
#include "common/half.h"

namespace kvstream::codec {

// Separately rounded fp32 operations. Separate inline functions keep host compilers from contracting a
// multiply and an add into an FMA (contraction only applies within one expression); on the device the
// _rn intrinsics forbid it explicitly.
KVSTREAM_HD float MulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
KVSTREAM_HD float AddRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
KVSTREAM_HD float DivRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// The integer a non-escape symbol stands for.
KVSTREAM_HD int SymbolToQ(uint8_t symbol) { return static_cast<int>(symbol) - kSymbolZero; }
KVSTREAM_HD uint8_t QToSymbol(int q) { return static_cast<uint8_t>(q + kSymbolZero); }

// Channel-uniform scheme: x' = mean + q * step.
KVSTREAM_HD float DequantChannelUniform(uint8_t symbol, float mean, float step) {
  return AddRn(mean, MulRn(static_cast<float>(SymbolToQ(symbol)), step));
}

// Transform scheme: a coded row's component weights w_j (q_j, or an escape's fp16 value) are summed into
// each channel's accumulator in component order with fused multiply-adds from acc = +0 (a zero weight may
// be skipped: it leaves the sum unchanged), then x'_c = mean_c + step * acc_c (keys are then rotated,
// key_rotation.h).
KVSTREAM_HD float AccumulateComponent(float acc, float weight, float basis) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(weight, basis, acc);
#else
  return std::fma(weight, basis, acc);
#endif
}
KVSTREAM_HD float DequantTransform(float acc, float mean, float step) { return AddRn(mean, MulRn(step, acc)); }
KVSTREAM_HD float SymbolWeight(uint8_t symbol) { return static_cast<float>(SymbolToQ(symbol)); }

// CacheGen scheme: the (layer, token) step is max|x| / C with C = bins / 2 - 1; x' = q * step.
KVSTREAM_HD int CacheGenRange(int bins) { return bins / 2 - 1; }
KVSTREAM_HD float CacheGenStep(uint16_t max_abs_fp16, int bins) {
  return DivRn(HalfToFloat(max_abs_fp16), static_cast<float>(CacheGenRange(bins)));
}
KVSTREAM_HD float DequantScaled(uint8_t symbol, float step) {
  return MulRn(static_cast<float>(SymbolToQ(symbol)), step);
}

// Encoder side (host only): the symbol of the nearest q to (x - offset) / step, or kEscapeSymbol when x is
// not finite or q falls outside [-kMaxAbsQ, kMaxAbsQ]. inv_step = 1 / step. Branch-free, so that the
// encoder's loop over a row vectorises.
inline uint8_t QuantizeToSymbol(float x, float offset, float inv_step) {
  const float y = (x - offset) * inv_step;
  // Round to nearest even without a libm call: exact for |y| < 2^22 under the default rounding mode;
  // beyond that r is still far outside the range, and a NaN fails both comparisons.
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float r = (y + kMagic) - kMagic;
  const float limit = static_cast<float>(kMaxAbsQ);
  const bool in_range = r >= -limit && r <= limit;
  const int q = static_cast<int>(in_range ? r : 0.0f);
  return in_range ? QToSymbol(q) : kEscapeSymbol;
}

}  // namespace kvstream::codec
