// DecodeChunk and DecodeChunkTokens: validate the container, the destinations and the profile, then
// decode every (layer, K/V) segment (of the requested layers) into the caller's views, layers in parallel, with the decoder of the
// chunk's level and scheme (segment_decoders.h): a task takes as many segments as the CPU's rANS kernel
// decodes together (a layer's keys and values, two layers' when it takes four streams). A predicted chunk's
// layers depend on each other, so its segments are only entropy-decoded in that pass; a second one
// reconstructs blocks of positions in parallel, each through every layer in order.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "codec/common/key_rotation.h"
#include "codec/common/parallel.h"
#include "codec/common/predicted_rows.h"
#include "codec/common/profile_data.h"
#include "codec/common/rans.h"
#include "codec/decompress/container_reader.h"
#include "codec/decompress/segment_decoders.h"
#include "codec/decompress/store_rows.h"
#include "kvstream/codec.h"

namespace kvstream {
namespace {

Status CheckDestination(const TensorView& view, const char* what, const ChunkInfo& info) {
  KVSTREAM_RETURN_IF_ERROR(ValidateView(view, what));
  if (view.device != Device::kHost) return Status::Unsupported(std::string(what) + ": the CPU decoder writes host views only");
  static const char* kDims[] = {"layers", "tokens", "channels"};
  const int64_t want[3] = {info.layers, info.tokens, info.channels};
  for (int i = 0; i < 3; ++i) {
    if (view.shape[i] != want[i]) {
      return Status::InvalidArgument(std::string(what) + ": " + kDims[i] + " = " + std::to_string(view.shape[i]) +
                                     " but the chunk has " + std::to_string(want[i]));
    }
  }
  return Status::Ok();
}

}  // namespace

Status DecodeChunk(const uint8_t* data, size_t size, const DecodeOptions& options, const TensorView& keys_out,
                   const TensorView& values_out) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, codec::ReadContainer(data, size, options.limits, /*verify_segments=*/false));
  if (info.level == kLevelText) {
    return Status::InvalidArgument("decode: a text-level chunk holds token ids, not KV; recompute them with the model");
  }
  KVSTREAM_RETURN_IF_ERROR(CheckDestination(keys_out, "keys_out", info));
  KVSTREAM_RETURN_IF_ERROR(CheckDestination(values_out, "values_out", info));
  KVSTREAM_RETURN_IF_ERROR(codec::CheckChunkProfile(info, options.profile));
  const int64_t layer_end = options.layer_end < 0 ? info.layers : options.layer_end;
  if (options.layer_begin < 0 || options.layer_begin >= layer_end || layer_end > info.layers) {
    return Status::InvalidArgument("decode: layers [" + std::to_string(options.layer_begin) + ", " +
                                   std::to_string(layer_end) + ") of a chunk of " + std::to_string(info.layers));
  }
  const bool predicted = info.scheme == QuantScheme::kPredicted && IsLossyLevel(info.level);
  // Segment 2l holds layer l's keys and 2l + 1 its values (the container reader checked the order).
  const size_t begin = predicted ? 0 : static_cast<size_t>(2 * options.layer_begin);
  const size_t end = static_cast<size_t>(2 * layer_end);
  if (!IsLossyLevel(info.level)) {
    return codec::RunParallel(end - begin, options.threads, options.parallel_for,
                              codec::WithFencedStores([&](size_t i) -> Status {
      const SegmentInfo& seg = info.segments[begin + i];
      KVSTREAM_RETURN_IF_ERROR(codec::VerifySegment(data, seg));
      return codec::DecodePassthroughSegment(data, info, seg, seg.tensor == SegmentTensor::kKeys ? keys_out : values_out);
    }));
  }
  std::optional<codec::RopeTable> rope;  // the chunk's positions, shared by its key segments
  if ((info.scheme == QuantScheme::kTransform || predicted) && options.profile->Supports(QuantScheme::kTransform)) {
    rope.emplace(DataOf(*options.profile).transform.rope, info.token_begin, info.tokens);
  }
  // A task takes whole layers: as many segments as the rANS kernel decodes together, one layer at least.
  const size_t segments = end - begin;
  const size_t per_task = std::max<size_t>(2, codec::RansStreamsDecodedTogether());
  // A predicted chunk's segments outlive the first pass, which only prepares their rows.
  std::optional<codec::PredictedChunk> prepared;
  if (predicted) prepared.emplace(*options.profile, end);
  KVSTREAM_RETURN_IF_ERROR(codec::RunParallel((segments + per_task - 1) / per_task, options.threads, options.parallel_for,
                                              codec::WithFencedStores([&](size_t task) -> Status {
    const size_t first = begin + task * per_task;
    const size_t n = std::min(per_task, end - first);
    for (size_t i = first; i < first + n; ++i) KVSTREAM_RETURN_IF_ERROR(codec::VerifySegment(data, info.segments[i]));
    const codec::LossySegments group{data, info, options.profile, keys_out, values_out, rope ? &*rope : nullptr, first, n};
    switch (info.scheme) {
      case QuantScheme::kChannelUniform: return codec::DecodeChannelUniformSegments(group);
      case QuantScheme::kTransform: return codec::DecodeTransformSegments(group);
      case QuantScheme::kPredicted: return prepared->Prepare(group);
    }
    return Status::Internal("decode: scheme " + std::to_string(static_cast<int>(info.scheme)));
  })));
  if (!predicted) return Status::Ok();
  // Positions are independent: blocks of rows go through every layer in order, in parallel.
  const int64_t rows = info.tokens - info.sink_rows;
  const int64_t blocks = (rows + codec::kPredictedRowBlock - 1) / codec::kPredictedRowBlock;
  return codec::RunParallel(static_cast<size_t>(blocks), options.threads, options.parallel_for,
                            codec::WithFencedStores([&](size_t b) -> Status {
    const int64_t first = static_cast<int64_t>(b) * codec::kPredictedRowBlock;
    prepared->Reconstruct(first, std::min(codec::kPredictedRowBlock, rows - first));
    return Status::Ok();
  }));
}

Result<std::vector<int32_t>> DecodeChunkTokens(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, codec::ReadContainer(data, size, limits, /*verify_segments=*/true));
  if (info.level != kLevelText) {
    return Status::InvalidArgument("decode: chunk is level " + LevelName(info.level) + ", not text; it holds no token ids");
  }
  const SegmentInfo& seg = info.segments[0];
  if (seg.size != uint64_t{4} * info.tokens) {
    return Status::CorruptData(codec::SegmentName(seg) + ": size = " + std::to_string(seg.size) + ", " +
                               std::to_string(info.tokens) + " token ids need " + std::to_string(4 * info.tokens));
  }
  std::vector<int32_t> ids(static_cast<size_t>(info.tokens));
  for (size_t t = 0; t < ids.size(); ++t) {
    uint32_t id;
    std::memcpy(&id, data + seg.offset + 4 * t, 4);
    if (id > static_cast<uint32_t>(INT32_MAX)) {
      return Status::CorruptData(codec::SegmentName(seg) + ": token id " + std::to_string(t) + " = " + std::to_string(id) +
                                 " exceeds 2^31 - 1");
    }
    ids[t] = static_cast<int32_t>(id);
  }
  return ids;
}

}  // namespace kvstream
