// The rate-distortion study's quantisation schemes (lab/rate-distortion.md): each rewrites a KV cache
// into its reconstruction and names every symbol it would code, so that the rate is measured honestly
// without building a codec for each: symbols are costed with per-(K/V, layer, channel[, role]) tables
// learned on a DIFFERENT calibration cache (the profile a real codec would ship once), plus the scheme's
// side information (per-chunk scales, fp16 sink tokens).
//
// Contract: Calibrate once, then Quantise any number of caches; a scheme is immutable after Calibrate
// and Quantise is deterministic. The scaled schemes (cachegen, kivi) clamp to their bins, as they are
// defined; the channel-uniform scheme never clamps: a symbol outside its table's calibrated range is
// charged as an escape plus a raw fp16 value (what the codec's escape does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "kvstream/status.h"

namespace kvstream::lab {

inline constexpr int kRdMaxQ = 127;

class SymbolSink {
 public:
  virtual ~SymbolSink() = default;
  virtual void Emit(int table, int q) = 0;
};

class RdScheme {
 public:
  virtual ~RdScheme() = default;
  virtual std::string name() const = 0;    // "cachegen", "kivi", "channel-uniform", ...
  virtual std::string params() const = 0;  // the knob values, "alpha=0.5 sink=4"
  // Number of distinct symbol tables for a cache of this shape.
  virtual int tables(int layers, int channels) const = 0;
  virtual Status Calibrate(const KvCache& calibration) { return Status::Ok(); }
  // Replaces cache's positions [0, cache.tokens) by their reconstruction, emitting every coded symbol;
  // returns the side-information bits.
  virtual double Quantise(KvCache& cache, SymbolSink& sink) const = 0;
};

// Entropy tables per symbol table, learned from a calibration cache by running the scheme on it.
// Cost of q under table i: -log2((n_q + 1/2) / (N + A/2)) over the calibration range widened by one on
// each side (A values), and for a q outside it an escape (the same formula with n = 0) plus 16 raw bits.
class RdTables {
 public:
  static Result<RdTables> Learn(const RdScheme& scheme, const KvCache& calibration);
  double Cost(int table, int q) const;

 private:
  struct Table {
    int lo = 0, hi = -1;  // calibration range, widened
    double total = 0;     // N + A/2
    std::vector<double> bits;  // per q in [lo, hi]
    double escape_bits = 0;
  };
  std::vector<Table> tables_;
};

// The study's rewrites of a KV cache in place (a scheme charged with calibrated tables, a noise probe):
// Apply returns the bits per K/V value the rewrite is charged.
class CacheTransform {
 public:
  virtual ~CacheTransform() = default;
  virtual std::string name() const = 0;
  virtual Result<double> Apply(KvCache& cache) const = 0;
};

// The quality meter's report for the meter's context rewritten by `transform`.
Result<QualityReport> MeasureTransform(const QualityMeter& meter, const CacheTransform& transform);

// What one Apply measured, beyond the rate it returns.
struct RdRate {
  double bits_per_value = 0;       // calibrated-table symbol cost + side bits, over 2*L*T*C values
  double side_bits_per_value = 0;
  double self_entropy_per_value = 0;  // the symbols' empirical entropy under their own counts (a bound)
};

// A CacheTransform that applies `scheme` and charges its symbols with `tables`; last_rate() holds the
// breakdown of the latest Apply. Both must outlive the transform.
class RdTransform final : public CacheTransform {
 public:
  RdTransform(const RdScheme& scheme, const RdTables& tables) : scheme_(scheme), tables_(tables) {}
  std::string name() const override { return scheme_.name() + " " + scheme_.params(); }
  Result<double> Apply(KvCache& cache) const override;
  const RdRate& last_rate() const { return last_; }

 private:
  const RdScheme& scheme_;
  const RdTables& tables_;
  mutable RdRate last_;
};

// CacheGen's quantiser: per (K/V, layer, token) scale max|x| (fp16 side info); bins per layer from
// key_bins / value_bins (one entry per layer).
std::unique_ptr<RdScheme> MakeCacheGenScheme(std::string label, std::vector<int> key_bins, std::vector<int> value_bins);

// KIVI-style: keys per (layer, channel, group of `group` tokens) asymmetric min/max, values per (layer,
// token) asymmetric min/max over channels; 2^bits levels; fp16 min and scale as side information.
std::unique_ptr<RdScheme> MakeKiviScheme(int bits, int group);

// Entropy-coded uniform quantiser with a step per (K/V, layer, channel) from calibration and no per-chunk
// side information: x' = mean_c + q * step.
struct ChannelUniformOptions {
  double key_alpha = 0.5;    // step = alpha * base
  double value_alpha = 0.5;
  // base step of a channel = S * (std_c / S)^exponent, S the RMS of std_c over the (K/V, layer)'s
  // channels (the codec's ProfileOptions::channel_exponent): 0 = one step per (K/V, layer), 1 = std_c.
  double channel_exponent = 1.0;
  // Per (K/V, layer) step multipliers [2][layers] (sensitivity weighting); empty = all 1.
  std::vector<double> layer_factor[2];
  int sink_tokens = 0;   // the first positions are kept in fp16 (charged 16 bits per value)
  int anchor_group = 1;  // > 1: anchor/delta over token groups (delta against the reconstructed anchor)
  // The last `recent_tokens` positions of the cache (those the continuation attends to most) use the
  // step times recent_factor, with tables of their own.
  int recent_tokens = 0;
  double recent_factor = 0.25;
  std::string label = "channel-uniform";
};
std::unique_ptr<RdScheme> MakeChannelUniformScheme(const ChannelUniformOptions& options);

// KVTC-style transform coding (lab/rate-distortion.md, "Transform coding"). Per (K/V, layer): keys
// optionally de-rotated (RoPE undone at each row's position, which is its cache index), the calibration
// mean removed, then projected on an orthonormal basis: the eigenvectors of the calibration covariance
// (PCA) or the identity (channels). The basis is per model (profile), learned once and shared by every
// step of a sweep.
struct KvBasisOptions {
  bool derotate_keys = true;
  bool pca[2] = {true, true};  // per K/V: PCA basis, else the channels themselves
  int skip_first = 4;          // calibration rows 0..skip_first-1 (sinks) would skew the statistics
  // > 0: block-diagonal PCA over blocks of this many channels (head_dim: one basis per KV head, a
  // decoder 192/block times cheaper); 0: one basis over all channels.
  int block = 0;
  int head_dim = 64;
  float rope_theta = 10000.0f;
  RopeLayout rope_layout = RopeLayout::kInterleaved;
};
struct KvBasis {
  KvBasisOptions options;
  int layers = 0, channels = 0;
  // Per K/V, [layers][channels]: mean (in the de-rotated domain for de-rotated keys); variance of each
  // component, descending for PCA; [layers][channels][channels] basis, row j = component j.
  std::vector<float> mean[2], basis[2];
  std::vector<double> variance[2];
  // S_l of the stored (RoPE'd) cache, the RMS of the channel stds: the channel-uniform scheme's step
  // unit, so that the same alpha means the same step in every scheme.
  std::vector<double> stored_rms[2];
  double max_orthogonality_error = 0;  // max |B B^T - I| over all bases (a check on the eigensolver)
};
Result<KvBasis> LearnKvBasis(const KvCache& calibration, const KvBasisOptions& options);

// Quantises every kept component with one step per (K/V, layer), step = alpha * S_l, entropy-coded with a
// table per (K/V, layer, component). Reverse water-filling: a component whose calibration variance is
// below the uniform quantiser's distortion step^2/12 is dropped (no symbol; reconstructed as the mean).
// The first `sink_tokens` positions are kept in fp16. Decode: x' = rotate(mean + sum_j q_j step u_j).
struct TransformCodingOptions {
  double key_alpha = 0.1;
  double value_alpha = 0.1;
  int sink_tokens = 4;
  std::string label = "pca+derot+sink";
};
// `basis` must outlive the scheme.
std::unique_ptr<RdScheme> MakeTransformCodingScheme(const TransformCodingOptions& options, const KvBasis& basis);

// Cross-layer prediction before transform coding (lab/rate-distortion.md, "Cross-layer prediction").
// Slices are coded in decode order, layer by layer, keys before values. A slice's de-rotated row at
// position t is first predicted linearly (a per-slice matrix and bias, least squares with a small ridge)
// from rows already reconstructed at the same position: the previous layer's de-rotated keys and its
// values, and for values this layer's keys. The residual is then transform-coded like
// MakeTransformCodingScheme's rows: PCA of the residual, reverse water-filling, one step per slice
// (alpha * S_l), one table per component. Calibrate learns every predictor and basis in closed loop, on
// the calibration cache's own reconstruction, in decode order, so the predictors see the noise a decoder's
// inputs carry. A decoder would run about (inputs + C) multiply-adds per value instead of C.
struct PredictiveCodingOptions {
  double key_alpha = 0.17;
  double value_alpha = 0.17;
  int sink_tokens = 4;
  bool from_previous_layer = true;  // inputs: layer l-1's keys and values
  int history_layers = 1;           // with from_previous_layer: also layers l-2 .. l-history's
  bool same_tensor_only = false;    // with from_previous_layer: keys from earlier keys only, values from values
  bool values_from_keys = true;     // inputs of values: this layer's keys
  double ridge = 1e-3;              // added to the normal equations' diagonal, relative to its mean
  int rank = 0;                     // > 0: reduced-rank predictors (that many output directions); 0: full
  // > 0: predictors and bases fitted in closed loop at this alpha (one set a profile could share across
  // levels), then used at key_alpha / value_alpha; 0: fitted at the scheme's own alphas.
  double fit_alpha = 0;
  KvBasisOptions rope;              // head_dim, rope_theta, rope_layout (keys are always de-rotated)
  std::string label = "predicted+pca+derot+sink";
};
std::unique_ptr<RdScheme> MakePredictiveCodingScheme(const PredictiveCodingOptions& options);

// The noise a per-layer sensitivity probe adds: uniform with width `step_rms` times S (the RMS over
// channels of the channel's std) of one (kv, layer) only. Deterministic (fixed-seed generator).
std::unique_ptr<CacheTransform> MakeLayerNoiseTransform(int kv, int layer, double step_rms);

}  // namespace kvstream::lab
