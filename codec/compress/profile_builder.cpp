// ProfileBuilder: learns channel means, per-level steps and the per-level table banks from sample KV.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <thread>

#include "codec/common/profile_data.h"
#include "codec/common/key_rotation.h"
#include "codec/common/parallel.h"
#include "codec/common/quantizer.h"
#include "codec/common/transform_sum.h"
#include "codec/compress/matrix_rows.h"
#include "codec/compress/predicted_slice.h"
#include "codec/compress/ridge_regression.h"
#include "codec/compress/symmetric_eigen.h"
#include "codec/compress/transform_projection.h"
#include "codec/compress/table_clustering.h"
#include "kvstream/profile.h"

namespace kvstream {
namespace {

Status CheckLadder(const std::vector<LevelSpec>& ladder, int layers) {
  if (ladder.empty() || ladder.size() > static_cast<size_t>(kMaxLossyLevel)) {
    return Status::InvalidArgument("profile: ladder has " + std::to_string(ladder.size()) + " levels, expected 1.." +
                                   std::to_string(kMaxLossyLevel));
  }
  for (size_t i = 0; i < ladder.size(); ++i) {
    const LevelSpec& s = ladder[i];
    const std::string where = "profile: ladder level " + std::to_string(i + 1);
    if (s.level != static_cast<Level>(i + 1)) return Status::InvalidArgument(where + " is numbered " + std::to_string(s.level));
    for (int kv = 0; kv < 2; ++kv) {
      if (!(s.step_multiplier[kv] > 0.0f) || !std::isfinite(s.step_multiplier[kv])) {
        return Status::InvalidArgument(where + ": step multiplier must be finite and positive");
      }
    }
  }
  return Status::Ok();
}

// The shared bank of a level's histograms: smoothed, so that every symbol of a calibrated range codes.
Result<codec::TableBank> ProfileBank(const std::vector<codec::Histogram>& hist, int max_tables) {
  codec::ClusterOptions co;
  co.max_tables = max_tables;
  co.smooth = true;
  KVSTREAM_ASSIGN_OR_RETURN(codec::Clustering clustering, codec::ClusterHistograms(hist, co));
  return std::move(clustering.bank);
}

Status CheckRope(const RopeSpec& rope, int channels) {
  if (rope.head_dim < 2 || rope.head_dim % 2 != 0 || channels % rope.head_dim != 0) {
    return Status::InvalidArgument("profile: rope head_dim = " + std::to_string(rope.head_dim) + " must be even and divide " +
                                   std::to_string(channels) + " channels");
  }
  if (!(rope.theta > 0.0f) || !std::isfinite(rope.theta)) {
    return Status::InvalidArgument("profile: rope theta must be finite and positive");
  }
  if (rope.layout != RopeLayout::kInterleaved && rope.layout != RopeLayout::kRotateHalf) {
    return Status::InvalidArgument("profile: unknown rope layout");
  }
  return Status::Ok();
}

// The unit eigenvectors as the profile stores a basis: round(u * 2^kBasisScaleBits), row j = component j.
void QuantiseBasis(const codec::Eigen& eigen, int16_t* basis) {
  constexpr double kScale = 1 << codec::kBasisScaleBits;
  for (size_t i = 0; i < eigen.vectors.size(); ++i) {
    basis[i] = static_cast<int16_t>(std::clamp(std::lround(eigen.vectors[i] * kScale), -(1L << codec::kBasisScaleBits),
                                               1L << codec::kBasisScaleBits));
  }
}

// The components of a level above its noise floor (reverse water-filling): variance > step^2 / 12.
uint32_t KeptComponents(const std::vector<double>& variances, float step) {
  uint32_t kept = 0;
  while (kept < variances.size() && variances[kept] > static_cast<double>(step) * step / 12.0) ++kept;
  return kept;
}

// The histograms a level's tables are learned from: those of the kept components' symbols; the others
// are never coded and get a token weight, so that they do not pull the clustering.
void CountComponents(const codec::Symbols& symbols, size_t kept, size_t components, codec::Histogram* hist) {
  for (size_t j = kept; j < components; ++j) hist[j][codec::kSymbolZero] = 1;
  for (size_t i = 0; i < symbols.symbols.size(); ++i) ++hist[i % kept][symbols.symbols[i]];
}

// The bound of ProfileOptions::byte_predictors' weights and inputs.
constexpr int kPredictorByteLimit = 127;

// The predictor's input scale of each of a slice's channels (rows: n x c_n): the power of two that maps
// the largest |value| to at most 3/4 of `limit` (kMaxPredictorInput, or kPredictorByteLimit), leaving room
// for contexts beyond the samples (with byte predictors their larger values still code, up to
// kMaxPredictorInput, in the kernels' slower split path).
void InputScales(const float* rows, int64_t n, size_t c_n, int limit, float* scale) {
  for (size_t c = 0; c < c_n; ++c) {
    float largest = 0;
    for (int64_t r = 0; r < n; ++r) largest = std::max(largest, std::fabs(rows[static_cast<size_t>(r) * c_n + c]));
    const int exponent = largest > 0 ? static_cast<int>(std::ceil(std::log2(largest / (0.75 * limit)))) : 0;
    scale[c] = std::ldexp(1.0f, -std::clamp(exponent, -59, 60));
  }
}

// One predictor block as the profile stores it: the fitted weights w (c_n x c_n, on the input's rows in
// their own units) turned into weights on its integers z (w / inv_grid), each output column on an integer
// grid of its own (its largest |weight| at max_weight) with that grid's scale.
void QuantiseBlock(const double* w, const float* input_scale, size_t c_n, int max_weight, int16_t* weights, float* scales) {
  const auto on_z = [&](size_t i, size_t c) { return w[i * c_n + c] / input_scale[i]; };
  for (size_t c = 0; c < c_n; ++c) {
    double largest = 0;
    for (size_t i = 0; i < c_n; ++i) largest = std::max(largest, std::fabs(on_z(i, c)));
    scales[c] = static_cast<float>(largest / max_weight);
    if (!(scales[c] > 0.0f)) continue;  // no weight (or one below float's range): the column adds 0
    for (size_t i = 0; i < c_n; ++i) {
      weights[i * c_n + c] = static_cast<int16_t>(std::clamp<long>(std::lround(on_z(i, c) / scales[c]), -max_weight, max_weight));
    }
  }
}

// out = a^T b for a [rows][n], b [rows][m] (row-major), in double from float products.
std::vector<double> CrossProducts(const std::vector<float>& a, int64_t rows, int64_t n, const float* b, int64_t m) {
  std::vector<float> at(static_cast<size_t>(n * rows));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) at[static_cast<size_t>(i * rows + r)] = a[static_cast<size_t>(r * n + i)];
  std::vector<float> product(static_cast<size_t>(n * m));
  codec::MultiplyRows(at.data(), n, rows, b, m, product.data());
  return std::vector<double>(product.begin(), product.end());
}

}  // namespace

std::vector<float> SliceStepScales(const std::vector<double>& sensitivity) {
  double mean = 0;
  for (double s : sensitivity) mean += s / static_cast<double>(sensitivity.size());
  std::vector<float> scales(sensitivity.size(), 1.0f);
  if (!(mean > 0.0)) return scales;
  for (size_t i = 0; i < sensitivity.size(); ++i) {
    const double g = sensitivity[i] > 0.0 ? std::sqrt(mean / sensitivity[i]) : kMaxSliceStepScale;
    scales[i] = static_cast<float>(std::clamp(g, double{kMinSliceStepScale}, double{kMaxSliceStepScale}));
  }
  return scales;
}

Status ProfileBuilder::AddSample(const TensorView& keys, const TensorView& values) {
  KVSTREAM_RETURN_IF_ERROR(ValidateView(keys, "profile sample keys"));
  KVSTREAM_RETURN_IF_ERROR(ValidateView(values, "profile sample values"));
  for (int i = 0; i < 3; ++i) {
    if (keys.shape[i] != values.shape[i] || keys.shape[i] < 1) {
      return Status::InvalidArgument("profile sample: keys and values must have equal, non-empty shapes");
    }
  }
  if (layers_ == 0) {
    if (keys.layers() > 1024 || keys.channels() > 65536) {
      return Status::InvalidArgument("profile sample: " + std::to_string(keys.layers()) + " layers x " +
                                     std::to_string(keys.channels()) + " channels exceeds 1024 x 65536");
    }
    layers_ = keys.layers();
    channels_ = keys.channels();
  } else if (keys.layers() != layers_ || keys.channels() != channels_) {
    return Status::InvalidArgument("profile sample: " + std::to_string(keys.layers()) + " x " + std::to_string(keys.channels()) +
                                   " differs from the first sample's " + std::to_string(layers_) + " x " + std::to_string(channels_));
  }
  const TensorView* views[2] = {&keys, &values};
  for (int kv = 0; kv < 2; ++kv) {
    std::vector<float> copy(static_cast<size_t>(keys.numel()));
    size_t i = 0;
    for (int64_t l = 0; l < keys.layers(); ++l)
      for (int64_t t = 0; t < keys.tokens(); ++t)
        for (int64_t c = 0; c < keys.channels(); ++c) copy[i++] = LoadAsFloat(*views[kv], l, t, c);
    samples_[kv].push_back(std::move(copy));
  }
  sample_tokens_.push_back(keys.tokens());
  tokens_ += keys.tokens();
  return Status::Ok();
}

Result<Profile> ProfileBuilder::Build() const {
  if (tokens_ == 0) return Status::InvalidArgument("profile: no samples were added");
  if (options_.model.size() > 255) return Status::InvalidArgument("profile: model name longer than 255 bytes");
  if (options_.max_tables < 1 || options_.max_tables > codec::kMaxBankTables) {
    return Status::InvalidArgument("profile: max tables = " + std::to_string(options_.max_tables) + " outside [1, 255]");
  }
  const int layers = static_cast<int>(layers_), channels = static_cast<int>(channels_);
  if (!options_.slice_sensitivity.empty()) {
    if (options_.slice_sensitivity.size() != static_cast<size_t>(layers) * 2) {
      return Status::InvalidArgument("profile: " + std::to_string(options_.slice_sensitivity.size()) +
                                     " slice sensitivities for " + std::to_string(layers) + " layers, expected " +
                                     std::to_string(layers * 2) + " (one per layer and K/V)");
    }
    for (double s : options_.slice_sensitivity) {
      if (!(s >= 0.0) || !std::isfinite(s)) {
        return Status::InvalidArgument("profile: slice sensitivities must be finite and >= 0");
      }
    }
  }
  const std::vector<float> slice_scale = SliceStepScales(options_.slice_sensitivity);
  auto d = std::make_shared<ProfileData>();
  d->model = options_.model;
  d->layers = layers;
  d->channels = channels;
  d->ladder = options_.ladder.empty() ? DefaultLadder(layers) : options_.ladder;
  KVSTREAM_RETURN_IF_ERROR(CheckLadder(d->ladder, layers));
  d->quality.assign(d->ladder.size(), LevelQuality{});
  const size_t n = static_cast<size_t>(layers) * 2 * static_cast<size_t>(channels);

  // Visits every quantised sample value of (layer, kv) as f(channel, x): positions >= 4 (sink rows are
  // stored exact, so they would only widen the statistics and the tables).
  int64_t counted = 0;
  for (int64_t n_s : sample_tokens_) counted += std::max<int64_t>(0, n_s - codec::kSinkPositions);
  if (counted == 0) {
    return Status::InvalidArgument("profile: the samples have no positions past the " +
                                   std::to_string(codec::kSinkPositions) + " sink positions");
  }
  const auto for_each = [&](int l, int kv, auto&& f) {
    for (size_t s = 0; s < sample_tokens_.size(); ++s) {
      const float* base = samples_[kv][s].data() + static_cast<size_t>(l) * sample_tokens_[s] * channels;
      for (int64_t t = codec::kSinkPositions; t < sample_tokens_[s]; ++t)
        for (int c = 0; c < channels; ++c) f(c, base[t * channels + c]);
    }
  };

  // Means and base steps.
  d->means.assign(n, 0.0f);
  std::vector<float> base(n, 1.0f);
  std::vector<float> slice_step_base(static_cast<size_t>(layers) * 2);  // of each (layer, K/V)
  for (int l = 0; l < layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      std::vector<double> sum(channels, 0.0), sq(channels, 0.0);
      for_each(l, kv, [&](int c, float x) {
        if (!std::isfinite(x)) return;
        sum[c] += x;
        sq[c] += static_cast<double>(x) * x;
      });
      std::vector<double> var(channels);
      double var_sum = 0;
      for (int c = 0; c < channels; ++c) {
        const double m = sum[c] / static_cast<double>(counted);
        var[c] = std::max(0.0, sq[c] / static_cast<double>(counted) - m * m);
        var_sum += var[c];
        d->means[d->Index(l, kv, c)] = static_cast<float>(m);
      }
      double rms = std::sqrt(var_sum / channels);
      if (!(rms > 1e-30) || !std::isfinite(rms)) rms = 1.0;
      // The slice's base step: its spread, weighed by how much its errors cost the model.
      const size_t slice = static_cast<size_t>(l) * 2 + static_cast<size_t>(kv);
      const double slice_step = rms * (slice_scale.empty() ? 1.0 : slice_scale[slice]);
      slice_step_base[slice] = static_cast<float>(slice_step);
      for (int c = 0; c < channels; ++c) {
        const double ratio = std::clamp(std::sqrt(var[c]) / rms, 1e-3, 1e3);
        base[d->Index(l, kv, c)] = static_cast<float>(slice_step * std::pow(ratio, static_cast<double>(options_.channel_exponent)));
      }
    }
  }

  // Per level: steps, then histograms of the quantised samples, then the shared bank.
  for (const LevelSpec& spec : d->ladder) {
    ProfileLevelData level;
    level.steps.resize(n);
    std::vector<codec::Histogram> hist(n);
    for (auto& h : hist) h.fill(0);
    for (int l = 0; l < layers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const float m = spec.step_multiplier[kv];
        const size_t first = d->Index(l, kv, 0);
        std::vector<float> inv(channels);
        for (int c = 0; c < channels; ++c) {
          float step = base[first + c] * m;
          if (!std::isfinite(step) || !(step > 0.0f)) step = 1.0f;
          level.steps[first + c] = step;
          inv[c] = 1.0f / step;
        }
        for_each(l, kv, [&](int c, float x) { ++hist[first + c][codec::QuantizeToSymbol(x, d->means[first + c], inv[c])]; });
      }
    }
    KVSTREAM_ASSIGN_OR_RETURN(level.bank, ProfileBank(hist, options_.max_tables));
    d->levels.push_back(std::move(level));
  }
  if (options_.predict && !options_.transform) {
    return Status::InvalidArgument("profile: the predicted scheme needs the transform (ProfileOptions::transform)");
  }
  if (options_.transform) KVSTREAM_RETURN_IF_ERROR(BuildTransform(slice_step_base, d.get()));
  if (options_.predict) KVSTREAM_RETURN_IF_ERROR(BuildPrediction(d.get()));
  d->Finalize();
  d->PrepareKernels();
  return Profile(std::move(d));
}

// The transform scheme (docs/codec.md, "Transform scheme"), per (layer, K/V): rows y (keys with RoPE
// undone at their position), mean m, covariance eigenvectors u_j by falling variance lambda_j; per level,
// step = multiplier x the slice's base step (S, the RMS of the channel stds, times the slice's weight: the
// channel-uniform scheme's step unit, so that a level means the same step in both schemes), components
// with lambda_j > step^2 / 12 kept (reverse water-filling: the others carry less than the quantiser's own
// noise), tables from the histograms of round(u_j . (y - m) / step).
Status ProfileBuilder::BuildTransform(const std::vector<float>& slice_step_base, ProfileData* d) const {
  const int layers = d->layers, channels = d->channels;
  const size_t c_n = static_cast<size_t>(channels);
  KVSTREAM_RETURN_IF_ERROR(CheckRope(options_.rope, channels));
  if (channels > codec::kMaxTransformChannels) {
    return Status::InvalidArgument("profile: the transform takes at most " + std::to_string(codec::kMaxTransformChannels) +
                                   " channels (its integer sums would overflow), the samples have " + std::to_string(channels));
  }
  ProfileTransform& tr = d->transform;
  tr.rope = options_.rope;
  tr.means.assign(d->means.size(), 0.0f);
  tr.bases.assign(d->means.size() * c_n, 0);
  tr.levels.resize(d->ladder.size());
  tr.quality.assign(d->ladder.size(), LevelQuality{});
  for (ProfileTransformLevel& level : tr.levels) {
    level.steps.resize(static_cast<size_t>(layers) * 2);
    level.kept.resize(static_cast<size_t>(layers) * 2);
  }
  std::vector<std::vector<codec::Histogram>> hist(d->ladder.size(), std::vector<codec::Histogram>(d->means.size()));
  std::vector<codec::RopeTable> rope;
  for (int64_t n_s : sample_tokens_) rope.emplace_back(options_.rope, 0, n_s);
  // Slices are independent (each writes only its own entries), so they are learned in parallel.
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  KVSTREAM_RETURN_IF_ERROR(codec::RunParallel(static_cast<size_t>(layers) * 2, threads, nullptr, [&](size_t slice_index) -> Status {
    const int l = static_cast<int>(slice_index / 2), kv = static_cast<int>(slice_index % 2);
    // The rows, de-rotated for keys: [sample rows past the sinks][channels].
    std::vector<float> rows;
    for (size_t s = 0; s < sample_tokens_.size(); ++s) {
      const float* x = samples_[kv][s].data() + static_cast<size_t>(l) * sample_tokens_[s] * c_n;
      for (int64_t t = codec::kSinkPositions; t < sample_tokens_[s]; ++t) {
        const size_t at = rows.size();
        rows.insert(rows.end(), x + t * channels, x + (t + 1) * channels);
        for (size_t c = at; c < rows.size(); ++c) {
          if (!std::isfinite(rows[c])) rows[c] = 0.0f;
        }
        if (kv == 0) rope[s].Unrotate(rows.data() + at, t, channels);
      }
    }
    const size_t n = rows.size() / c_n;
    std::vector<double> mean(c_n, 0.0), cov(c_n * c_n, 0.0);
    for (size_t t = 0; t < n; ++t) {
      for (size_t c = 0; c < c_n; ++c) mean[c] += rows[t * c_n + c];
    }
    for (double& m : mean) m /= static_cast<double>(n);
    std::vector<double> centred(c_n);
    for (size_t t = 0; t < n; ++t) {
      for (size_t c = 0; c < c_n; ++c) centred[c] = rows[t * c_n + c] - mean[c];
      for (size_t r = 0; r < c_n; ++r) {
        double* row = cov.data() + r * c_n;
        for (size_t c = r; c < c_n; ++c) row[c] += centred[r] * centred[c];
      }
    }
    for (size_t r = 0; r < c_n; ++r) {
      for (size_t c = r; c < c_n; ++c) cov[c * c_n + r] = cov[r * c_n + c] /= static_cast<double>(n);
    }
    const codec::Eigen eigen = codec::SymmetricEigen(std::move(cov), channels);
    const size_t first = d->Index(l, kv, 0);
    int16_t* basis = tr.bases.data() + first * c_n;
    QuantiseBasis(eigen, basis);
    for (size_t c = 0; c < c_n; ++c) tr.means[first + c] = static_cast<float>(mean[c]);
    // Components of every row, with the mean and basis as stored, as the encoder computes them.
    for (size_t t = 0; t < n; ++t) {
      for (size_t c = 0; c < c_n; ++c) rows[t * c_n + c] -= tr.means[first + c];
    }
    std::vector<float> z(n * c_n);
    codec::ProjectRows(rows.data(), static_cast<int64_t>(n), channels, basis, channels, 1.0f, z.data());
    for (size_t i = 0; i < d->ladder.size(); ++i) {
      const LevelSpec& spec = d->ladder[i];
      ProfileTransformLevel& level = tr.levels[i];
      const size_t slice = static_cast<size_t>(l) * 2 + static_cast<size_t>(kv);
      float step = slice_step_base[slice] * spec.step_multiplier[kv];
      if (!std::isfinite(step) || !(step > 0.0f)) step = 1.0f;
      level.steps[slice] = step;
      const uint32_t kept = KeptComponents(eigen.values, step);
      level.kept[slice] = kept;
      const float inv = 1.0f / step;
      for (size_t j = 0; j < c_n; ++j) {
        codec::Histogram& h = hist[i][first + j];
        h.fill(0);
        if (j >= kept) {
          h[codec::kSymbolZero] = 1;  // never coded: a token weight, so that it does not pull the clustering
          continue;
        }
        for (size_t t = 0; t < n; ++t) ++h[codec::QuantizeToSymbol(z[t * c_n + j], 0.0f, inv)];
      }
    }
    return Status::Ok();
  }));
  for (size_t i = 0; i < tr.levels.size(); ++i) {
    KVSTREAM_ASSIGN_OR_RETURN(tr.levels[i].bank, ProfileBank(hist[i], options_.max_tables));
  }
  d->has_transform = true;
  return Status::Ok();
}


// The predicted scheme (docs/codec.md, "Predicted"). Slice by slice in decode order, over the
// samples' positions past the sinks: each channel's integer grid (the power of two that maps the largest
// |value| to at most 3/4 of the inputs' bound); a ridge least-squares fit of the rows on their input
// slices' integer rows as the fit level reconstructs them (closed loop: the fit sees what a decoder
// holds, never the exact rows), quantised per (block, column); the residual's mean folded into the bias;
// the residual's PCA basis; then the rows coded at the fit level, for the next slices' inputs. Then every
// level codes the samples through all slices with those predictors and bases, and learns its tables
// from what it coded.
Status ProfileBuilder::BuildPrediction(ProfileData* d) const {
  const int layers = d->layers, channels = d->channels, slices = 2 * layers;
  const size_t c_n = static_cast<size_t>(channels);
  const int64_t z_stride = codec::WeightStride(channels);
  ProfilePrediction& p = d->prediction;
  int input_slices[3];
  size_t blocks = 0;
  PredictorInputs(slices, input_slices, &blocks);  // the blocks of every slice
  p.input_scales.assign(static_cast<size_t>(slices) * c_n, 1.0f);
  p.bias.assign(static_cast<size_t>(slices) * c_n, 0.0f);
  p.weights.assign(blocks * c_n * c_n, 0);
  p.weight_scales.assign(blocks * c_n, 0.0f);
  p.bases.assign(static_cast<size_t>(slices) * c_n * c_n, 0);
  p.levels.assign(d->ladder.size(), ProfilePredictionLevel{});
  p.quality.assign(d->ladder.size(), LevelQuality{});
  d->has_prediction = true;

  std::vector<codec::RopeTable> rope;
  int64_t n = 0;
  for (int64_t n_s : sample_tokens_) {
    rope.emplace_back(options_.rope, 0, n_s);
    n += std::max<int64_t>(0, n_s - codec::kSinkPositions);
  }
  if (n < 2 * channels) {
    return Status::InvalidArgument("profile: the predicted scheme needs at least " + std::to_string(2 * channels) +
                                   " sample positions past the sinks (several thousand to fit well), the samples have " +
                                   std::to_string(n));
  }
  // The slice's rows as the encoder sees them: de-rotated keys, or values, non-finite values as 0.
  const auto load_rows = [&](int slice, float* out) {
    const int l = slice / 2, kv = slice % 2;
    for (size_t s = 0; s < sample_tokens_.size(); ++s) {
      const float* x = samples_[kv][s].data() + static_cast<size_t>(l) * static_cast<size_t>(sample_tokens_[s]) * c_n;
      for (int64_t t = codec::kSinkPositions; t < sample_tokens_[s]; ++t, out += c_n) {
        for (size_t c = 0; c < c_n; ++c) out[c] = std::isfinite(x[t * channels + c]) ? x[t * channels + c] : 0.0f;
        if (kv == 0) rope[s].Unrotate(out, t, channels);
      }
    }
  };
  const auto step_of = [&](size_t level, int slice) { return d->transform.levels[level].steps[static_cast<size_t>(slice)]; };
  const size_t fit = static_cast<size_t>(std::clamp<Level>(options_.predict_fit_level, 1, static_cast<Level>(d->ladder.size())) - 1);
  const int max_weight = options_.byte_predictors ? kPredictorByteLimit : codec::MaxPredictorWeight(channels);
  const int input_limit = options_.byte_predictors ? kPredictorByteLimit : codec::kMaxPredictorInput;
  std::vector<std::vector<double>> variances(static_cast<size_t>(slices));
  codec::PredictorRing ring(n, channels);
  std::vector<float> rows(static_cast<size_t>(n) * c_n), features;
  codec::PredictedRows predictor(*d);
  codec::PredictedSliceCoder coder(*d);
  codec::Symbols symbols;
  for (int slice = 0; slice < slices; ++slice) {
    load_rows(slice, rows.data());
    InputScales(rows.data(), n, c_n, input_limit, p.input_scales.data() + static_cast<size_t>(slice) * c_n);
    // Least squares of the rows on the inputs, centred (an intercept the ridge does not shrink), with the
    // inputs in the rows' own units z / inv_grid (so the ridge weighs every channel alike).
    size_t first_block = 0;
    const int input_count = PredictorInputs(slice, input_slices, &first_block);
    const int64_t width = int64_t{input_count} * channels;
    const int16_t* inputs[3];
    ring.Inputs(slice, inputs);
    features.resize(static_cast<size_t>(n * width));
    std::vector<double> feature_mean(static_cast<size_t>(width), 0.0), row_mean(c_n, 0.0);
    for (int64_t r = 0; r < n; ++r) {
      float* f = features.data() + r * width;
      for (int b = 0; b < input_count; ++b) {
        const float* scale = p.input_scales.data() + static_cast<size_t>(input_slices[b]) * c_n;
        for (int64_t c = 0; c < channels; ++c) f[b * channels + c] = inputs[b][r * z_stride + c] / scale[c];
      }
      for (int64_t i = 0; i < width; ++i) feature_mean[static_cast<size_t>(i)] += f[i];
      for (size_t c = 0; c < c_n; ++c) row_mean[c] += rows[static_cast<size_t>(r) * c_n + c];
    }
    for (double& m : feature_mean) m /= static_cast<double>(n);
    for (double& m : row_mean) m /= static_cast<double>(n);
    std::vector<float> centred_rows(rows.size());
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < width; ++i) features[static_cast<size_t>(r * width + i)] -= static_cast<float>(feature_mean[static_cast<size_t>(i)]);
      for (size_t c = 0; c < c_n; ++c) {
        const size_t at = static_cast<size_t>(r) * c_n + c;
        centred_rows[at] = rows[at] - static_cast<float>(row_mean[c]);
      }
    }
    std::vector<double> w;  // width x channels, in the rows' units
    if (width > 0 && !codec::SolveRidge(CrossProducts(features, n, width, features.data(), width), static_cast<int>(width),
                                        CrossProducts(features, n, width, centred_rows.data(), channels), channels,
                                        options_.predict_ridge, &w)) {
      return Status::Internal("profile: the predictor of slice " + std::to_string(slice) + " has singular normal equations");
    }
    float* bias = p.bias.data() + static_cast<size_t>(slice) * c_n;
    for (size_t c = 0; c < c_n; ++c) {
      double b0 = row_mean[c];
      for (int64_t i = 0; i < width; ++i) b0 -= w[static_cast<size_t>(i) * c_n + c] * feature_mean[static_cast<size_t>(i)];
      bias[c] = static_cast<float>(b0);
    }
    for (int b = 0; b < input_count; ++b) {
      const size_t block = first_block + static_cast<size_t>(b);
      QuantiseBlock(w.data() + static_cast<size_t>(b) * c_n * c_n, p.input_scales.data() + static_cast<size_t>(input_slices[b]) * c_n,
                    c_n, max_weight, p.weights.data() + block * c_n * c_n, p.weight_scales.data() + block * c_n);
    }
    // What the quantised predictor leaves of the mean goes into the bias, so the residual basis is centred.
    for (int pass = 0; pass < 2; ++pass) {
      predictor.Predict(slice, inputs, n);
      const float* base = predictor.Prediction();
      std::vector<double> mean(c_n, 0.0);
      for (size_t i = 0; i < rows.size(); ++i) mean[i % c_n] += rows[i] - base[i];
      if (pass == 0) {
        for (size_t c = 0; c < c_n; ++c) bias[c] += static_cast<float>(mean[c] / static_cast<double>(n));
        continue;
      }
      std::vector<float> residual(rows.size());
      for (size_t i = 0; i < rows.size(); ++i) residual[i] = rows[i] - base[i];
      std::vector<double> cov = CrossProducts(residual, n, channels, residual.data(), channels);
      for (size_t r = 0; r < c_n; ++r)
        for (size_t c = 0; c < c_n; ++c) cov[r * c_n + c] = cov[r * c_n + c] / n - (mean[r] / n) * (mean[c] / n);
      const codec::Eigen eigen = codec::SymmetricEigen(std::move(cov), channels);
      QuantiseBasis(eigen, p.bases.data() + static_cast<size_t>(slice) * c_n * c_n);
      variances[static_cast<size_t>(slice)] = eigen.values;
    }
    // Coded at the fit level, the rows become the next slices' inputs.
    const float step = step_of(fit, slice);
    coder.Code(slice, rows.data(), inputs, n, {KeptComponents(variances[static_cast<size_t>(slice)], step), step},
               &symbols, ring.Rows(slice));
  }

  // Each level: its kept components, then the samples coded through every slice for its tables.
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::vector<codec::Histogram>> hist(d->ladder.size());
  KVSTREAM_RETURN_IF_ERROR(codec::RunParallel(d->ladder.size(), threads, nullptr, [&](size_t level) -> Status {
    ProfilePredictionLevel& lvl = p.levels[level];
    lvl.kept.resize(static_cast<size_t>(slices));
    hist[level].assign(static_cast<size_t>(slices) * c_n, codec::Histogram{});
    codec::PredictorRing level_ring(n, channels);
    std::vector<float> level_rows(rows.size());
    codec::PredictedSliceCoder level_coder(*d);
    codec::Symbols level_symbols;
    for (int slice = 0; slice < slices; ++slice) {
      const float step = step_of(level, slice);
      const uint32_t kept = KeptComponents(variances[static_cast<size_t>(slice)], step);
      lvl.kept[static_cast<size_t>(slice)] = kept;
      const int16_t* inputs[3];
      level_ring.Inputs(slice, inputs);
      load_rows(slice, level_rows.data());
      level_coder.Code(slice, level_rows.data(), inputs, n, {kept, step}, &level_symbols, level_ring.Rows(slice));
      CountComponents(level_symbols, kept, c_n, hist[level].data() + static_cast<size_t>(slice) * c_n);
    }
    return Status::Ok();
  }));
  for (size_t level = 0; level < p.levels.size(); ++level) {
    KVSTREAM_ASSIGN_OR_RETURN(p.levels[level].bank, ProfileBank(hist[level], options_.max_tables));
  }
  return Status::Ok();
}

}  // namespace kvstream
