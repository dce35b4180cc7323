// A chunk of a KV cache in the layout engines ship: K and V of every layer for tokens [t0, t0+n), dense
// fp16 [layers][tokens][channels]. Every KvCodec encodes and decodes this form, so that every method is
// measured on the same fp16 input and output a serving engine would hand over.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kvstream/model.h"

namespace kvstream {

struct KvChunk16 {
  int layers = 0;
  int tokens = 0;
  int channels = 0;
  int64_t token_begin = 0;  // position of the chunk's first token in its context (codecs with sink rows need it)
  std::vector<uint16_t> k;  // [layers][tokens][channels], IEEE binary16
  std::vector<uint16_t> v;
  // KvCache::Importance of every position of the chunk's context (the chunk's own from token_begin), so
  // that a codec choosing fine rows per context (FineRowsThreshold) can do so from one chunk.
  std::shared_ptr<const std::vector<float>> context_importance;

  int64_t values_per_tensor() const { return int64_t{layers} * tokens * channels; }
  // K and V together: the count that bits per value divides by.
  int64_t values() const { return 2 * values_per_tensor(); }
  uint16_t* k_at(int l, int t) { return k.data() + (int64_t{l} * tokens + t) * channels; }
  uint16_t* v_at(int l, int t) { return v.data() + (int64_t{l} * tokens + t) * channels; }
  const uint16_t* k_at(int l, int t) const { return k.data() + (int64_t{l} * tokens + t) * channels; }
  const uint16_t* v_at(int l, int t) const { return v.data() + (int64_t{l} * tokens + t) * channels; }
};

// Copies tokens [t0, t0 + n) of `cache` into an fp16 chunk (round to nearest even), with the cache's
// importance.
KvChunk16 ChunkFromCache(const KvCache& cache, int t0, int n);
// Writes a chunk back into tokens [t0, t0 + chunk.tokens) of `cache` as fp32.
void ChunkToCache(const KvChunk16& chunk, int t0, KvCache& cache);
// Splits the first `tokens` positions of `cache` into chunks of `chunk_tokens` (the last may be shorter).
std::vector<KvChunk16> SplitIntoChunks(const KvCache& cache, int tokens, int chunk_tokens);

}  // namespace kvstream
