// profile_learning.cpp — see profile_learning.h.
#include "measure/profile_learning.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/whole_file.h"
#include "measure/codec_quality.h"
#include "measure/slice_sensitivity.h"

namespace kvstream {
namespace {

Status CheckRange(const char* name, int64_t value, int64_t low, int64_t high) {
  if (value >= low && value <= high) return Status::Ok();
  return Status::InvalidArgument(std::string(name) + " = " + std::to_string(value) + ", expected " + std::to_string(low) + ".." +
                                 std::to_string(high));
}

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

Status CheckOptions(const ProfileLearningOptions& o, bool have_samples) {
  KVSTREAM_RETURN_IF_ERROR(CheckRange("contexts", o.contexts, have_samples ? 0 : 1, 1024));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("context_tokens", o.context_tokens, 16, 65536));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("eval_tokens", o.eval_tokens, 1, 65536));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("chunk_tokens", o.chunk_tokens, 1, 65536));
  KVSTREAM_RETURN_IF_ERROR(CheckRange("max_tables", o.profile.max_tables, 1, 255));
  const float exponent = o.profile.channel_exponent;
  if (!(exponent >= 0.0f && exponent <= 1.0f)) {
    return Status::InvalidArgument("channel_exponent = " + Number(exponent) + ", expected 0..1");
  }
  if (o.profile.byte_predictors && !o.profile.predict) return Status::InvalidArgument("byte_predictors needs predict");
  if (o.ladder_steps.size() > static_cast<size_t>(kMaxLossyLevel)) {
    return Status::InvalidArgument("ladder: 1 to " + std::to_string(kMaxLossyLevel) + " multipliers, got " +
                                   std::to_string(o.ladder_steps.size()));
  }
  for (size_t i = 0; i < o.ladder_steps.size(); ++i) {
    const float m = o.ladder_steps[i];
    if (!(m > 0.0f && m <= 16.0f)) return Status::InvalidArgument("ladder: " + Number(m) + " is not a step multiplier in (0, 16]");
    if (i > 0 && !(m > o.ladder_steps[i - 1])) {
      return Status::InvalidArgument("ladder: the multipliers must increase (level 1 the finest), " + Number(m) + " follows " +
                                     Number(o.ladder_steps[i - 1]));
    }
  }
  if (!(o.fine.fraction >= 0.0 && o.fine.fraction <= 1.0)) {
    return Status::InvalidArgument("fine_fraction = " + Number(o.fine.fraction) + ", expected 0..1");
  }
  KVSTREAM_RETURN_IF_ERROR(CheckRange("fine_level", o.fine.level, 1, kMaxLossyLevel));
  if (!o.text_tokens.empty()) return Status::Ok();
  if (o.texts.empty()) return Status::InvalidArgument("text: no file given");
  for (const std::string& path : o.texts) {
    if (path.empty()) return Status::InvalidArgument("text: an empty file name");
  }
  return Status::Ok();
}

// The sample windows and the held-out window (a context and its continuation, + 1 token for the last
// target), cut as ProfileLearningOptions::texts says.
struct SampleWindows {
  std::vector<std::vector<int>> contexts;
  std::vector<int> held_out;
};

Result<SampleWindows> CutSampleWindows(const Model& model, const ProfileLearningOptions& o) {
  const bool tokenized = !o.text_tokens.empty();
  const int64_t n = static_cast<int64_t>(tokenized ? o.text_tokens.size() : o.texts.size());
  const int64_t contexts = o.contexts;
  if (contexts > 0 && n > contexts) {
    return Status::InvalidArgument("text: " + std::to_string(n) + " files for " + std::to_string(contexts) +
                                   " contexts (each file gives at least one)");
  }
  SampleWindows out;
  out.contexts.resize(static_cast<size_t>(contexts));
  for (int64_t f = 0; f < n; ++f) {
    const std::string path = tokenized ? "text_tokens[" + std::to_string(f) + "]" : o.texts[static_cast<size_t>(f)];
    std::vector<int> read;
    if (!tokenized) {
      Result<std::string> text = ReadTextFile(path);
      if (!text.ok()) return text.status().WithContext("text");
      read = model.tokenizer().Encode(*text, model.tokenizer().adds_bos());
    }
    const std::vector<int>& ids = tokenized ? o.text_tokens[static_cast<size_t>(f)] : read;
    const int64_t own = (contexts - f + n - 1) / n;  // sample windows f, f + n, ...
    const int64_t needed = own * o.context_tokens + (f == 0 ? o.context_tokens + o.eval_tokens + 1 : 0);
    if (static_cast<int64_t>(ids.size()) < needed) {
      return Status::InvalidArgument("text " + path + " has " + std::to_string(ids.size()) + " tokens; its " + std::to_string(own) +
                                     " contexts of " + std::to_string(o.context_tokens) +
                                     (f == 0 ? " plus the held-out one and its " + std::to_string(o.eval_tokens) + " scored tokens"
                                             : std::string()) +
                                     " need " + std::to_string(needed));
    }
    for (int64_t k = 0; k < own; ++k) {
      out.contexts[static_cast<size_t>(f + k * n)].assign(ids.begin() + k * o.context_tokens, ids.begin() + (k + 1) * o.context_tokens);
    }
    if (f == 0) out.held_out.assign(ids.begin() + own * o.context_tokens, ids.begin() + needed);
  }
  return out;
}

Status CheckSampleFits(const KvSample& s, size_t index, const ModelConfig& config) {
  const std::string name = "samples[" + std::to_string(index) + "]";
  if (s.keys.layers() != config.n_layers || s.keys.channels() != config.kv_dim() || s.values.layers() != s.keys.layers() ||
      s.values.tokens() != s.keys.tokens() || s.values.channels() != s.keys.channels()) {
    return Status::InvalidArgument(name + ": keys " + std::to_string(s.keys.layers()) + " x " + std::to_string(s.keys.tokens()) + " x " +
                                   std::to_string(s.keys.channels()) + ", values " + std::to_string(s.values.layers()) + " x " +
                                   std::to_string(s.values.tokens()) + " x " + std::to_string(s.values.channels()) + "; the model " +
                                   config.name + " has " + std::to_string(config.n_layers) + " layers x " +
                                   std::to_string(config.kv_dim()) + " channels");
  }
  return Status::Ok();
}

// Codes the meter's context with `codec` and, when measuring, scores it.
Result<LearnedLevel> CodeLevel(const QualityMeter& meter, const KvCodec& codec, const ProfileLearningOptions& o, QuantScheme scheme,
                               Level level) {
  LearnedLevel row;
  row.scheme = scheme;
  row.level = level;
  KvCache cache = meter.context_cache();
  KVSTREAM_ASSIGN_OR_RETURN(row.bits_per_value, ApplyCodec(codec, o.chunk_tokens, cache));
  if (o.measure) {
    KVSTREAM_ASSIGN_OR_RETURN(row.quality, meter.Measure(codec.name(), cache, row.bits_per_value));
  }
  return row;
}

LevelQuality QualityOf(const LearnedLevel& row, bool measured) {
  LevelQuality q;
  q.bits_per_value = row.bits_per_value;
  if (measured) {
    q.top1_agreement = row.quality.top1_agreement;
    q.ppl_delta_pct = row.quality.ppl_delta_pct;
    q.kl_mean = row.quality.kl_mean;
  }
  return q;
}

}  // namespace

Result<LearnedProfile> LearnProfile(const Model& model, const ProfileLearningOptions& options, const std::vector<KvSample>& samples) {
  KVSTREAM_RETURN_IF_ERROR(CheckOptions(options, !samples.empty()));
  const ModelConfig& config = model.config();
  for (size_t i = 0; i < samples.size(); ++i) KVSTREAM_RETURN_IF_ERROR(CheckSampleFits(samples[i], i, config));
  KVSTREAM_ASSIGN_OR_RETURN(SampleWindows windows, CutSampleWindows(model, options));

  ProfileOptions profile_options = options.profile;
  profile_options.model = config.name.substr(0, 255);
  profile_options.transform = profile_options.transform || profile_options.predict;
  profile_options.rope = config.rope();
  if (!options.ladder_steps.empty()) profile_options.ladder = LadderOfSteps(config.n_layers, options.ladder_steps);
  ProfileBuilder builder(profile_options);
  for (size_t i = 0; i < samples.size(); ++i) {
    KVSTREAM_RETURN_IF_ERROR(builder.AddSample(samples[i].keys, samples[i].values).WithContext("samples[" + std::to_string(i) + "]"));
  }
  for (const std::vector<int>& window : windows.contexts) {
    KvCache cache = KvCache::Allocate(config, options.context_tokens);
    KVSTREAM_RETURN_IF_ERROR(model.Forward(window, cache, nullptr));
    KVSTREAM_RETURN_IF_ERROR(builder.AddSample(cache.keys(), cache.values()));
  }
  KVSTREAM_ASSIGN_OR_RETURN(Profile first, builder.Build());

  LearnedProfile out{std::move(first)};
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(model, std::move(windows.held_out),
                                                                     QualityOptions{options.context_tokens, options.eval_tokens}));
  if (options.weigh_slices) {
    // Measured with the scheme the profile serves best, at its most aggressive level but one.
    out.weighed_scheme = profile_options.predict     ? QuantScheme::kPredicted
                         : profile_options.transform ? QuantScheme::kTransform
                                                     : QuantScheme::kChannelUniform;
    out.weighed_level = std::max<Level>(1, static_cast<Level>(out.profile.ladder().size()) - 1);
    const FineRowsOption fine = out.weighed_scheme == QuantScheme::kChannelUniform ? FineRowsOption{} : options.fine;
    KVSTREAM_ASSIGN_OR_RETURN(out.slice_sensitivity,
                              MeasureSliceSensitivity(meter, std::make_shared<const Profile>(out.profile), out.weighed_scheme,
                                                      out.weighed_level, fine, options.chunk_tokens));
    builder.SetSliceSensitivity(out.slice_sensitivity);
    KVSTREAM_ASSIGN_OR_RETURN(out.profile, builder.Build());
  }
  if (options.measure) {
    // Baselines on the same held-out window, so the levels' quality reads against them.
    for (Level level : {kLevelFp16, kLevelInt8}) {
      const std::unique_ptr<KvCodec> baseline = MakeKvstreamLevelCodec(nullptr, level);
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, MeasureCodec(meter, *baseline, options.chunk_tokens));
      out.baselines.push_back(std::move(r));
    }
  }
  // The profile gains each level's quality (and a new hash) as we go; chunks are coded with the learned one.
  // Chunks with in-chunk tables quantise with the default ladder, so they compare only with it.
  const auto learned = std::make_shared<const Profile>(out.profile);
  for (const LevelSpec& spec : learned->ladder()) {
    KVSTREAM_ASSIGN_OR_RETURN(LearnedLevel row, CodeLevel(meter, *MakeKvstreamLevelCodec(learned, spec.level), options,
                                                          QuantScheme::kChannelUniform, spec.level));
    if (options.ladder_steps.empty()) {
      KvCache own = meter.context_cache();
      KVSTREAM_ASSIGN_OR_RETURN(row.in_chunk_bits_per_value, ApplyCodec(*MakeKvstreamLevelCodec(nullptr, spec.level), options.chunk_tokens, own));
    }
    KVSTREAM_ASSIGN_OR_RETURN(out.profile, out.profile.WithQuality(spec.level, QualityOf(row, options.measure)));
    out.levels.push_back(std::move(row));
  }
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    if (!learned->Supports(scheme)) continue;
    for (const LevelSpec& spec : learned->ladder()) {
      // Coded as a sender with the same fine rows serves them, so that what it advertises is what it sends.
      KVSTREAM_ASSIGN_OR_RETURN(LearnedLevel row, CodeLevel(meter, *MakeKvstreamLevelCodec(learned, spec.level, scheme, options.fine),
                                                            options, scheme, spec.level));
      KVSTREAM_ASSIGN_OR_RETURN(out.profile, out.profile.WithQuality(spec.level, QualityOf(row, options.measure), scheme));
      out.levels.push_back(std::move(row));
    }
  }
  if (learned->Supports(QuantScheme::kTransform)) {  // so that a sender can check its fine rows are these
    KVSTREAM_ASSIGN_OR_RETURN(out.profile, out.profile.WithMeasuredFineRows({options.fine.fraction,
                                                                             options.fine.fraction > 0 ? options.fine.level : 0}));
  }
  return out;
}

}  // namespace kvstream
