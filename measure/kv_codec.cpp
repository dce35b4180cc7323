// The pieces every KvCodec shares.
#include "measure/kv_codec.h"

#include <string>

namespace kvstream {

std::string KvCodec::name() const {
  const bool one_level = !IsLossyLevel(level()) && method() != "kvstream";
  return one_level ? method() : method() + "-" + LevelName(level());
}

Status CheckChunkShape(const KvChunk16& chunk, uint32_t layers, uint32_t tokens, uint32_t channels,
                       const char* what) {
  if (layers != static_cast<uint32_t>(chunk.layers) || tokens != static_cast<uint32_t>(chunk.tokens) ||
      channels != static_cast<uint32_t>(chunk.channels)) {
    return Status::InvalidArgument(std::string(what) + ": chunk shape " + std::to_string(layers) + "x" +
                                   std::to_string(tokens) + "x" + std::to_string(channels) +
                                   " does not match the destination " + std::to_string(chunk.layers) + "x" +
                                   std::to_string(chunk.tokens) + "x" + std::to_string(chunk.channels));
  }
  if (chunk.k.size() != static_cast<size_t>(chunk.values_per_tensor()) || chunk.v.size() != chunk.k.size()) {
    return Status::InvalidArgument(std::string(what) + ": destination k/v buffers are not sized to the shape");
  }
  return Status::Ok();
}

}  // namespace kvstream
