// ProfileBuilder: learns channel means, per-level steps and the per-level table banks from sample KV.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
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
    codec::ClusterOptions co;
    co.max_tables = options_.max_tables;
    co.smooth = true;
    KVSTREAM_ASSIGN_OR_RETURN(codec::Clustering clustering, codec::ClusterHistograms(hist, co));
    level.bank = std::move(clustering.bank);
    d->levels.push_back(std::move(level));
  }
  d->Finalize();
  return Profile(std::move(d));
}

}  // namespace kvstream
