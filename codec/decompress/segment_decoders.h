// The segment decoders, one file per kind of segment (docs/format.md, "Segment payloads"), as
// chunk_decoder.cpp calls them once the container, the destinations and the profile are validated and the
// segments' CRCs verified.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/common/key_rotation.h"
#include "kvstream/codec.h"

namespace kvstream::codec {

// Consecutive segments of a lossy chunk, [first, first + count): whole layers (segment 2l is layer l's
// keys, 2l + 1 its values), at most kRansMaxTogether, whose rANS streams decode together.
struct LossySegments {
  const uint8_t* chunk;
  const ChunkInfo& info;
  const Profile* profile;  // the chunk's, checked against its hash and shape; null when it names none
  const TensorView& keys_out;
  const TensorView& values_out;
  const RopeTable* rope;   // transform and predicted: the chunk's positions (key segments rotate by them)
  size_t first;
  size_t count;
};

// A segment of level fp16 or int8 (passthrough_segment.cpp).
Status DecodePassthroughSegment(const uint8_t* chunk, const ChunkInfo& info, const SegmentInfo& seg, const TensorView& out);

// Scheme 1 (channel_uniform_segment.cpp) and scheme 3 (transform_segment.cpp): the segments decoded into
// their views.
Status DecodeChannelUniformSegments(const LossySegments& segments);
Status DecodeTransformSegments(const LossySegments& segments);

// Scheme 4 (predicted_segment.cpp): a chunk's layers depend on each other, so it decodes in two passes.
// Prepare entropy-decodes groups of segments, in any order and concurrently (each group once); then
// Reconstruct writes blocks of positions, concurrently, each through every layer in order.
class PredictedSegment;
class PredictedChunk {
 public:
  // The chunk's segments [0, segments): its first segments / 2 layers (DecodeOptions::layer_end).
  PredictedChunk(const Profile& profile, size_t segments);
  ~PredictedChunk();

  // Parses the group's segments, decodes their symbols, writes their sink rows and keeps the integer
  // weights and escapes of their coded rows for Reconstruct.
  Status Prepare(const LossySegments& segments);
  // Coded rows [first, first + rows) (within [0, tokens - sink rows)) of every segment, once all are
  // prepared.
  void Reconstruct(int64_t first, int64_t rows) const;

 private:
  const Profile& profile_;
  std::vector<std::unique_ptr<PredictedSegment>> segments_;  // [slice]: segment 2l + kv
};

}  // namespace kvstream::codec
