// A codec level as a KvTransform, so the quality meter (kvstream profile --measure, eval) scores exactly
// what a receiver decodes. Header-only: tools/CMakeLists.txt compiles only cmd_*.cpp besides main.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/quality.h"

namespace kvstream::cli {

// A codec level as a KvTransform: the cache goes through fp16 (what an engine hands over), then every
// chunk is encoded and decoded in place. Apply returns all chunk bytes * 8 over the K and V values.
// `profile` (may be null: in-chunk tables) must outlive the transform; chunk_tokens >= 1.
class CodecLevelTransform final : public KvTransform {
 public:
  CodecLevelTransform(Level level, const Profile* profile, int chunk_tokens)
      : level_(level), profile_(profile), chunk_tokens_(chunk_tokens) {}
  std::string name() const override { return "kvstream-" + LevelName(level_) + (profile_ ? "-profile" : ""); }

  Result<double> Apply(KvCache& cache) const override {
    const int64_t L = cache.layers, C = cache.kv_dim;
    uint64_t bytes = 0;
    for (int64_t t0 = 0; t0 < cache.tokens; t0 += chunk_tokens_) {
      const int64_t n = std::min<int64_t>(chunk_tokens_, cache.tokens - t0);
      std::vector<uint16_t> k16(static_cast<size_t>(L * n * C)), v16(k16.size());
      const TensorView k = TensorView::Dense(k16.data(), DType::kF16, L, n, C), v = TensorView::Dense(v16.data(), DType::kF16, L, n, C);
      const TensorView ck = SliceTokens(cache.keys(), t0, n), cv = SliceTokens(cache.values(), t0, n);
      KVSTREAM_RETURN_IF_ERROR(CopyView(ck, k));
      KVSTREAM_RETURN_IF_ERROR(CopyView(cv, v));
      ChunkInput in;
      in.keys = k;
      in.values = v;
      in.token_begin = t0;
      EncodeOptions eo;
      eo.level = level_;
      eo.profile = profile_;
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> chunk, EncodeChunk(in, eo));
      DecodeOptions dopt;
      dopt.profile = profile_;
      KVSTREAM_RETURN_IF_ERROR(DecodeChunk(chunk.data(), chunk.size(), dopt, ck, cv));
      bytes += chunk.size();
    }
    return 8.0 * static_cast<double>(bytes) / (2.0 * static_cast<double>(L * cache.tokens * C));
  }

 private:
  Level level_;
  const Profile* profile_;
  int chunk_tokens_;
};

}  // namespace kvstream::cli
