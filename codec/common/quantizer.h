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

// Separately rounded fp32 operations. On the host the codec compiles with -ffp-contract=off (GCC contracts
// a multiply and an add into an FMA across inlined calls too, wherever the ISA has one: x86 files built with
// -mfma, every aarch64 file); on the device the _rn intrinsics forbid it explicitly.
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

// The integer a non-escape symbol stands for.
KVSTREAM_HD int SymbolToQ(uint8_t symbol) { return static_cast<int>(symbol) - kSymbolZero; }
KVSTREAM_HD uint8_t QToSymbol(int q) { return static_cast<uint8_t>(q + kSymbolZero); }

// Channel-uniform scheme: x' = mean + q * step.
KVSTREAM_HD float DequantChannelUniform(uint8_t symbol, float mean, float step) {
  return AddRn(mean, MulRn(static_cast<float>(SymbolToQ(symbol)), step));
}

// Transform scheme (docs/format.md, "Scheme 3"): a coded row's integer weights q_j (non-escape symbols)
// sum exactly in int32 against the profile's int16 basis, acc_c = sum_j q_j * B[j][c], so every decoder
// gets the same acc whatever its order of summation; then x'_c = mean_c + f32(acc_c) * s with
// s = step * 2^-kBasisScaleBits, and each escaped component adds (w * s) * B[j][c] in component order
// (keys are then rotated, key_rotation.h).
inline constexpr int kBasisScaleBits = 14;  // B = round(u * 2^14): |B| <= 2^14 for unit rows
inline constexpr int kMaxTransformChannels = 1024;  // 127 * 2^14 * 1024 < 2^31: the int32 sum cannot overflow
KVSTREAM_HD float TransformStepScale(float step) { return MulRn(step, 1.0f / static_cast<float>(1 << kBasisScaleBits)); }
KVSTREAM_HD float DequantTransform(int32_t acc, float mean, float scaled_step) {
  return AddRn(mean, MulRn(static_cast<float>(acc), scaled_step));
}
KVSTREAM_HD float AddEscapedComponent(float y, float weight, float scaled_step, int16_t basis) {
  return AddRn(y, MulRn(MulRn(weight, scaled_step), static_cast<float>(basis)));
}

// Predicted scheme (docs/format.md, "Scheme 4"): a slice's rows start from a prediction, then add the
// transform's dequantised residual like DequantTransform adds it to the mean. The prediction reads the
// earlier slices' reconstructed rows as integers z = round(y * inv_grid) (ties to even) clamped to
// +-kMaxPredictorInput, inv_grid a power of two per (slice, channel), so that its products are int16 x
// int16 sums, exact in int32 as the transform's are: base_c = bias_c, then for each input block b in
// order base_c = base_c + f32(acc_b[c]) * scale_b[c], acc_b[c] = sum_i z_i * P_b[i][c].
inline constexpr int kMaxPredictorInput = 2047;
// The largest |P| a block of `inputs` inputs may hold, so that its int32 sum cannot overflow.
inline int MaxPredictorWeight(int64_t inputs) {
  const int64_t bound = INT32_MAX / (inputs * kMaxPredictorInput);
  return static_cast<int>(bound < 32767 ? bound : 32767);
}
// Branch-free, so that a row's loop vectorises: (v + kMagic) - kMagic rounds |v| < 2^22 to the nearest
// integer (ties to even) and leaves larger and infinite values beyond the clamp; NaN (from a hostile
// escape value) fails every comparison and gives 0.
KVSTREAM_HD int16_t PredictorInput(float y, float inv_grid) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float limit = static_cast<float>(kMaxPredictorInput);
  const float v = MulRn(y, inv_grid);
  const float r = AddRn(AddRn(v, kMagic), -kMagic);
  const float clamped = r > limit ? limit : (r < -limit ? -limit : r);
  return static_cast<int16_t>(v == v ? clamped : 0.0f);
}
KVSTREAM_HD float AddPrediction(float base, int32_t acc, float scale) {
  return AddRn(base, MulRn(static_cast<float>(acc), scale));
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
