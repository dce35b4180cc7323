// The fixed profile the chunk fuzzer decodes profile-referencing chunks with, shared with the seed
// generator so that seeds encoded with it decode in the fuzzer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "codec/common/profile_data.h"
#include "kvstream/profile.h"

namespace kvstream::fuzz {

// The transform and predicted schemes' sections, made up rather than learned: learning them costs
// seconds per shape under the fuzzer's instrumentation (the eigensolver), and the decoder's paths do not
// depend on the values, so any within the format's bounds do. The transform: identity bases, the channel
// means, each level's channel-uniform bank and its first channel's step, every component kept. The
// prediction: the same bases, banks and kept counts, the means as the bias, small pseudo-random weights.
inline void AddMadeUpTransform(ProfileData* d) {
  const size_t c_n = static_cast<size_t>(d->channels), slices = static_cast<size_t>(2 * d->layers);
  ProfileTransform& t = d->transform;
  t.rope = RopeSpec{2, 10000.0f, RopeLayout::kInterleaved};
  t.means = d->means;
  t.bases.assign(slices * c_n * c_n, 0);
  for (size_t s = 0; s < slices; ++s)
    for (size_t j = 0; j < c_n; ++j) t.bases[(s * c_n + j) * c_n + j] = 1 << 14;
  t.levels.clear();
  for (const ProfileLevelData& level : d->levels) {
    ProfileTransformLevel made{{}, std::vector<uint32_t>(slices, static_cast<uint32_t>(c_n)), level.bank};
    for (size_t s = 0; s < slices; ++s) made.steps.push_back(level.steps[s * c_n]);
    t.levels.push_back(std::move(made));
  }
  t.quality.assign(d->levels.size(), LevelQuality{});
  d->has_transform = true;
}

inline void AddMadeUpPrediction(ProfileData* d) {
  const size_t c_n = static_cast<size_t>(d->channels), slices = static_cast<size_t>(2 * d->layers);
  int inputs[3];
  size_t blocks = 0;
  PredictorInputs(static_cast<int>(slices), inputs, &blocks);
  ProfilePrediction& p = d->prediction;
  p.input_scales.assign(slices * c_n, 0.0625f);
  p.bias = d->transform.means;
  p.weights.resize(blocks * c_n * c_n);
  uint32_t x = 777;
  for (int16_t& w : p.weights) {
    x = x * 1664525u + 1013904223u;
    w = static_cast<int16_t>(static_cast<int32_t>(x >> 16) % 64 - 32);
  }
  p.weight_scales.assign(blocks * c_n, 1e-3f);
  p.bases = d->transform.bases;
  p.levels.clear();
  for (const ProfileTransformLevel& t : d->transform.levels) p.levels.push_back({t.kept, t.bank});
  p.quality.assign(d->transform.levels.size(), LevelQuality{});
  d->has_prediction = true;
}

// A profile for (layers, channels), learned from a fixed pseudo-random sample; cached per shape. When
// channels is even (RoPE over pairs of channels) it has made-up transform and predicted sections too.
inline const Profile* ProfileFor(uint32_t layers, uint32_t channels) {
  static std::map<std::pair<uint32_t, uint32_t>, std::unique_ptr<Profile>> cache;
  auto it = cache.find({layers, channels});
  if (it != cache.end()) return it->second.get();
  const int64_t tokens = 16;
  std::vector<float> k(layers * tokens * channels), v(k.size());
  uint32_t x = 12345;
  for (size_t i = 0; i < k.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    k[i] = static_cast<float>(static_cast<int32_t>(x >> 8) % 2000) / 500.0f;
    v[i] = static_cast<float>(static_cast<int32_t>(x >> 12) % 1000) / 700.0f;
  }
  ProfileOptions options;
  options.max_tables = 4;
  ProfileBuilder builder(options);
  auto kv = TensorView::Dense(k.data(), DType::kF32, layers, tokens, channels);
  auto vv = TensorView::Dense(v.data(), DType::kF32, layers, tokens, channels);
  if (!builder.AddSample(kv, vv).ok()) return nullptr;
  auto p = builder.Build();
  if (!p.ok()) return nullptr;
  if (channels % 2 == 0) {
    ProfileData data = DataOf(*p);
    AddMadeUpTransform(&data);
    AddMadeUpPrediction(&data);
    data.Finalize();
    p = Profile::Parse(data.bytes.data(), data.bytes.size());
    if (!p.ok()) return nullptr;
  }
  auto owned = std::make_unique<Profile>(std::move(p).value());
  const Profile* raw = owned.get();
  cache[{layers, channels}] = std::move(owned);
  return raw;
}

}  // namespace kvstream::fuzz
