// Rate-distortion schemes and their calibrated entropy tables (see the header).
#include "bench/rd_schemes.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include "codec/common/key_rotation.h"
#include "codec/compress/symmetric_eigen.h"
#include "common/half.h"

namespace kvstream::bench {
namespace {

float* Row(KvCache& cache, int kv, int l, int t) {
  return (kv == 0 ? cache.k.data() : cache.v.data()) + (static_cast<size_t>(l) * cache.capacity + t) * cache.kv_dim;
}
const float* Row(const KvCache& cache, int kv, int l, int t) {
  return (kv == 0 ? cache.k.data() : cache.v.data()) + (static_cast<size_t>(l) * cache.capacity + t) * cache.kv_dim;
}

int ClampQ(double r) { return static_cast<int>(std::clamp(std::nearbyint(r), double{-kRdMaxQ}, double{kRdMaxQ})); }

// Counts symbols per table, for learning tables and for the self-entropy bound.
class CountingSink final : public SymbolSink {
 public:
  explicit CountingSink(int tables) : counts_(static_cast<size_t>(tables)) {}
  void Emit(int table, int q) override { ++counts_[static_cast<size_t>(table)][q]; }
  const std::vector<std::unordered_map<int, uint64_t>>& counts() const { return counts_; }

  double EntropyBits() const {
    double bits = 0;
    for (const auto& table : counts_) {
      uint64_t n = 0;
      for (const auto& [q, c] : table) n += c;
      for (const auto& [q, c] : table) bits -= static_cast<double>(c) * std::log2(static_cast<double>(c) / static_cast<double>(n));
    }
    return bits;
  }

 private:
  std::vector<std::unordered_map<int, uint64_t>> counts_;
};

class CostingSink final : public SymbolSink {
 public:
  CostingSink(const RdTables& tables, CountingSink& counter) : tables_(tables), counter_(counter) {}
  void Emit(int table, int q) override {
    bits_ += tables_.Cost(table, q);
    counter_.Emit(table, q);
  }
  double bits() const { return bits_; }

 private:
  const RdTables& tables_;
  CountingSink& counter_;
  double bits_ = 0;
};

// ---- CacheGen quantiser with profile tables ----
class CacheGenScheme final : public RdScheme {
 public:
  CacheGenScheme(std::string label, std::vector<int> kb, std::vector<int> vb)
      : label_(std::move(label)), bins_{std::move(kb), std::move(vb)} {}
  std::string name() const override { return "cachegen"; }
  std::string params() const override { return label_; }
  int tables(int layers, int channels) const override { return 2 * layers * channels; }
  double Quantise(KvCache& cache, SymbolSink& sink) const override {
    const int C = cache.kv_dim;
    for (int kv = 0; kv < 2; ++kv) {
      for (int l = 0; l < cache.layers; ++l) {
        const float M = static_cast<float>(bins_[kv][static_cast<size_t>(l)] / 2 - 1);
        for (int t = 0; t < cache.tokens; ++t) {
          float* x = Row(cache, kv, l, t);
          float m = 0;
          for (int c = 0; c < C; ++c) m = std::max(m, std::fabs(x[c]));
          const float step = HalfToFloat(FloatToHalf(m)) / M;
          for (int c = 0; c < C; ++c) {
            const int q = step > 0 ? ClampQ(x[c] / step) : 0;
            sink.Emit((kv * cache.layers + l) * C + c, q);
            x[c] = static_cast<float>(q) * step;
          }
        }
      }
    }
    return 2.0 * 16 * cache.layers * cache.tokens;
  }

 private:
  std::string label_;
  std::vector<int> bins_[2];
};

// ---- KIVI-style asymmetric quantisation ----
class KiviScheme final : public RdScheme {
 public:
  KiviScheme(int bits, int group) : bits_(bits), group_(group) {}
  std::string name() const override { return "kivi"; }
  std::string params() const override { return "bits=" + std::to_string(bits_) + " group=" + std::to_string(group_); }
  int tables(int layers, int channels) const override { return 2 * layers * channels; }
  double Quantise(KvCache& cache, SymbolSink& sink) const override {
    const int C = cache.kv_dim, L = cache.layers, T = cache.tokens;
    const int levels = (1 << bits_) - 1;
    double side = 0;
    auto quant = [&](float& x, float lo, float scale, int table) {
      const int q = scale > 0 ? std::clamp(static_cast<int>(std::nearbyint((x - lo) / scale)), 0, levels) : 0;
      sink.Emit(table, q);
      x = lo + static_cast<float>(q) * scale;
    };
    for (int l = 0; l < L; ++l) {
      // Keys: per channel over a token group.
      for (int t0 = 0; t0 < T; t0 += group_) {
        const int t1 = std::min(T, t0 + group_);
        for (int c = 0; c < C; ++c) {
          float lo = INFINITY, hi = -INFINITY;
          for (int t = t0; t < t1; ++t) lo = std::min(lo, Row(cache, 0, l, t)[c]), hi = std::max(hi, Row(cache, 0, l, t)[c]);
          lo = HalfToFloat(FloatToHalf(lo));
          const float scale = HalfToFloat(FloatToHalf((hi - lo) / static_cast<float>(levels)));
          for (int t = t0; t < t1; ++t) quant(Row(cache, 0, l, t)[c], lo, scale, l * C + c);
          side += 32;
        }
      }
      // Values: per token over channels.
      for (int t = 0; t < T; ++t) {
        float* x = Row(cache, 1, l, t);
        float lo = INFINITY, hi = -INFINITY;
        for (int c = 0; c < C; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]);
        lo = HalfToFloat(FloatToHalf(lo));
        const float scale = HalfToFloat(FloatToHalf((hi - lo) / static_cast<float>(levels)));
        for (int c = 0; c < C; ++c) quant(x[c], lo, scale, (L + l) * C + c);
        side += 32;
      }
    }
    return side;
  }

 private:
  int bits_, group_;
};

// ---- Entropy-coded uniform quantiser with calibrated per-channel steps ----
class ChannelUniformScheme final : public RdScheme {
 public:
  static constexpr int kRoles = 3;  // plain or anchor, delta, recent window
  explicit ChannelUniformScheme(ChannelUniformOptions o) : o_(std::move(o)) {}
  std::string name() const override { return o_.label; }
  std::string params() const override {
    char buf[160];
    std::snprintf(buf, sizeof buf, "ka=%.3g va=%.3g exp=%.2g sink=%d group=%d recent=%d/%.3g%s", o_.key_alpha,
                  o_.value_alpha, o_.channel_exponent, o_.sink_tokens, o_.anchor_group, o_.recent_tokens,
                  o_.recent_factor, o_.layer_factor[0].empty() ? "" : " weighted");
    return buf;
  }
  int tables(int layers, int channels) const override { return 2 * kRoles * layers * channels; }

  Status Calibrate(const KvCache& cal) override {
    const int L = cal.layers, C = cal.kv_dim;
    const int first = std::min(cal.tokens - 1, std::max(o_.sink_tokens, 4));  // sinks would skew the stats
    const double n = cal.tokens - first;
    if (n < 16) return Status::InvalidArgument("calibration needs at least 16 tokens past the sinks");
    for (int kv = 0; kv < 2; ++kv) {
      mean_[kv].assign(static_cast<size_t>(L) * C, 0.0f);
      step_[kv].assign(static_cast<size_t>(L) * C, 0.0f);
      for (int l = 0; l < L; ++l) {
        std::vector<double> s1(C, 0), s2(C, 0), sd(C, 0);
        for (int t = first; t < cal.tokens; ++t) {
          const float* x = Row(cal, kv, l, t);
          for (int c = 0; c < C; ++c) s1[c] += x[c], s2[c] += double{x[c]} * x[c];
        }
        double var_sum = 0;
        for (int c = 0; c < C; ++c) {
          const double mean = s1[c] / n;
          sd[c] = std::sqrt(std::max(1e-12, s2[c] / n - mean * mean));
          var_sum += sd[c] * sd[c];
          mean_[kv][static_cast<size_t>(l) * C + c] = static_cast<float>(mean);
        }
        const double S = std::sqrt(var_sum / C);
        const double alpha = kv == 0 ? o_.key_alpha : o_.value_alpha;
        const double factor = o_.layer_factor[kv].empty() ? 1.0 : o_.layer_factor[kv][static_cast<size_t>(l)];
        for (int c = 0; c < C; ++c) {
          const double base = S * std::pow(sd[c] / S, o_.channel_exponent);
          step_[kv][static_cast<size_t>(l) * C + c] = static_cast<float>(std::max(1e-6, alpha * factor * base));
        }
      }
    }
    return Status::Ok();
  }

  double Quantise(KvCache& cache, SymbolSink& sink) const override {
    const int L = cache.layers, C = cache.kv_dim, T = cache.tokens;
    const int sinks = std::min(o_.sink_tokens, T);
    const int g = std::max(1, o_.anchor_group);
    std::vector<float> anchor(static_cast<size_t>(C));
    for (int kv = 0; kv < 2; ++kv) {
      for (int l = 0; l < L; ++l) {
        const float* mean = mean_[kv].data() + static_cast<size_t>(l) * C;
        const float* step = step_[kv].data() + static_cast<size_t>(l) * C;
        const int base_table = ((kv * L) + l) * C * kRoles;
        for (int t = 0; t < T; ++t) {
          float* x = Row(cache, kv, l, t);
          if (t < sinks) {
            for (int c = 0; c < C; ++c) x[c] = HalfToFloat(FloatToHalf(x[c]));
            continue;
          }
          const bool recent = t >= T - o_.recent_tokens;
          const bool is_anchor = recent || g == 1 || (t - sinks) % g == 0;
          const int role = recent ? 2 : (is_anchor ? 0 : 1);
          const float factor = recent ? static_cast<float>(o_.recent_factor) : 1.0f;
          for (int c = 0; c < C; ++c) {
            const float ref = is_anchor ? mean[c] : anchor[c];
            const float st = step[c] * factor;
            // Unclamped in effect (anything past 2^20 steps escapes anyway); bounded so the cast is defined.
            const int q = static_cast<int>(std::clamp(std::nearbyint((x[c] - ref) / st), -1048576.0f, 1048576.0f));
            sink.Emit(base_table + c * kRoles + role, q);
            x[c] = ref + static_cast<float>(q) * st;
            if (is_anchor) anchor[c] = x[c];
          }
        }
      }
    }
    return 2.0 * 16 * L * sinks * C;
  }

 private:
  ChannelUniformOptions o_;
  std::vector<float> mean_[2], step_[2];
};

// ---- Per-layer sensitivity probe ----
class LayerNoiseTransform final : public KvTransform {
 public:
  LayerNoiseTransform(int kv, int layer, double step_rms) : kv_(kv), layer_(layer), step_rms_(step_rms) {}
  std::string name() const override { return "noise kv=" + std::to_string(kv_) + " layer=" + std::to_string(layer_); }
  Result<double> Apply(KvCache& cache) const override {
    if (layer_ < 0 || layer_ >= cache.layers) return Status::InvalidArgument("noise layer " + std::to_string(layer_));
    // Width relative to S, the RMS over channels of the channel's std (the scheme's base step).
    const int C = cache.kv_dim;
    std::vector<double> s1(C, 0), s2(C, 0);
    for (int t = 0; t < cache.tokens; ++t) {
      const float* x = Row(cache, kv_, layer_, t);
      for (int c = 0; c < C; ++c) s1[c] += x[c], s2[c] += double{x[c]} * x[c];
    }
    double var_sum = 0;
    for (int c = 0; c < C; ++c) {
      const double mean = s1[c] / cache.tokens;
      var_sum += std::max(0.0, s2[c] / cache.tokens - mean * mean);
    }
    const double width = step_rms_ * std::sqrt(var_sum / C);
    std::mt19937_64 rng(1234 + 97 * layer_ + kv_);
    std::uniform_real_distribution<double> u(-0.5 * width, 0.5 * width);
    for (int t = 0; t < cache.tokens; ++t) {
      float* x = Row(cache, kv_, layer_, t);
      for (int c = 0; c < cache.kv_dim; ++c) x[c] += static_cast<float>(u(rng));
    }
    return 32.0;
  }

 private:
  int kv_, layer_;
  double step_rms_;
};

// ---- KVTC-style transform coding ----
// The codec's RoPE (codec/common/key_rotation.h) for positions [0, positions).
codec::RopeTable RopeOf(const KvBasisOptions& o, int positions) {
  return codec::RopeTable(RopeSpec{o.head_dim, o.rope_theta, o.rope_layout}, 0, positions);
}

class TransformCodingScheme final : public RdScheme {
 public:
  TransformCodingScheme(TransformCodingOptions o, const KvBasis& basis) : o_(std::move(o)), b_(basis) {}
  std::string name() const override { return o_.label; }
  std::string params() const override {
    char buf[160];
    std::snprintf(buf, sizeof buf, "ka=%.3g va=%.3g derot=%d pca=%d/%d block=%d sink=%d", o_.key_alpha,
                  o_.value_alpha, b_.options.derotate_keys ? 1 : 0, b_.options.pca[0] ? 1 : 0,
                  b_.options.pca[1] ? 1 : 0, b_.options.block, o_.sink_tokens);
    return buf;
  }
  int tables(int layers, int channels) const override { return 2 * layers * channels; }

  double Quantise(KvCache& cache, SymbolSink& sink) const override {
    const int L = cache.layers, C = cache.kv_dim, T = cache.tokens;
    const int sinks = std::min(o_.sink_tokens, T);
    const codec::RopeTable rope = RopeOf(b_.options, T);
    std::vector<float> y(static_cast<size_t>(C)), z(static_cast<size_t>(C)), p(static_cast<size_t>(C));
    for (int kv = 0; kv < 2; ++kv) {
      const bool derot = kv == 0 && b_.options.derotate_keys;
      for (int l = 0; l < L; ++l) {
        const float* mean = b_.mean[kv].data() + static_cast<size_t>(l) * C;
        const float* basis = b_.basis[kv].data() + static_cast<size_t>(l) * C * C;
        std::vector<float> transposed(static_cast<size_t>(C) * C);
        for (int j = 0; j < C; ++j) {
          for (int c = 0; c < C; ++c) transposed[static_cast<size_t>(c) * C + j] = basis[static_cast<size_t>(j) * C + c];
        }
        const float* basis_t = transposed.data();
        const double* var = b_.variance[kv].data() + static_cast<size_t>(l) * C;
        const float step = static_cast<float>((kv == 0 ? o_.key_alpha : o_.value_alpha) * b_.stored_rms[kv][static_cast<size_t>(l)]);
        const double water = double{step} * step / 12;  // uniform quantiser's distortion
        std::vector<int> kept;
        for (int j = 0; j < C; ++j) if (var[j] > water) kept.push_back(j);
        const int table0 = (kv * L + l) * C;
        for (int t = 0; t < T; ++t) {
          float* x = Row(cache, kv, l, t);
          if (t < sinks) {
            for (int c = 0; c < C; ++c) x[c] = HalfToFloat(FloatToHalf(x[c]));
            continue;
          }
          for (int c = 0; c < C; ++c) y[c] = x[c];
          if (derot) rope.Unrotate(y.data(), t, C);
          for (int c = 0; c < C; ++c) y[c] -= mean[c];
          // Projections on every component at once (B^T's rows are contiguous, so the loop vectorises).
          std::fill(p.begin(), p.end(), 0.0f);
          for (int c = 0; c < C; ++c) {
            const float* col = basis_t + static_cast<size_t>(c) * C;
            const float yc = y[c];
            for (int j = 0; j < C; ++j) p[j] += col[j] * yc;
          }
          std::fill(z.begin(), z.end(), 0.0f);
          for (int j : kept) {
            const float* u = basis + static_cast<size_t>(j) * C;
            const int q = static_cast<int>(std::clamp(std::nearbyint(p[j] / step), -1048576.0f, 1048576.0f));
            sink.Emit(table0 + j, q);
            const float zq = static_cast<float>(q) * step;
            for (int c = 0; c < C; ++c) z[c] += zq * u[c];
          }
          for (int c = 0; c < C; ++c) x[c] = mean[c] + z[c];
          if (derot) rope.Rotate(x, t, C);
        }
      }
    }
    return 2.0 * 16 * L * sinks * C;
  }

 private:
  TransformCodingOptions o_;
  const KvBasis& b_;
};

}  // namespace

Result<RdTables> RdTables::Learn(const RdScheme& scheme, const KvCache& calibration) {
  KvCache copy = calibration;
  CountingSink counter(scheme.tables(calibration.layers, calibration.kv_dim));
  scheme.Quantise(copy, counter);
  RdTables out;
  out.tables_.resize(counter.counts().size());
  for (size_t i = 0; i < out.tables_.size(); ++i) {
    const auto& counts = counter.counts()[i];
    Table& table = out.tables_[i];
    if (counts.empty()) {
      table.lo = 0;
      table.hi = -1;
      table.escape_bits = 16 + 1;
      continue;
    }
    int lo = kRdMaxQ, hi = -kRdMaxQ;
    uint64_t n = 0;
    for (const auto& [q, c] : counts) lo = std::min(lo, q), hi = std::max(hi, q), n += c;
    table.lo = lo - 1;
    table.hi = hi + 1;
    const double a = table.hi - table.lo + 1;
    table.total = static_cast<double>(n) + 0.5 * (a + 1);  // + 1: the escape symbol
    table.bits.resize(static_cast<size_t>(a));
    for (int q = table.lo; q <= table.hi; ++q) {
      auto it = counts.find(q);
      const double c = (it == counts.end() ? 0.0 : static_cast<double>(it->second)) + 0.5;
      table.bits[static_cast<size_t>(q - table.lo)] = -std::log2(c / table.total);
    }
    table.escape_bits = -std::log2(0.5 / table.total) + 16;  // escape, then the value in fp16
  }
  return out;
}

double RdTables::Cost(int table, int q) const {
  const Table& t = tables_[static_cast<size_t>(table)];
  if (q < t.lo || q > t.hi) return t.escape_bits;
  return t.bits[static_cast<size_t>(q - t.lo)];
}

Result<double> RdTransform::Apply(KvCache& cache) const {
  CountingSink counter(scheme_.tables(cache.layers, cache.kv_dim));
  CostingSink coster(tables_, counter);
  const double side = scheme_.Quantise(cache, coster);
  const double values = 2.0 * cache.layers * cache.tokens * cache.kv_dim;
  last_.side_bits_per_value = side / values;
  last_.bits_per_value = (coster.bits() + side) / values;
  last_.self_entropy_per_value = (counter.EntropyBits() + side) / values;
  return last_.bits_per_value;
}

std::unique_ptr<RdScheme> MakeCacheGenScheme(std::string label, std::vector<int> key_bins, std::vector<int> value_bins) {
  return std::make_unique<CacheGenScheme>(std::move(label), std::move(key_bins), std::move(value_bins));
}
std::unique_ptr<RdScheme> MakeKiviScheme(int bits, int group) { return std::make_unique<KiviScheme>(bits, group); }
std::unique_ptr<RdScheme> MakeChannelUniformScheme(const ChannelUniformOptions& options) {
  return std::make_unique<ChannelUniformScheme>(options);
}
std::unique_ptr<RdScheme> MakeTransformCodingScheme(const TransformCodingOptions& options, const KvBasis& basis) {
  return std::make_unique<TransformCodingScheme>(options, basis);
}

Result<KvBasis> LearnKvBasis(const KvCache& cal, const KvBasisOptions& options) {
  const int L = cal.layers, C = cal.kv_dim, first = options.skip_first;
  if (options.head_dim <= 0 || options.head_dim % 2 != 0 || C % options.head_dim != 0) {
    return Status::InvalidArgument("head_dim " + std::to_string(options.head_dim) + " must be even and divide kv_dim " + std::to_string(C));
  }
  if (options.block < 0 || (options.block > 0 && C % options.block != 0)) {
    return Status::InvalidArgument("block " + std::to_string(options.block) + " must be 0 or divide kv_dim " + std::to_string(C));
  }
  if (first < 0) return Status::InvalidArgument("skip_first " + std::to_string(first) + " must be >= 0");
  if (cal.tokens - first < 2 * C) {
    return Status::InvalidArgument("calibration has " + std::to_string(cal.tokens) + " tokens; a basis needs at least " +
                                   std::to_string(first + 2 * C));
  }
  KvBasis b;
  b.options = options;
  b.layers = L;
  b.channels = C;
  const codec::RopeTable rope = RopeOf(options, cal.tokens);
  const double n = cal.tokens - first;
  std::vector<float> y(static_cast<size_t>(C));
  for (int kv = 0; kv < 2; ++kv) {
    const bool derot = kv == 0 && options.derotate_keys;
    b.mean[kv].assign(static_cast<size_t>(L) * C, 0.0f);
    b.basis[kv].assign(static_cast<size_t>(L) * C * C, 0.0f);
    b.variance[kv].assign(static_cast<size_t>(L) * C, 0.0);
    for (int l = 0; l < L; ++l) {
      std::vector<double> s1(C, 0), s1_stored(C, 0), s2_stored(C, 0), cov(static_cast<size_t>(C) * C, 0);
      for (int t = first; t < cal.tokens; ++t) {
        const float* x = Row(cal, kv, l, t);
        for (int c = 0; c < C; ++c) s1_stored[c] += x[c], s2_stored[c] += double{x[c]} * x[c];
        std::copy(x, x + C, y.begin());
        if (derot) rope.Unrotate(y.data(), t, C);
        for (int r = 0; r < C; ++r) {
          s1[r] += y[r];
          for (int c = r; c < C; ++c) cov[static_cast<size_t>(r) * C + c] += double{y[r]} * y[c];
        }
      }
      double var_stored = 0;
      for (int c = 0; c < C; ++c) var_stored += std::max(0.0, s2_stored[c] / n - (s1_stored[c] / n) * (s1_stored[c] / n));
      b.stored_rms[kv].push_back(std::sqrt(var_stored / C));
      for (int r = 0; r < C; ++r) {
        b.mean[kv][static_cast<size_t>(l) * C + r] = static_cast<float>(s1[r] / n);
        for (int c = r; c < C; ++c) {
          const double v = cov[static_cast<size_t>(r) * C + c] / n - (s1[r] / n) * (s1[c] / n);
          // Zero across blocks: Jacobi never rotates a zero pair, so every eigenvector stays in one block.
          const bool same_block = options.block == 0 || r / options.block == c / options.block;
          cov[static_cast<size_t>(r) * C + c] = cov[static_cast<size_t>(c) * C + r] = same_block ? v : 0.0;
        }
      }
      float* basis = b.basis[kv].data() + static_cast<size_t>(l) * C * C;
      double* var = b.variance[kv].data() + static_cast<size_t>(l) * C;
      if (!options.pca[kv]) {
        for (int c = 0; c < C; ++c) basis[static_cast<size_t>(c) * C + c] = 1.0f, var[c] = cov[static_cast<size_t>(c) * C + c];
        continue;
      }
      const codec::Eigen eigen = codec::SymmetricEigen(std::move(cov), C);
      for (int j = 0; j < C; ++j) {
        var[j] = std::max(0.0, eigen.values[static_cast<size_t>(j)]);
        for (int c = 0; c < C; ++c) basis[static_cast<size_t>(j) * C + c] = static_cast<float>(eigen.vectors[static_cast<size_t>(j) * C + c]);
      }
      for (int i = 0; i < C; ++i) {
        for (int j = 0; j < C; ++j) {
          double dot = 0;
          for (int c = 0; c < C; ++c) dot += double{basis[static_cast<size_t>(i) * C + c]} * basis[static_cast<size_t>(j) * C + c];
          b.max_orthogonality_error = std::max(b.max_orthogonality_error, std::fabs(dot - (i == j ? 1.0 : 0.0)));
        }
      }
    }
  }
  return b;
}

std::unique_ptr<KvTransform> MakeLayerNoiseTransform(int kv, int layer, double step_rms) {
  return std::make_unique<LayerNoiseTransform>(kv, layer, step_rms);
}

}  // namespace kvstream::bench
