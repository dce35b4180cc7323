// Rewriting a chunk's CRC32Cs after a test mutates it, so that the mutation reaches the field checks and
// the decoder behind them (docs/format.md: the header CRC covers the fixed header, the index and the
// fine-row map).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "codec/common/crc32c.h"

namespace kvstream::testing {

inline uint32_t HeaderBytes(const std::vector<uint8_t>& b) {
  uint32_t segments, tokens;
  std::memcpy(&segments, b.data() + 28, 4);
  std::memcpy(&tokens, b.data() + 20, 4);
  const uint32_t map = (b[12] & 0x02) != 0 ? (tokens + 7) / 8 : 0;  // the fine-row map
  return 64 + 24 * segments + map + 4;
}

inline void FixHeaderCrc(std::vector<uint8_t>* b) {
  const uint32_t hb = HeaderBytes(*b);
  if (hb > b->size()) return;
  const uint32_t crc = codec::Crc32c(b->data(), hb - 4);
  std::memcpy(b->data() + hb - 4, &crc, 4);
}

// Recomputes every segment's CRC as the index describes it, then the header's.
inline void FixAllCrcs(std::vector<uint8_t>* b) {
  uint32_t segments;
  std::memcpy(&segments, b->data() + 28, 4);
  for (uint32_t i = 0; i < segments; ++i) {
    const size_t entry = 64 + 24 * static_cast<size_t>(i);
    if (entry + 24 > b->size()) return;
    uint64_t offset;
    uint32_t size;
    std::memcpy(&offset, b->data() + entry, 8);
    std::memcpy(&size, b->data() + entry + 8, 4);
    if (offset > b->size() || size > b->size() - offset) continue;
    const uint32_t crc = codec::Crc32c(b->data() + offset, size);
    std::memcpy(b->data() + entry + 12, &crc, 4);
  }
  FixHeaderCrc(b);
}

}  // namespace kvstream::testing
