// kvstream/manifest.h — what a sender advertises for a context and what a receiver measures per chunk.
//
// Shared vocabulary of the transport (which carries manifests and telemetry over the control plane) and
// the level policies (which choose from a manifest and learn from telemetry); neither includes the other.
#pragma once

#include <cstdint>
#include <vector>

#include "kvstream/level.h"

namespace kvstream {

struct LevelInfo {
  Level level = kLevelFp16;
  double quality = 1.0;  // measured top-1 agreement with the original KV (1.0 for fp16), from the profile
};

// What the sender advertises for a context: its chunks and each chunk's size at every offered level.
struct FetchManifest {
  int num_chunks = 0;
  int total_tokens = 0;
  std::vector<int> chunk_tokens;               // [chunk] tokens in the chunk (the last may be short)
  std::vector<LevelInfo> levels;               // offered levels, in the order of bytes' inner index
  std::vector<std::vector<uint64_t>> bytes;    // [chunk][level index] encoded size
};

// Measured after each chunk: what the scheduler's estimators learn from.
struct ChunkTelemetry {
  int chunk = 0;
  Level level = kLevelFp16;
  uint64_t bytes = 0;
  double requested_at_s = 0;  // seconds since the fetch began
  double received_at_s = 0;   // last byte arrived
  double decoded_at_s = 0;    // chunk written into the destination (decode or recompute finished)
  double transfer_s = 0;      // received_at - (when its first byte could start moving)
  double decode_s = 0;        // decode (or text recompute) time alone
};

}  // namespace kvstream
