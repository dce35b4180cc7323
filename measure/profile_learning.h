// Learning a model's codec profile end to end, as `kvstream profile` and kvstream.Profile.learn do it:
// prefill sample windows of text (or take another engine's KV as the samples), learn the profile, weigh
// the slices with the model when asked, then code a held-out window at every level of every scheme the
// profile serves and record the sizes (and, when measured, the qualities) in it.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/profile.h"
#include "kvstream/quality.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"
#include "measure/kvstream_codec.h"

namespace kvstream {

struct ProfileLearningOptions {
  // What the builder learns (tables, channel exponent, transform, predict, byte predictors). The model's
  // name (at most 255 bytes of it) and its RoPE are taken from the model; `ladder` is set from
  // `ladder_steps`.
  ProfileOptions profile;
  std::vector<float> ladder_steps;  // the levels' step multipliers, increasing, in (0, 16]; empty: default
  // Sample texts: window i comes from text i mod n, each text's windows in order from its start; the
  // held-out window (a context and the eval_tokens after it) follows the first text's sample windows.
  std::vector<std::string> texts = {kDefaultText};
  // Instead of `texts` when not empty: texts already tokenized by the model's tokenizer (named text_tokens[i]
  // in errors), cut the same way; a benchmark passes the parts of its texts it does not score.
  std::vector<std::vector<int>> text_tokens;
  int contexts = 4;  // text windows to learn from; with `samples` given, 0 (the samples are the windows)
  int context_tokens = 512;
  int eval_tokens = 128;   // tokens after the held-out context scored when `measure`
  int chunk_tokens = 256;  // chunk size of the held-out coding
  FineRowsOption fine;     // the fine rows the transform and predicted levels are sized (and measured) with
  bool weigh_slices = false;
  bool measure = false;
};

// A level of a scheme coded on the held-out context.
struct LearnedLevel {
  QuantScheme scheme = QuantScheme::kChannelUniform;
  Level level = 0;
  double bits_per_value = 0;
  // The same level with in-chunk tables (channel-uniform with the default ladder only); NaN otherwise.
  double in_chunk_bits_per_value = std::numeric_limits<double>::quiet_NaN();
  QualityReport quality;  // filled when measured
};

struct LearnedProfile {
  Profile profile;  // with each level's size (and quality) recorded
  // With weigh_slices: the scheme and level the slices were weighed at and each slice's KL, [layer * 2 + kv].
  QuantScheme weighed_scheme = QuantScheme::kChannelUniform;
  Level weighed_level = 0;
  std::vector<double> slice_sensitivity;
  std::vector<QualityReport> baselines;  // fp16 and int8 on the held-out window, when measured
  std::vector<LearnedLevel> levels;      // channel-uniform's levels, then the transform's, then the predicted's
};

// One sample from another engine: a context from position 0 in the codec's [layers][tokens][channels].
struct KvSample {
  TensorView keys;
  TensorView values;
};

// Learns `model`'s profile from `options.contexts` text windows prefilled with `model` and from `samples`
// (which must fit the model: same layers and K/V width); errors name the option at fault.
Result<LearnedProfile> LearnProfile(const Model& model, const ProfileLearningOptions& options,
                                    const std::vector<KvSample>& samples = {});

}  // namespace kvstream
