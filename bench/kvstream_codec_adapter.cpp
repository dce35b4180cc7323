// Adapter from kvstream's chunk codec to the benchmark's BaselineCodec (see the header).
#include "bench/kvstream_codec_adapter.h"

#include <memory>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream::bench {
namespace {

constexpr int kCalibrationTokens = 2048;
// The predictors have up to 3 x channels inputs; on fewer than about 4096 tokens they overfit
// (docs/rate-distortion.md, "Cross-layer prediction").
constexpr int kPredictionCalibrationTokens = 4096;

class KvstreamLevelCodec final : public BaselineCodec {
 public:
  KvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level, QuantScheme scheme, FineRowsOption fine)
      : profile_(std::move(profile)), level_(level), scheme_(scheme), fine_(fine) {}
  std::string method() const override {
    const std::string name =
        scheme_ == QuantScheme::kChannelUniform ? "kvstream" : std::string("kvstream-") + QuantSchemeName(scheme_);
    return fine_.fraction > 0 ? name + "+fine" : name;
  }
  Level level() const override { return level_; }

  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeStats* stats) const override {
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

// The ladder's levels (in both schemes when the profile has a transform) plus int8 and fp16, sharing one
// profile.
std::vector<std::unique_ptr<BaselineCodec>> LevelCodecs(Profile profile, FineRowsOption fine) {
  auto shared = std::make_shared<const Profile>(std::move(profile));
  std::vector<std::unique_ptr<BaselineCodec>> codecs;
  for (const LevelSpec& spec : shared->ladder()) codecs.push_back(MakeKvstreamLevelCodec(shared, spec.level));
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    if (!shared->Supports(scheme)) continue;
    for (const LevelSpec& spec : shared->ladder()) codecs.push_back(MakeKvstreamLevelCodec(shared, spec.level, scheme));
    if (fine.fraction <= 0) continue;
    for (const LevelSpec& spec : shared->ladder()) {
      if (spec.level > fine.level) codecs.push_back(MakeKvstreamLevelCodec(shared, spec.level, scheme, fine));
    }
  }
  codecs.push_back(MakeKvstreamLevelCodec(shared, kLevelInt8));
  codecs.push_back(MakeKvstreamLevelCodec(shared, kLevelFp16));
  return codecs;
}

}  // namespace

std::unique_ptr<BaselineCodec> MakeKvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level, QuantScheme scheme,
                                                      FineRowsOption fine) {
  return std::make_unique<KvstreamLevelCodec>(std::move(profile), level, scheme, fine);
}

CodecFactory KvstreamCodecFactory(const std::string& calibration_text, int64_t offset, const std::string& profile_path,
                                  const CodecBenchOptions& options, CalibrationSlice* learned_from) {
  return [=](const Model& model) -> Result<std::vector<std::unique_ptr<BaselineCodec>>> {
    if (!profile_path.empty()) {
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(profile_path, ProfileLimits{}.max_bytes));
      KVSTREAM_ASSIGN_OR_RETURN(Profile profile, Profile::Parse(bytes.data(), bytes.size()));
      KVSTREAM_RETURN_IF_ERROR(
          profile.CheckShape(model.config().n_layers, model.config().kv_dim(), "the model").WithContext(profile_path));
      return LevelCodecs(std::move(profile), {options.fine_fraction, options.fine_level});
    }
    KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(calibration_text));
    const std::vector<int> all = model.tokenizer().Encode(text, true);
    const int64_t begin =
        offset >= 0 ? offset : int64_t{options.windows} * (int64_t{options.context_tokens} + options.eval_tokens) + 1;
    const int64_t n = std::min<int64_t>({options.predict ? kPredictionCalibrationTokens : kCalibrationTokens,
                                         static_cast<int64_t>(all.size()) - begin,
                                         int64_t{model.config().max_seq_len} - 1});
    if (n < 256) {
      return Status::InvalidArgument("calibration text " + calibration_text + " has " + std::to_string(all.size()) +
                                     " tokens; the profile needs at least 256 after token " + std::to_string(begin));
    }
    std::vector<int> tokens = {all[0]};
    tokens.insert(tokens.end(), all.begin() + begin, all.begin() + begin + n);
    KvCache cache = KvCache::Allocate(model.config(), static_cast<int>(tokens.size()));
    KVSTREAM_RETURN_IF_ERROR(model.Forward(tokens, cache, nullptr));
    ProfileOptions po;
    po.model = model.config().name.substr(0, 255);
    po.transform = options.transform || options.predict;
    po.predict = options.predict;
    po.rope = model.config().rope();
    ProfileBuilder builder(po);
    KVSTREAM_RETURN_IF_ERROR(builder.AddSample(cache.keys(), cache.values()));
    KVSTREAM_ASSIGN_OR_RETURN(Profile profile, builder.Build());
    if (learned_from) *learned_from = {calibration_text, begin, n};
    return LevelCodecs(std::move(profile), {options.fine_fraction, options.fine_level});
  };
}

}  // namespace kvstream::bench
