// Chunk encode/decode through the codec; see chunk_coding.h.
#include "stream/chunk_coding.h"

#include "codec/common/crc32c.h"
#include "kvstream/codec.h"

namespace kvstream::stream {

Result<std::vector<uint8_t>> EncodeContextChunk(const ContextSpec& context, int64_t token_begin, int64_t tokens,
                                                Level level, const SenderOptions& sender, float fine_min_importance,
                                                int threads) {
  ChunkInput input;
  input.keys = kvstream::SliceTokens(context.keys, token_begin, tokens);
  input.values = kvstream::SliceTokens(context.values, token_begin, tokens);
  input.token_begin = token_begin;
  if (level == kLevelText) {
    if (static_cast<int64_t>(context.token_ids.size()) < token_begin + tokens) {
      return Status::InvalidArgument("level text: the context has " + std::to_string(context.token_ids.size()) +
                                     " token ids, chunk needs up to " + std::to_string(token_begin + tokens));
    }
    input.token_ids = context.token_ids.data() + token_begin;
  }
  EncodeOptions options;
  options.level = level;
  options.profile = sender.profile.get();
  options.scheme = sender.scheme;
  options.threads = threads;
  if (!context.importance.empty()) {
    input.importance = context.importance.data() + token_begin;
    options.fine_min_importance = fine_min_importance;
    options.fine_level = sender.fine_level;
  }
  return EncodeChunk(input, options);
}

Status DecodeChunkInto(const uint8_t* data, size_t size, const Profile* profile, int64_t token_begin,
                       const TensorView& keys, const TensorView& values, const ParallelFor& parallel_for) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, InspectChunk(data, size));
  if (info.token_begin != token_begin) {
    return Status::CorruptData("chunk token_begin = " + std::to_string(info.token_begin) + ", requested " +
                               std::to_string(token_begin));
  }
  DecodeOptions options;
  options.profile = profile;
  options.parallel_for = parallel_for;
  return DecodeChunk(data, size, options, keys, values);
}

Result<std::vector<int32_t>> DecodeTextChunk(const uint8_t* data, size_t size, int64_t expected_tokens) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, DecodeChunkTokens(data, size));
  if (static_cast<int64_t>(ids.size()) != expected_tokens) {
    return Status::CorruptData("text chunk holds " + std::to_string(ids.size()) + " token ids, manifest says " +
                               std::to_string(expected_tokens));
  }
  return ids;
}

uint32_t PayloadCrc32c(const uint8_t* data, size_t size) { return codec::Crc32c(data, size); }

}  // namespace kvstream::stream
