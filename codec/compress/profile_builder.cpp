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
      if (s.fine_layers[kv] < 0 || s.fine_layers[kv] > layers) {
        return Status::InvalidArgument(where + ": fine layers = " + std::to_string(s.fine_layers[kv]) + " outside [0, " +
                                       std::to_string(layers) + "]");
      }
      for (int j = 0; j < 2; ++j) {
        if (s.cachegen_bins[kv][j] < 4 || s.cachegen_bins[kv][j] > 255) {
          return Status::InvalidArgument(where + ": cachegen bins = " + std::to_string(s.cachegen_bins[kv][j]) +
                                         " outside [4, 255]");
        }
      }
    }
    if (!(s.fine_factor > 0.0f) || !std::isfinite(s.fine_factor)) {
      return Status::InvalidArgument(where + ": fine factor must be finite and positive");
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

}  // namespace

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
  std::vector<float> slice_rms(static_cast<size_t>(layers) * 2);  // S of each (layer, K/V)
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
      slice_rms[static_cast<size_t>(l) * 2 + static_cast<size_t>(kv)] = static_cast<float>(rms);
      for (int c = 0; c < channels; ++c) {
        const double ratio = std::clamp(std::sqrt(var[c]) / rms, 1e-3, 1e3);
        base[d->Index(l, kv, c)] = static_cast<float>(rms * std::pow(ratio, static_cast<double>(options_.channel_exponent)));
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
        const float m = spec.step_multiplier[kv] * (l < spec.fine_layers[kv] ? spec.fine_factor : 1.0f);
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
  if (options_.transform) KVSTREAM_RETURN_IF_ERROR(BuildTransform(slice_rms, d.get()));
  d->Finalize();
  return Profile(std::move(d));
}

// The transform scheme (docs/codec.md, "Transform scheme"), per (layer, K/V): rows y (keys with RoPE
// undone at their position), mean m, covariance eigenvectors u_j by falling variance lambda_j; per level,
// step = multiplier x S (the RMS of the channel stds, the channel-uniform scheme's step unit, so that a
// level means the same step in both schemes), components with lambda_j > step^2 / 12 kept (reverse
// water-filling: the others carry less than the quantiser's own noise), tables from the histograms of
// round(u_j . (y - m) / step).
Status ProfileBuilder::BuildTransform(const std::vector<float>& slice_rms, ProfileData* d) const {
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
    constexpr double kScale = 1 << codec::kBasisScaleBits;
    for (size_t i = 0; i < c_n * c_n; ++i) {
      basis[i] = static_cast<int16_t>(std::clamp(std::lround(eigen.vectors[i] * kScale), -(1L << codec::kBasisScaleBits),
                                                 1L << codec::kBasisScaleBits));
    }
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
      float step = slice_rms[slice] * spec.step_multiplier[kv] * (l < spec.fine_layers[kv] ? spec.fine_factor : 1.0f);
      if (!std::isfinite(step) || !(step > 0.0f)) step = 1.0f;
      level.steps[slice] = step;
      uint32_t kept = 0;
      while (kept < c_n && eigen.values[kept] > static_cast<double>(step) * step / 12.0) ++kept;
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

}  // namespace kvstream
