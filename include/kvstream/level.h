// kvstream/level.h — compression levels, as named on the wire, in profiles, reports and the CLI.
//
// A level is a small int: 1..N are the codec's lossy levels, from near-lossless (1) to most aggressive
// (N, the top of a model's ladder, see the profile); 0 is fp16 passthrough, -1 per-token int8, and -2
// "text": the chunk's token ids, recomputed by the receiver's model.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

namespace kvstream {

using Level = int;
inline constexpr Level kLevelFp16 = 0;
inline constexpr Level kLevelInt8 = -1;
inline constexpr Level kLevelText = -2;
inline constexpr Level kMaxLossyLevel = 15;

inline bool IsLossyLevel(Level level) { return level >= 1 && level <= kMaxLossyLevel; }
inline bool IsValidLevel(Level level) { return level >= kLevelText && level <= kMaxLossyLevel; }

// How a lossy level maps values to symbols. Stored in the chunk header; docs/codec.md explains each.
enum class QuantScheme : uint8_t {
  // Per (layer, K/V, channel) mean offset and uniform step; step = level multiplier x base step. The
  // context's first 4 positions (attention sinks) are stored exact as fp16.
  kChannelUniform = 1,
  // CacheGen's released scheme: per (layer, token) symmetric scale = max |x| over channels, with a number
  // of bins per (layer, K/V) that shrinks with depth. For comparison; not the default.
  kCacheGenToken = 2,
  // Per (layer, K/V) a learned orthonormal basis (PCA) of the keys with RoPE undone and of the values; the
  // components above the level's noise floor are quantised with one uniform step and coded with a table
  // each. Needs a profile learned with ProfileOptions::transform. About 1.2x smaller than
  // kChannelUniform at equal quality on SmolLM2; decoding costs a matrix product (slower on a CPU).
  kTransform = 3,
  // The transform scheme on the residual of a cross-layer prediction: each (layer, K/V)'s rows are first
  // predicted from the reconstructed rows of the previous layer (and values from this layer's keys) at
  // the same positions, linearly, and only the difference is transform-coded. Needs a profile learned
  // with ProfileOptions::predict. About 1.3x smaller than kTransform at equal quality on SmolLM2;
  // layers reconstruct one after another, and each costs about three more matrix products.
  kPredicted = 4,
};
const char* QuantSchemeName(QuantScheme scheme);

inline std::string LevelName(Level level) {
  switch (level) {
    case kLevelFp16: return "fp16";
    case kLevelInt8: return "int8";
    case kLevelText: return "text";
    default: break;
  }
  // Appending (rather than `"L" + std::to_string(...)`) sidesteps a GCC 12 -Wrestrict false positive.
  std::string name = IsLossyLevel(level) ? "L" : "invalid(";
  name += std::to_string(level);
  if (!IsLossyLevel(level)) name += ")";
  return name;
}

// Parses "fp16", "int8", "text", "L3" or "3"; returns false for anything else.
inline bool ParseLevel(const std::string& text, Level* level) {
  if (text == "fp16") { *level = kLevelFp16; return true; }
  if (text == "int8") { *level = kLevelInt8; return true; }
  if (text == "text") { *level = kLevelText; return true; }
  const std::string digits = (!text.empty() && (text[0] == 'L' || text[0] == 'l')) ? text.substr(1) : text;
  if (digits.empty() || digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  const int value = std::atoi(digits.c_str());
  if (!IsLossyLevel(value)) return false;
  *level = value;
  return true;
}

}  // namespace kvstream
