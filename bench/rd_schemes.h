// The rate-distortion study's quantisation schemes (docs/rate-distortion.md): each rewrites a KV cache
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

namespace kvstream::bench {

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

// What one Apply measured, beyond the rate it returns.
struct RdRate {
  double bits_per_value = 0;       // calibrated-table symbol cost + side bits, over 2*L*T*C values
  double side_bits_per_value = 0;
  double self_entropy_per_value = 0;  // the symbols' empirical entropy under their own counts (a bound)
};

// A KvTransform that applies `scheme` and charges its symbols with `tables`; last_rate() holds the
// breakdown of the latest Apply. Both must outlive the transform.
class RdTransform final : public KvTransform {
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

// The noise a per-layer sensitivity probe adds: uniform with width `step_rms` times S (the RMS over
// channels of the channel's std) of one (kv, layer) only. Deterministic (fixed-seed generator).
std::unique_ptr<KvTransform> MakeLayerNoiseTransform(int kv, int layer, double step_rms);

}  // namespace kvstream::bench
