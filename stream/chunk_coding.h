// The one place the stream layer calls the codec: encoding a chunk of a registered context at a level,
// decoding a received chunk into destination views, reading a text chunk's token ids, and the CRC32C
// stamped on every payload in flight.
#pragma once

#include <cstdint>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/level.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "kvstream/stream.h"
#include "kvstream/tensor.h"

namespace kvstream::stream {

// With the sender's profile, scheme and fine level; the context's tokens of at least fine_min_importance
// (where it has importance values) are the fine rows.
Result<std::vector<uint8_t>> EncodeContextChunk(const ContextSpec& context, int64_t token_begin, int64_t tokens,
                                                Level level, const SenderOptions& sender, float fine_min_importance,
                                                int threads);

// Decodes a KV-level chunk (not text) into the destination slices, checking that it covers `token_begin`.
// parallel_for: where the chunk's segments (or blocks of positions) run; null: the calling thread only.
Status DecodeChunkInto(const uint8_t* data, size_t size, const Profile* profile, int64_t token_begin,
                       const TensorView& keys, const TensorView& values, const ParallelFor& parallel_for = {});

Result<std::vector<int32_t>> DecodeTextChunk(const uint8_t* data, size_t size, int64_t expected_tokens);

uint32_t PayloadCrc32c(const uint8_t* data, size_t size);

}  // namespace kvstream::stream
