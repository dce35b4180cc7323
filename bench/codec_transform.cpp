// KvTransform adapter over a BaselineCodec (see the header).
#include "bench/codec_transform.h"

#include <algorithm>
#include <memory>
#include <vector>

namespace kvstream::bench {
namespace {

class CodecTransform final : public KvTransform {
 public:
  // `codec` may be non-owning (an aliasing pointer to a codec the caller keeps alive).
  CodecTransform(std::shared_ptr<const BaselineCodec> codec, int chunk_tokens)
      : codec_(std::move(codec)), chunk_tokens_(chunk_tokens) {}
  // "int8", "zstd-3", "cachegen-ref-L3", "kvstream-L3": the level only where the method has several.
  std::string name() const override {
    const bool one_level = !IsLossyLevel(codec_->level()) && codec_->method() != "kvstream";
    return one_level ? codec_->method() : codec_->method() + "-" + LevelName(codec_->level());
  }

  Result<double> Apply(KvCache& cache) const override {
    if (chunk_tokens_ < 1) return Status::InvalidArgument("chunk_tokens = " + std::to_string(chunk_tokens_));
    double bits = 0;
    int64_t values = 0;
    std::vector<uint8_t> bytes;
    for (int t0 = 0; t0 < cache.tokens; t0 += chunk_tokens_) {
      KvChunk16 chunk = ChunkFromCache(cache, t0, std::min(chunk_tokens_, cache.tokens - t0));
      bytes.clear();
      EncodeStats stats;
      KVSTREAM_RETURN_IF_ERROR(codec_->Encode(chunk, &bytes, &stats));
      bits += stats.charged_bits > 0 ? stats.charged_bits : 8.0 * static_cast<double>(bytes.size());
      values += chunk.values();
      KVSTREAM_RETURN_IF_ERROR(codec_->Decode(bytes.data(), bytes.size(), &chunk));
      ChunkToCache(chunk, t0, cache);
    }
    return values > 0 ? bits / static_cast<double>(values) : 0.0;
  }

 private:
  std::shared_ptr<const BaselineCodec> codec_;
  int chunk_tokens_;
};

}  // namespace

std::unique_ptr<KvTransform> MakeCodecTransform(const BaselineCodec& codec, int chunk_tokens) {
  // Aliasing constructor: points at the caller's codec without owning it.
  return std::make_unique<CodecTransform>(std::shared_ptr<const BaselineCodec>(std::shared_ptr<void>(), &codec),
                                          chunk_tokens);
}

std::unique_ptr<KvTransform> MakeCodecTransform(std::unique_ptr<const BaselineCodec> codec, int chunk_tokens) {
  return std::make_unique<CodecTransform>(std::shared_ptr<const BaselineCodec>(std::move(codec)), chunk_tokens);
}

}  // namespace kvstream::bench
