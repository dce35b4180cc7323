// kvstream/scheme.h — how a lossy level maps values to symbols: the quantisation schemes, their names.
//
// The scheme is stored in a lossy chunk's header (docs/format.md, "Fixed header") and chosen per encode
// (EncodeOptions::scheme). Its names are what the CLI, reports and profiles' quality records use.
#pragma once

#include <cstdint>
#include <string>

#include "kvstream/status.h"

namespace kvstream {

// The values are the chunk header's scheme byte; 2 (cachegen-token, removed in chunk format version 7)
// is never reused. docs/codec.md explains each scheme.
enum class QuantScheme : uint8_t {
  // Per (layer, K/V, channel) mean offset and uniform step; step = level multiplier x base step. Tables
  // from the profile or carried in the chunk. The default.
  kChannelUniform = 1,
  // Per (layer, K/V) a learned orthonormal basis (PCA) of the keys with RoPE undone and of the values; the
  // components above the level's noise floor are quantised with one uniform step and coded with a table
  // each. Needs a profile learned with ProfileOptions::transform; decoding costs a matrix product.
  kTransform = 3,
  // The transform scheme on the residual of a cross-layer prediction: each (layer, K/V)'s rows are first
  // predicted from the reconstructed rows of the previous layer (and values from this layer's keys) at
  // the same positions, linearly, and only the difference is transform-coded. Needs a profile learned
  // with ProfileOptions::predict; layers reconstruct one after another.
  kPredicted = 4,
};

// "channel-uniform", "transform" or "predicted"; "unknown" for a value outside the enum.
const char* SchemeName(QuantScheme scheme);

// The scheme named `name` (as SchemeName writes it); InvalidArgument naming the text and listing the
// valid names otherwise.
Result<QuantScheme> ParseQuantScheme(const std::string& name);

}  // namespace kvstream
