// Running a KvCodec over a KV cache and scoring the result (see the header).
#include "measure/codec_quality.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kvstream {

Result<double> ApplyCodec(const KvCodec& codec, int chunk_tokens, KvCache& cache) {
  if (chunk_tokens < 1) return Status::InvalidArgument("chunk_tokens = " + std::to_string(chunk_tokens) + ", expected >= 1");
  double bits = 0;
  int64_t values = 0;
  std::vector<uint8_t> bytes;
  for (int t0 = 0; t0 < cache.tokens; t0 += chunk_tokens) {
    KvChunk16 chunk = ChunkFromCache(cache, t0, std::min(chunk_tokens, cache.tokens - t0));
    bytes.clear();
    EncodeCost cost;
    KVSTREAM_RETURN_IF_ERROR(codec.Encode(chunk, &bytes, &cost));
    bits += cost.charged_bits > 0 ? cost.charged_bits : 8.0 * static_cast<double>(bytes.size());
    values += chunk.values();
    KVSTREAM_RETURN_IF_ERROR(codec.Decode(bytes.data(), bytes.size(), &chunk));
    ChunkToCache(chunk, t0, cache);
  }
  return values > 0 ? bits / static_cast<double>(values) : 0.0;
}

Result<QualityReport> MeasureCodec(const QualityMeter& meter, const KvCodec& codec, int chunk_tokens) {
  KvCache transformed = meter.context_cache();
  Result<double> bits = ApplyCodec(codec, chunk_tokens, transformed);
  if (!bits.ok()) return bits.status().WithContext("method " + codec.name());
  return meter.Measure(codec.name(), transformed, *bits);
}

}  // namespace kvstream
