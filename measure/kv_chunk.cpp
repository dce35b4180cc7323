// Conversion between the model's fp32 KvCache and fp16 chunks.
#include "measure/kv_chunk.h"

#include <algorithm>

#include "common/half.h"

namespace kvstream {

KvChunk16 ChunkFromCache(const KvCache& cache, int t0, int n) {
  KvChunk16 chunk;
  chunk.layers = cache.layers;
  chunk.tokens = n;
  chunk.channels = cache.kv_dim;
  chunk.token_begin = t0;
  chunk.context_importance = std::make_shared<const std::vector<float>>(cache.Importance());
  chunk.k.resize(static_cast<size_t>(chunk.values_per_tensor()));
  chunk.v.resize(chunk.k.size());
  for (int l = 0; l < cache.layers; ++l) {
    for (int t = 0; t < n; ++t) {
      const size_t src = (static_cast<size_t>(l) * cache.capacity + t0 + t) * cache.kv_dim;
      uint16_t* k = chunk.k_at(l, t);
      uint16_t* v = chunk.v_at(l, t);
      for (int c = 0; c < cache.kv_dim; ++c) {
        k[c] = FloatToHalf(cache.k[src + c]);
        v[c] = FloatToHalf(cache.v[src + c]);
      }
    }
  }
  return chunk;
}

void ChunkToCache(const KvChunk16& chunk, int t0, KvCache& cache) {
  for (int l = 0; l < chunk.layers; ++l) {
    for (int t = 0; t < chunk.tokens; ++t) {
      const size_t dst = (static_cast<size_t>(l) * cache.capacity + t0 + t) * cache.kv_dim;
      const uint16_t* k = chunk.k_at(l, t);
      const uint16_t* v = chunk.v_at(l, t);
      for (int c = 0; c < chunk.channels; ++c) {
        cache.k[dst + c] = HalfToFloat(k[c]);
        cache.v[dst + c] = HalfToFloat(v[c]);
      }
    }
  }
}

std::vector<KvChunk16> SplitIntoChunks(const KvCache& cache, int tokens, int chunk_tokens) {
  std::vector<KvChunk16> chunks;
  for (int t0 = 0; t0 < tokens; t0 += chunk_tokens) {
    chunks.push_back(ChunkFromCache(cache, t0, std::min(chunk_tokens, tokens - t0)));
  }
  return chunks;
}

}  // namespace kvstream
