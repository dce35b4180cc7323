// kvstream/rope.h — how a model rotates its keys (RoPE), as far as the codec needs to know it.
//
// Keys are cached after RoPE: each pair of a head's channels is rotated by an angle that grows with the
// token's position. The transform scheme undoes the rotation before coding (the de-rotated keys are
// stationary in position, so one basis and one set of tables fit every position) and applies it again
// after decoding.
#pragma once

#include <cstdint>

namespace kvstream {

// Which channels form a rotated pair: llama2.c/Meta interleave (x[2i], x[2i+1]); Hugging Face rotates
// halves (x[i], x[i + head_dim/2]).
enum class RopeLayout : uint8_t { kInterleaved = 0, kRotateHalf = 1 };

// Pair i of every head turns by position * theta^(-2i / head_dim).
struct RopeSpec {
  int head_dim = 64;
  float theta = 10000.0f;
  RopeLayout layout = RopeLayout::kInterleaved;
};

}  // namespace kvstream
