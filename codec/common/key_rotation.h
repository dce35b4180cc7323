// RoPE on cached keys, for the transform scheme: the decoder re-applies the rotation the encoder undid.
//
// Normative (docs/format.md, "Transform scheme"): pair i of a head at position p turns by the angle
// p * theta^(-2i / head_dim), evaluated in double precision; its cosine and sine are rounded to fp32, and
// the rotation is done in fp32 with every operation rounded separately. (Double precision keeps the
// angle exact enough at any position that implementations with accurate libm functions agree.)
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "codec/common/quantizer.h"
#include "kvstream/rope.h"

namespace kvstream::codec {

KVSTREAM_HD double RopeFrequency(int pair, int head_dim, float theta) {
  return pow(static_cast<double>(theta), -2.0 * static_cast<double>(pair) / static_cast<double>(head_dim));
}

KVSTREAM_HD void RopeCosSinAt(double position, double frequency, float* cos_out, float* sin_out) {
  const double angle = position * frequency;
  *cos_out = static_cast<float>(cos(angle));
  *sin_out = static_cast<float>(sin(angle));
}

KVSTREAM_HD void RopeCosSin(double position, int pair, int head_dim, float theta, float* cos_out, float* sin_out) {
  RopeCosSinAt(position, RopeFrequency(pair, head_dim, theta), cos_out, sin_out);
}

// The decoder's rotation of one pair (a, b) -> (a c - b s, a s + b c).
KVSTREAM_HD void RotatePair(float* a, float* b, float c, float s) {
  const float x0 = *a, x1 = *b;
  *a = AddRn(MulRn(x0, c), -MulRn(x1, s));
  *b = AddRn(MulRn(x0, s), MulRn(x1, c));
}

// The cosines and sines of a run of positions, computed once per chunk and shared by its layers.
class RopeTable {
 public:
  RopeTable(const RopeSpec& spec, int64_t first_position, int64_t positions) : spec_(spec), pairs_(spec.head_dim / 2) {
    cos_.resize(static_cast<size_t>(positions * pairs_));
    sin_.resize(cos_.size());
    std::vector<double> frequency(static_cast<size_t>(pairs_));  // pow once per pair, not per position
    for (int i = 0; i < pairs_; ++i) frequency[static_cast<size_t>(i)] = RopeFrequency(i, spec.head_dim, spec.theta);
    for (int64_t t = 0; t < positions; ++t) {
      for (int i = 0; i < pairs_; ++i) {
        const size_t at = static_cast<size_t>(t * pairs_ + i);
        // In double: a hostile token_begin near 2^63 must not overflow.
        RopeCosSinAt(static_cast<double>(first_position) + static_cast<double>(t), frequency[static_cast<size_t>(i)],
                     &cos_[at], &sin_[at]);
      }
    }
  }

  // Applies (decoder) or undoes (encoder) the rotation of the table's position `t` (0-based in the run)
  // on a row of `channels` (a multiple of head_dim).
  void Rotate(float* row, int64_t t, int channels) const { Turn(row, t, channels, 1.0f); }
  void Unrotate(float* row, int64_t t, int channels) const { Turn(row, t, channels, -1.0f); }
  // Position t's cosines and sines, one per pair (what the GPU decoder uploads).
  const float* Cos(int64_t t) const { return cos_.data() + t * pairs_; }
  const float* Sin(int64_t t) const { return sin_.data() + t * pairs_; }

 private:
  void Turn(float* row, int64_t t, int channels, float sign) const {
    const float* c = cos_.data() + t * pairs_;
    const float* s = sin_.data() + t * pairs_;
    // One loop per layout, so that the compiler sees the pairs' stride and vectorises.
    for (float* head = row; head < row + channels; head += spec_.head_dim) {
      if (spec_.layout == RopeLayout::kInterleaved) {
        for (int i = 0; i < pairs_; ++i) RotatePair(head + 2 * i, head + 2 * i + 1, c[i], sign * s[i]);
      } else {
        for (int i = 0; i < pairs_; ++i) RotatePair(head + i, head + pairs_ + i, c[i], sign * s[i]);
      }
    }
  }

  RopeSpec spec_;
  int pairs_;
  std::vector<float> cos_, sin_;
};

}  // namespace kvstream::codec
