// kvstream/level.h — compression levels, as named on the wire, in profiles, reports and the CLI.
//
// A level is a small int: 1..N are the codec's lossy levels, from near-lossless (1) to most aggressive
// (N, the top of a model's ladder, see the profile); 0 is fp16 passthrough, -1 per-token int8, and -2
// "text": the chunk's token ids, recomputed by the receiver's model.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>

#include "kvstream/scheme.h"  // lossy levels come with a scheme; most users of levels name it too

namespace kvstream {

using Level = int;
inline constexpr Level kLevelFp16 = 0;
inline constexpr Level kLevelInt8 = -1;
inline constexpr Level kLevelText = -2;
inline constexpr Level kMaxLossyLevel = 15;

inline bool IsLossyLevel(Level level) { return level >= 1 && level <= kMaxLossyLevel; }
inline bool IsValidLevel(Level level) { return level >= kLevelText && level <= kMaxLossyLevel; }

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
