// kvstream's rows of `bench codec` (see the header).
#include "bench/kvstream_levels.h"

#include <algorithm>
#include <memory>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream::bench {
namespace {

constexpr int kCalibrationTokens = 2048;
// The predictors have up to 3 x channels inputs; on fewer than about 4096 tokens they overfit
// (lab/rate-distortion.md, "Cross-layer prediction").
constexpr int kPredictionCalibrationTokens = 4096;

// The ladder's levels (in both schemes when the profile has a transform) plus int8 and fp16, sharing one
// profile.
std::vector<std::unique_ptr<KvCodec>> LevelCodecs(Profile profile, FineRowsOption fine) {
  auto shared = std::make_shared<const Profile>(std::move(profile));
  std::vector<std::unique_ptr<KvCodec>> codecs;
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

CodecFactory KvstreamCodecFactory(const std::string& calibration_text, int64_t offset, const std::string& profile_path,
                                  const CodecBenchOptions& options, CalibrationSlice* learned_from) {
  return [=](const Model& model) -> Result<std::vector<std::unique_ptr<KvCodec>>> {
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
