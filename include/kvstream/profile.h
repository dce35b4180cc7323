// kvstream/profile.h — a model's codec profile: level ladder, quantisation parameters, entropy tables.
//
// A profile is learned once per model from sample contexts (ProfileBuilder, `kvstream profile`), sent
// once per connection, and referenced by chunks through its 64-bit hash. It holds, for every (layer, K/V,
// channel), the mean offset and per-level quantisation step, and for every lossy level a small bank of
// rANS tables with each channel's index into it; optionally the same for the transform scheme, over the
// components of a learned basis. Its byte format is in docs/format.md ("Profile").
//
// A Profile is immutable once built or parsed, cheap to copy (shared storage) and safe to share between
// threads. Parse treats its bytes as untrusted, exactly like a chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvstream/level.h"
#include "kvstream/rope.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

// One rung of a model's level ladder: the parameters a lossy level quantises with.
struct LevelSpec {
  Level level = 1;
  // step = multiplier x base step of (layer, K/V, channel) in the channel-uniform scheme, of (layer, K/V)
  // in the transform and predicted schemes; finite and > 0.
  float step_multiplier[2] = {0.1f, 0.1f};  // [keys, values]
};

// The default ladder for a model of `layers` layers: level 1 near-lossless to the most aggressive last.
// Step multipliers 0.10, 0.15, 0.25, 0.35, 0.5, 1.0, keys and values alike (docs/codec.md, "Levels").
std::vector<LevelSpec> DefaultLadder(int layers);

// A ladder of these step multipliers, one rung per multiplier in order (keys and values alike), for a
// model of `layers` layers (every rung is the same at every depth since chunk format 7; the argument stays
// so that callers need not change when a rung depends on depth again). The multipliers are not checked
// here (ProfileBuilder::Build refuses a ladder it cannot use).
std::vector<LevelSpec> LadderOfSteps(int layers, const std::vector<float>& multipliers);

// A profile's (or a chunk's profile) hash as 16 lowercase hex digits, as kvstream prints and compares them.
std::string HashHex(uint64_t hash);

// What a level costs in quality, when measured (kvstream eval / profile --measure); NaN when not.
struct LevelQuality {
  double top1_agreement = std::numeric_limits<double>::quiet_NaN();
  double ppl_delta_pct = std::numeric_limits<double>::quiet_NaN();
  double kl_mean = std::numeric_limits<double>::quiet_NaN();
  double bits_per_value = std::numeric_limits<double>::quiet_NaN();
};

// The fine rows (codec.h, EncodeOptions::fine_min_importance) that the transform's and predicted
// levels' recorded qualities were measured with: the `fraction` of each context's tokens that received
// the most attention (FineRowsThreshold), coded at `level`. {0, 0}: none.
struct MeasuredFineRows {
  double fraction = 0.0;
  Level level = 0;
};

struct ProfileLimits {
  int64_t max_layers = 1024;
  int64_t max_channels = 65536;
  uint64_t max_bytes = uint64_t{1} << 30;
};

struct ProfileData;  // private to codec/ (codec/common/profile_data.h)

// What a profile holds beyond its ladder, for reports (kvstream inspect). A scheme the profile does not
// carry has empty kept_share.
struct ProfileSummary {
  struct Components {
    // [level - 1]: the share of components kept, over every (layer, K/V).
    std::vector<double> kept_share;
  };
  Components transform;
  RopeSpec transform_rope;        // the RoPE the transform undoes (keys are de-rotated before it)
  Components predicted;
  int predictor_matrices = 0;     // the predicted scheme's linear predictors
  bool byte_predictors = false;   // every predictor weight within int8 (kvstream profile --byte-predictors)
};

class Profile {
 public:
  // Parses profile bytes (untrusted): every count is checked against the buffer and the limits, the
  // CRC32C verified, every table checked to sum to 2^12. On a CPU with AMX the profile also keeps its
  // transform and predictor matrices in the AMX kernel's layout: about as many bytes again as they take.
  static Result<Profile> Parse(const uint8_t* data, size_t size, const ProfileLimits& limits = {});
  // Parse of a profile file (`kvstream profile --out`); errors name the file.
  static Result<Profile> Load(const std::string& path, const ProfileLimits& limits = {});
  // The canonical bytes; Parse(Serialize()) gives an equal profile with the same hash.
  const std::vector<uint8_t>& bytes() const;
  // 64-bit FNV-1a of bytes(); what chunks reference. Never 0.
  uint64_t hash() const;

  const std::string& model() const;
  int layers() const;
  int channels() const;
  // InvalidArgument naming both shapes unless KV of `layers` x `channels` (described by `what`, e.g. "the
  // chunk") can be coded with this profile.
  Status CheckShape(int64_t layers, int64_t channels, const std::string& what) const;
  // InvalidArgument naming both unless keys rotated with `rope` (by `what`) are what this profile's
  // transform undoes; Ok for a profile without a transform, which never undoes RoPE.
  Status CheckRope(const RopeSpec& rope, const std::string& what) const;
  // The lossy levels this profile serves, 1..levels().size(), in order.
  const std::vector<LevelSpec>& ladder() const;
  const std::vector<LevelQuality>& quality() const;  // [level - 1], with the channel-uniform scheme
  // Whether chunks of `scheme` can be coded with this profile, and the measured quality of its levels
  // ([level - 1]; empty when it cannot). Channel-uniform always can (quality() is its quality); transform
  // needs a profile learned with ProfileOptions::transform, predicted one with ProfileOptions::predict.
  bool Supports(QuantScheme scheme) const;
  const std::vector<LevelQuality>& QualityOf(QuantScheme scheme) const;
  // A copy with the measured quality of `level` with `scheme` recorded (the profile must carry the scheme;
  // the hash changes with the bytes).
  Result<Profile> WithQuality(Level level, const LevelQuality& quality,
                              QuantScheme scheme = QuantScheme::kChannelUniform) const;
  // The fine rows the transform's and predicted qualities were measured with; nullopt until
  // WithMeasuredFineRows records them. A sender whose fine rows differ from recorded ones does not
  // advertise those qualities.
  std::optional<MeasuredFineRows> measured_fine_rows() const;
  ProfileSummary Summary() const;
  // A copy that records them (fraction in [0, 1]; level in 1..ladder().size() when the fraction is above
  // 0, else 0).
  Result<Profile> WithMeasuredFineRows(const MeasuredFineRows& fine) const;

 private:
  explicit Profile(std::shared_ptr<const ProfileData> data) : data_(std::move(data)) {}
  friend class ProfileBuilder;
  friend struct ProfileInternals;  // the codec's access to its data (codec/common/profile_data.h)
  std::shared_ptr<const ProfileData> data_;
};

struct ProfileOptions {
  std::string model;                 // recorded in the profile, for reports (at most 255 bytes)
  std::vector<LevelSpec> ladder;     // empty: DefaultLadder(layers)
  // Distinct rANS tables per level (1..255), shared by all channels. More tables code a little smaller
  // and decode slower (their slot tables stop fitting the caches; docs/codec.md, "Entropy tables").
  int max_tables = 16;
  // base step of a channel = S * (std_c / S)^exponent with S the RMS of std over the (layer, K/V)'s
  // channels (times the slice's weight, slice_sensitivity below). 0 (default) gives one step per
  // (layer, K/V): the MSE-optimal choice under entropy coding.
  float channel_exponent = 0.0f;
  // Also learn the transform scheme (QuantScheme::kTransform): per (layer, K/V) a PCA basis of the keys
  // with RoPE undone (`rope` must be the model's) and of the values, with each level's kept components
  // and tables. It codes smaller than channel-uniform at equal quality and decodes slower on a CPU (a
  // matrix product; docs/codec.md, "Transform"), and adds 2 x layers x channels^2 int16 to the profile; at
  // most 1024 channels.
  bool transform = false;
  RopeSpec rope;
  // Also learn the predicted scheme (QuantScheme::kPredicted; needs `transform`): per (layer, K/V) a linear
  // predictor from the previous layer's reconstructed keys and values (and, for values, this layer's
  // keys), fitted in closed loop at level `predict_fit_level` and used at every level, and a basis of
  // the residual. It codes smaller than the transform at equal quality (docs/codec.md, "Predicted"); adds
  // about 7 x layers x channels^2 int16 to the profile and wants several thousand sample tokens (fewer
  // overfit).
  bool predict = false;
  Level predict_fit_level = 2;
  double predict_ridge = 0.03;  // ridge, relative to the mean diagonal of the normal equations
  // Keep the predictors' weights, and their inputs on contexts like the samples, within int8 (the format
  // allows int16): the AMX kernel then multiplies them once instead of four times, so the predicted
  // scheme decodes faster on CPUs with AMX for a few more bits (docs/codec.md, "Predicted").
  bool byte_predictors = false;
  // How much each (layer, K/V)'s quantisation error alone moves the model's output, [layer * 2 + kv]:
  // the KL that decoding only that slice at one level causes (`kvstream profile --weigh-slices` measures
  // it with the model). Given (2 x layers entries, each finite and >= 0), every slice's base step is
  // scaled by SliceStepScales(slice_sensitivity), at every level and in every scheme; empty (default):
  // the same step relative to each slice's spread everywhere.
  std::vector<double> slice_sensitivity;
};

// The base-step scale g_i of each slice for its measured sensitivity s_i (ProfileOptions::slice_sensitivity):
// sqrt(mean(s) / s_i), clamped to [kMinSliceStepScale, kMaxSliceStepScale]; all 1 when every s_i is 0.
// A slice's KL grows as s_i g_i^2 while its size falls by about one bit per coded value each time its step
// doubles, so the total KL at a given size is least when s_i g_i^2 is the same for every slice. The clamps
// keep each slice near where that law was measured: much coarser steps leave the small-error regime (and
// feed the next layer's prediction a poor input). docs/codec.md, "Slice weights".
inline constexpr float kMinSliceStepScale = 0.35f;
inline constexpr float kMaxSliceStepScale = 2.0f;
std::vector<float> SliceStepScales(const std::vector<double>& sensitivity);

// Learns a profile from sample KV caches of one model (all samples of equal layers and channels).
class ProfileBuilder {
 public:
  explicit ProfileBuilder(ProfileOptions options) : options_(std::move(options)) {}
  // Copies the sample (any dtype and strides) as fp32; the first sample fixes layers and channels. A
  // sample is a context from position 0: its first 4 positions (the sink rows chunks store exact) are
  // left out of the statistics and tables.
  Status AddSample(const TensorView& keys, const TensorView& values);
  Result<Profile> Build() const;
  // Replaces ProfileOptions::slice_sensitivity for the next Build: they are measured with a first profile
  // built without them, from the same samples.
  void SetSliceSensitivity(std::vector<double> sensitivity) { options_.slice_sensitivity = std::move(sensitivity); }

 private:
  Status BuildTransform(const std::vector<float>& slice_step_base, ProfileData* d) const;
  Status BuildPrediction(ProfileData* d) const;
  ProfileOptions options_;
  int64_t layers_ = 0;
  int64_t channels_ = 0;
  int64_t tokens_ = 0;
  std::vector<std::vector<float>> samples_[2];  // [K/V][sample] layers * tokens_i * channels
  std::vector<int64_t> sample_tokens_;
};

}  // namespace kvstream
