// A bank of rANS tables shared by many channels, and its byte form (docs/format.md, "Table bank").
//
// Per-(layer, K/V, channel) distributions are what make KV symbols cheap (CacheGen's finding), but one
// 23 KiB rANS model per channel would cost hundreds of MB per level. Channels with similar
// distributions share a table instead: a bank holds up to 255 models and every channel a one-byte index.
// Profiles store one bank per level; chunks without a profile store a small bank per segment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codec/common/container_format.h"
#include "codec/common/rans.h"
#include "kvstream/status.h"

namespace kvstream::codec {

inline constexpr int kMaxBankTables = 255;

struct TableBank {
  std::vector<RansModel> models;
  std::vector<uint8_t> index;  // one entry per channel, < models.size()

  // Model pointers for channels [first, first + n): the `models` argument of RansEncode/RansDecode.
  std::vector<const RansModel*> ChannelModels(size_t first, size_t n) const {
    std::vector<const RansModel*> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = &models[index[first + i]];
    return out;
  }
};

// Writes the bank: u8 count, the tables (u8 lo, u8 hi, u16 escape freq, freq[lo..hi]) and, when
// count > 1, one u8 index per channel.
void WriteTableBank(const TableBank& bank, ByteWriter& out);

// Reads a bank for `channels` channels; checks every table (lo <= hi, lo >= 1, frequencies summing to
// 2^12) and every index.
Status ReadTableBank(ByteReader& in, size_t channels, TableBank* bank);

}  // namespace kvstream::codec
