// Rate-distortion schemes and their calibrated entropy tables (see the header).
#include "lab/rd_schemes.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_map>

#include "codec/common/key_rotation.h"
#include "codec/compress/ridge_regression.h"
#include "codec/compress/symmetric_eigen.h"
#include "common/half.h"

namespace kvstream::lab {
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
class LayerNoiseTransform final : public CacheTransform {
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

// S_l of a (K/V, layer) of the stored (RoPE'd) cache over positions [first, tokens): the RMS over channels
// of the channel stds, the step unit of every scheme here (so that the same alpha means the same step).
double StoredRms(const KvCache& cache, int kv, int l, int first) {
  const int C = cache.kv_dim;
  std::vector<double> s1(static_cast<size_t>(C), 0), s2(static_cast<size_t>(C), 0);
  for (int t = first; t < cache.tokens; ++t) {
    const float* x = Row(cache, kv, l, t);
    for (int c = 0; c < C; ++c) s1[c] += x[c], s2[c] += double{x[c]} * x[c];
  }
  const double n = cache.tokens - first;
  double variance = 0;
  for (int c = 0; c < C; ++c) variance += std::max(0.0, s2[c] / n - (s1[c] / n) * (s1[c] / n));
  return std::sqrt(variance / C);
}

// The mean and covariance of rows of `channels` values, summed in double (the products' upper triangle
// only, while rows are added).
class RowMoments {
 public:
  explicit RowMoments(int channels)
      : c_(channels), sums_(static_cast<size_t>(channels), 0), products_(static_cast<size_t>(channels) * channels, 0) {}
  void Add(const float* y) {
    for (int r = 0; r < c_; ++r) {
      sums_[r] += y[r];
      for (int c = r; c < c_; ++c) products_[static_cast<size_t>(r) * c_ + c] += double{y[r]} * y[c];
    }
    rows_ += 1;
  }
  double Mean(int channel) const { return sums_[static_cast<size_t>(channel)] / rows_; }
  // The covariance, full and symmetric (row-major). block > 0: entries between channels of different
  // blocks of that many channels are 0, so that Jacobi, which never rotates a zero pair, keeps every
  // eigenvector in one block.
  std::vector<double> Covariance(int block = 0) const {
    std::vector<double> cov(products_.size());
    for (int r = 0; r < c_; ++r) {
      for (int c = r; c < c_; ++c) {
        const double v = products_[static_cast<size_t>(r) * c_ + c] / rows_ - Mean(r) * Mean(c);
        const bool same_block = block == 0 || r / block == c / block;
        cov[static_cast<size_t>(r) * c_ + c] = cov[static_cast<size_t>(c) * c_ + r] = same_block ? v : 0.0;
      }
    }
    return cov;
  }

 private:
  int c_;
  double rows_ = 0;
  std::vector<double> sums_, products_;
};

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

// ---- Cross-layer prediction + transform coding ----
// Restricts the predictor w (n x m) to the `rank` output directions that carry most of its fitted values'
// scatter w^T A w (A = F^T F, n x n), the reduced-rank least-squares fit: w <- w V V^T with V the top
// `rank` eigenvectors. A decoder could then apply it as n x rank and rank x m products.
void ReduceRank(const std::vector<double>& a, int n, int m, int rank, std::vector<double>* w) {
  std::vector<double> aw(static_cast<size_t>(n) * m, 0), scatter(static_cast<size_t>(m) * m, 0);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k) {
      const double aik = a[static_cast<size_t>(i) * n + k];
      for (int c = 0; c < m; ++c) aw[static_cast<size_t>(i) * m + c] += aik * (*w)[static_cast<size_t>(k) * m + c];
    }
  for (int i = 0; i < n; ++i)
    for (int r = 0; r < m; ++r) {
      const double wir = (*w)[static_cast<size_t>(i) * m + r];
      for (int c = 0; c < m; ++c) scatter[static_cast<size_t>(r) * m + c] += wir * aw[static_cast<size_t>(i) * m + c];
    }
  const codec::Eigen eigen = codec::SymmetricEigen(std::move(scatter), m);
  std::vector<double> projected(static_cast<size_t>(n) * m, 0), along(static_cast<size_t>(rank));
  for (int i = 0; i < n; ++i) {
    const double* row = w->data() + static_cast<size_t>(i) * m;
    for (int j = 0; j < rank; ++j) {
      const double* v = eigen.vectors.data() + static_cast<size_t>(j) * m;
      double dot = 0;
      for (int c = 0; c < m; ++c) dot += row[c] * v[c];
      along[j] = dot;
    }
    for (int j = 0; j < rank; ++j) {
      const double* v = eigen.vectors.data() + static_cast<size_t>(j) * m;
      for (int c = 0; c < m; ++c) projected[static_cast<size_t>(i) * m + c] += along[j] * v[c];
    }
  }
  *w = std::move(projected);
}

class PredictiveCodingScheme final : public RdScheme {
 public:
  explicit PredictiveCodingScheme(PredictiveCodingOptions o) : o_(std::move(o)) {}
  std::string name() const override { return o_.label; }
  std::string params() const override {
    char buf[160];
    std::snprintf(buf, sizeof buf, "ka=%.3g va=%.3g prev=%d history=%d same=%d vk=%d ridge=%g rank=%d fit=%.3g sink=%d",
                  o_.key_alpha, o_.value_alpha, o_.from_previous_layer ? 1 : 0, o_.history_layers,
                  o_.same_tensor_only ? 1 : 0, o_.values_from_keys ? 1 : 0, o_.ridge, o_.rank, o_.fit_alpha,
                  o_.sink_tokens);
    return buf;
  }
  int tables(int layers, int channels) const override { return 2 * layers * channels; }

  Status Calibrate(const KvCache& cal) override {
    const int L = cal.layers, C = cal.kv_dim, T = cal.tokens, sinks = std::min(o_.sink_tokens, T);
    if (T - sinks < 4 * C) {
      return Status::InvalidArgument("predictive coding: calibration has " + std::to_string(T) + " tokens; needs at least " +
                                     std::to_string(sinks + 4 * C));
    }
    layers_ = L;
    channels_ = C;
    slices_.assign(static_cast<size_t>(2 * L), Slice{});
    const codec::RopeTable rope = RopeOf(o_.rope, T);
    Reconstruction recon = Derotated(cal, rope, sinks);
    std::vector<float> inputs;
    for (int l = 0; l < L; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        Slice& s = slices_[static_cast<size_t>(2 * l + kv)];
        s.inputs = InputCount(l, kv);
        const int n = s.inputs + 1;  // the bias's constant input last
        const double stored_rms = StoredRms(cal, kv, l, sinks);
        const double alpha = kv == 0 ? o_.key_alpha : o_.value_alpha;
        s.step = static_cast<float>((o_.fit_alpha > 0 ? o_.fit_alpha : alpha) * stored_rms);
        // Least squares over the calibration rows, inputs from the closed-loop reconstruction.
        std::vector<double> a(static_cast<size_t>(n) * n, 0), b(static_cast<size_t>(n) * C, 0);
        std::vector<double> f(static_cast<size_t>(n));
        for (int t = sinks; t < T; ++t) {
          Inputs(recon, l, kv, t, &inputs);
          for (int i = 0; i < s.inputs; ++i) f[i] = inputs[i];
          f[s.inputs] = 1;
          const float* y = recon.target[kv].data() + (static_cast<size_t>(l) * T + t) * C;
          for (int i = 0; i < n; ++i) {
            for (int j = i; j < n; ++j) a[static_cast<size_t>(i) * n + j] += f[i] * f[j];
            for (int c = 0; c < C; ++c) b[static_cast<size_t>(i) * C + c] += f[i] * y[c];
          }
        }
        for (int i = 0; i < n; ++i)
          for (int j = 0; j < i; ++j) a[static_cast<size_t>(i) * n + j] = a[static_cast<size_t>(j) * n + i];
        std::vector<double> w;
        if (!codec::SolveRidge(a, n, b, C, o_.ridge, &w)) {
          return Status::Internal("predictive coding: normal equations of layer " + std::to_string(l) + " not positive definite");
        }
        if (o_.rank > 0 && o_.rank < C && s.inputs > 0) ReduceRank(a, n, C, o_.rank, &w);
        s.weights.assign(w.begin(), w.end());
        // PCA of the residual.
        RowMoments moments(C);
        std::vector<float> r(static_cast<size_t>(C));
        for (int t = sinks; t < T; ++t) {
          Residual(s, recon, l, kv, t, &inputs, r.data());
          moments.Add(r.data());
        }
        s.mean.resize(static_cast<size_t>(C));
        for (int i = 0; i < C; ++i) s.mean[i] = static_cast<float>(moments.Mean(i));
        const codec::Eigen eigen = codec::SymmetricEigen(moments.Covariance(), C);
        s.basis.assign(eigen.vectors.begin(), eigen.vectors.end());
        s.variance = eigen.values;
        KeepAbove(s, s.step);
        // Code the calibration rows of this slice, so that the next slices see their reconstruction.
        CodeRows(s, recon, l, kv, sinks, nullptr);
        // Fitted at another step: code at the scheme's own, with the same predictors and bases.
        if (o_.fit_alpha > 0) KeepAbove(s, static_cast<float>(alpha * stored_rms));
      }
    }
    return Status::Ok();
  }

  double Quantise(KvCache& cache, SymbolSink& sink) const override {
    const int L = cache.layers, C = cache.kv_dim, T = cache.tokens, sinks = std::min(o_.sink_tokens, T);
    const codec::RopeTable rope = RopeOf(o_.rope, T);
    Reconstruction recon = Derotated(cache, rope, sinks);
    for (int l = 0; l < L; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        CodeRows(slices_[static_cast<size_t>(2 * l + kv)], recon, l, kv, sinks, &sink);
        for (int t = 0; t < T; ++t) {
          float* x = Row(cache, kv, l, t);
          if (t < sinks) {
            for (int c = 0; c < C; ++c) x[c] = HalfToFloat(FloatToHalf(x[c]));
            continue;
          }
          const float* y = recon.rows[kv].data() + (static_cast<size_t>(l) * T + t) * C;
          std::copy(y, y + C, x);
          if (kv == 0) rope.Rotate(x, t, C);
        }
      }
    }
    return 2.0 * 16 * L * sinks * C;
  }

 private:
  struct Slice {
    int inputs = 0;
    std::vector<float> weights;  // (inputs + 1) x C; the last row is the bias
    std::vector<float> mean;     // of the residual
    std::vector<float> basis;    // C x C, row j = component j (falling variance)
    std::vector<double> variance;  // of each component on the calibration residuals
    std::vector<int> kept;
    float step = 0;
  };
  // Sets the step and the components above its water level step^2 / 12 (reverse water-filling).
  static void KeepAbove(Slice& s, float step) {
    s.step = step;
    s.kept.clear();
    for (size_t j = 0; j < s.variance.size(); ++j) {
      if (s.variance[j] > double{step} * step / 12) s.kept.push_back(static_cast<int>(j));
    }
  }

  // Per K/V, [layers][tokens][channels] in the de-rotated domain: the rows to code (target) and their
  // reconstruction so far (rows; the sink positions are their fp16 values from the start).
  struct Reconstruction {
    int tokens = 0, channels = 0;
    std::vector<float> target[2], rows[2];
  };

  Reconstruction Derotated(const KvCache& cache, const codec::RopeTable& rope, int sinks) const {
    const int L = cache.layers, C = cache.kv_dim, T = cache.tokens;
    Reconstruction r;
    r.tokens = T;
    r.channels = C;
    for (int kv = 0; kv < 2; ++kv) {
      r.target[kv].resize(static_cast<size_t>(L) * T * C);
      r.rows[kv].assign(static_cast<size_t>(L) * T * C, 0.0f);
      for (int l = 0; l < L; ++l) {
        for (int t = 0; t < T; ++t) {
          const float* x = Row(cache, kv, l, t);
          float* y = r.target[kv].data() + (static_cast<size_t>(l) * T + t) * C;
          float* out = r.rows[kv].data() + (static_cast<size_t>(l) * T + t) * C;
          if (t < sinks) {
            for (int c = 0; c < C; ++c) out[c] = HalfToFloat(FloatToHalf(x[c]));
            if (kv == 0) rope.Unrotate(out, t, C);
          }
          std::copy(x, x + C, y);
          if (kv == 0) rope.Unrotate(y, t, C);
        }
      }
    }
    return r;
  }

  int InputCount(int l, int kv) const {
    int n = 0;
    if (o_.from_previous_layer) n += (o_.same_tensor_only ? 1 : 2) * channels_ * std::min(l, o_.history_layers);
    if (o_.values_from_keys && kv == 1) n += channels_;
    return n;
  }

  void Inputs(const Reconstruction& r, int l, int kv, int t, std::vector<float>* out) const {
    const int C = r.channels, T = r.tokens;
    out->clear();
    auto append = [&](int which, int layer) {
      const float* p = r.rows[which].data() + (static_cast<size_t>(layer) * T + t) * C;
      out->insert(out->end(), p, p + C);
    };
    if (o_.from_previous_layer) {
      for (int back = 1; back <= std::min(l, o_.history_layers); ++back) {
        if (o_.same_tensor_only) {
          append(kv, l - back);
        } else {
          append(0, l - back), append(1, l - back);
        }
      }
    }
    if (o_.values_from_keys && kv == 1) append(0, l);
  }

  // r = target - prediction (before the residual mean is removed).
  void Residual(const Slice& s, const Reconstruction& rec, int l, int kv, int t, std::vector<float>* inputs, float* r) const {
    const int C = rec.channels;
    Inputs(rec, l, kv, t, inputs);
    const float* bias = s.weights.data() + static_cast<size_t>(s.inputs) * C;
    const float* y = rec.target[kv].data() + (static_cast<size_t>(l) * rec.tokens + t) * C;
    for (int c = 0; c < C; ++c) r[c] = y[c] - bias[c];
    for (int i = 0; i < s.inputs; ++i) {
      const float fi = (*inputs)[static_cast<size_t>(i)];
      const float* w = s.weights.data() + static_cast<size_t>(i) * C;
      for (int c = 0; c < C; ++c) r[c] -= fi * w[c];
    }
  }

  // Quantises the residual of every coded row of (l, kv) on the kept components and writes the
  // reconstruction (prediction + mean + coded components) into rec.rows.
  void CodeRows(const Slice& s, Reconstruction& rec, int l, int kv, int sinks, SymbolSink* sink) const {
    const int C = rec.channels, T = rec.tokens, L = layers_;
    std::vector<float> inputs, r(static_cast<size_t>(C));
    const int table0 = (kv * L + l) * C;
    for (int t = sinks; t < T; ++t) {
      Residual(s, rec, l, kv, t, &inputs, r.data());
      const float* y = rec.target[kv].data() + (static_cast<size_t>(l) * T + t) * C;
      float* out = rec.rows[kv].data() + (static_cast<size_t>(l) * T + t) * C;
      // out = prediction + mean = y - r + mean, then the coded components.
      for (int c = 0; c < C; ++c) {
        const float centred = r[c] - s.mean[c];
        out[c] = y[c] - centred;
        r[c] = centred;
      }
      for (int j : s.kept) {
        const float* u = s.basis.data() + static_cast<size_t>(j) * C;
        float p = 0;
        for (int c = 0; c < C; ++c) p += u[c] * r[c];
        const int q = static_cast<int>(std::clamp(std::nearbyint(p / s.step), -1048576.0f, 1048576.0f));
        if (sink) sink->Emit(table0 + j, q);
        const float zq = static_cast<float>(q) * s.step;
        for (int c = 0; c < C; ++c) out[c] += zq * u[c];
      }
    }
  }

  PredictiveCodingOptions o_;
  int layers_ = 0, channels_ = 0;
  std::vector<Slice> slices_;  // [layer][K/V]
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

Result<QualityReport> MeasureTransform(const QualityMeter& meter, const CacheTransform& transform) {
  KvCache cache = meter.context_cache();
  Result<double> bits = transform.Apply(cache);
  if (!bits.ok()) return bits.status().WithContext(transform.name());
  return meter.Measure(transform.name(), cache, *bits);
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
std::unique_ptr<RdScheme> MakePredictiveCodingScheme(const PredictiveCodingOptions& options) {
  return std::make_unique<PredictiveCodingScheme>(options);
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
  std::vector<float> y(static_cast<size_t>(C));
  for (int kv = 0; kv < 2; ++kv) {
    const bool derot = kv == 0 && options.derotate_keys;
    b.mean[kv].assign(static_cast<size_t>(L) * C, 0.0f);
    b.basis[kv].assign(static_cast<size_t>(L) * C * C, 0.0f);
    b.variance[kv].assign(static_cast<size_t>(L) * C, 0.0);
    for (int l = 0; l < L; ++l) {
      RowMoments moments(C);
      for (int t = first; t < cal.tokens; ++t) {
        const float* x = Row(cal, kv, l, t);
        std::copy(x, x + C, y.begin());
        if (derot) rope.Unrotate(y.data(), t, C);
        moments.Add(y.data());
      }
      b.stored_rms[kv].push_back(StoredRms(cal, kv, l, first));
      for (int r = 0; r < C; ++r) b.mean[kv][static_cast<size_t>(l) * C + r] = static_cast<float>(moments.Mean(r));
      std::vector<double> cov = moments.Covariance(options.block);
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

std::unique_ptr<CacheTransform> MakeLayerNoiseTransform(int kv, int layer, double step_rms) {
  return std::make_unique<LayerNoiseTransform>(kv, layer, step_rms);
}

}  // namespace kvstream::lab
