// A folder of chunk files that `kvstream bench gpu --chunks DIR` decodes, with what the CPU decoder made of
// them, so that the GPU benchmark and its bit-for-bit check run where no model, tokenizer or BLAS is
// present (the GPU machines). `kvstream bench gpu --model M --write-chunks DIR` writes one.
//
// DIR/MANIFEST, one line per item, '#' lines comments:
//   profile FILE                                   the profile the lossy chunks reference
//   set NAME SCHEME LEVEL TOKENS HASH FILE,FILE,...  one context's chunks at one level
// HASH: 16 hex digits, the FNV-1a 64 (codec's ProfileHash) of the set decoded by the CPU decoder into a
// contiguous fp16 [layers][TOKENS][channels] keys buffer followed by the values buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvstream/level.h"
#include "kvstream/profile.h"
#include "kvstream/tensor.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct GpuChunkSet {
  std::string name;    // "predicted-L4"
  std::string scheme;  // informative: SchemeName, or "none" for fp16 / int8
  std::string level;   // LevelName
  int64_t tokens = 0;  // the context's tokens, from position 0
  uint64_t hash = 0;
  std::vector<std::vector<uint8_t>> chunks;
};

struct GpuChunkFolder {
  std::vector<uint8_t> profile_bytes;  // empty when no set needs one
  std::vector<GpuChunkSet> sets;
};

// The CPU decoder's hash of a set (as HASH above); fails like DecodeChunkInto.
Result<uint64_t> CpuDecodedHash(const GpuChunkSet& set, const Profile* profile);

// The sets `kvstream bench gpu --model` writes, from one context's KV ([layers][tokens][channels] views
// from position 0, and the tokens' importance for fine rows): fp16 and int8 on the first
// `passthrough_tokens`, then every lossy level kind the profile supports (channel-uniform with the
// profile's tables at L1, L4 and its top level and with in-chunk tables at L3; transform and predicted at
// L2, L4 with fine rows and the top level), each cut into chunks of `chunk_tokens`; their hashes from
// the CPU decoder.
struct GpuChunkFolderOptions {
  int64_t passthrough_tokens = 128;
  int64_t chunk_tokens = 256;
  double fine_fraction = 0.12;
  Level fine_level = 2;
};
Result<GpuChunkFolder> MakeGpuChunkFolder(const TensorView& keys, const TensorView& values,
                                          const std::vector<float>& importance, const Profile& profile,
                                          const GpuChunkFolderOptions& options);

Status WriteGpuChunkFolder(const std::string& dir, const GpuChunkFolder& folder);
Result<GpuChunkFolder> ReadGpuChunkFolder(const std::string& dir);

}  // namespace kvstream::bench
