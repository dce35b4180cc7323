// kvstream's chunk codec levels as KvCodecs (see the header).
#include "measure/kvstream_codec.h"

#include <memory>

#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream {
namespace {

class KvstreamLevelCodec final : public KvCodec {
 public:
  KvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level, QuantScheme scheme, FineRowsOption fine)
      : profile_(std::move(profile)), level_(level), scheme_(scheme), fine_(fine) {}
  std::string method() const override {
    const std::string name =
        scheme_ == QuantScheme::kChannelUniform ? "kvstream" : std::string("kvstream-") + SchemeName(scheme_);
    return fine_.fraction > 0 ? name + "+fine" : name;
  }
  Level level() const override { return level_; }

  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost* stats) const override {
    ChunkInput in;
    in.keys = TensorView::Dense(const_cast<uint16_t*>(chunk.k.data()), DType::kF16, chunk.layers, chunk.tokens, chunk.channels);
    in.values = TensorView::Dense(const_cast<uint16_t*>(chunk.v.data()), DType::kF16, chunk.layers, chunk.tokens, chunk.channels);
    in.token_begin = chunk.token_begin;
    const std::vector<float>* importance = chunk.context_importance.get();
    if (importance && importance->size() >= static_cast<size_t>(chunk.token_begin + chunk.tokens)) {
      in.importance = importance->data() + chunk.token_begin;
    }
    kvstream::EncodeStats codec_stats;
    EncodeOptions options;
    options.level = level_;
    options.profile = IsLossyLevel(level_) ? profile_.get() : nullptr;
    options.scheme = scheme_;
    if (fine_.fraction > 0) {
      if (!in.importance) return Status::InvalidArgument(method() + ": fine rows need the chunk's context importance");
      options.fine_min_importance =
          FineRowsThreshold(importance->data(), static_cast<int64_t>(importance->size()), fine_.fraction);
    }
    options.fine_level = fine_.level;
    options.stats = stats ? &codec_stats : nullptr;
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodeChunk(in, options));
    if (stats) {
      stats->entropy_coded_bits = codec_stats.coded_bits;
      stats->entropy_ideal_bits = codec_stats.ideal_bits;
    }
    out->insert(out->end(), bytes.begin(), bytes.end());
    return Status::Ok();
  }

  Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const override {
    DecodeOptions options;
    options.profile = profile_.get();
    return DecodeChunk(data, size, options,
                       TensorView::Dense(chunk->k.data(), DType::kF16, chunk->layers, chunk->tokens, chunk->channels),
                       TensorView::Dense(chunk->v.data(), DType::kF16, chunk->layers, chunk->tokens, chunk->channels));
  }

 private:
  std::shared_ptr<const Profile> profile_;
  Level level_;
  QuantScheme scheme_;
  FineRowsOption fine_;
};

}  // namespace

std::unique_ptr<KvCodec> MakeKvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level, QuantScheme scheme,
                                                      FineRowsOption fine) {
  return std::make_unique<KvstreamLevelCodec>(std::move(profile), level, scheme, fine);
}

}  // namespace kvstream
