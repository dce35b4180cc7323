// The fixed profile the chunk fuzzer decodes profile-referencing chunks with, shared with the seed
// generator so that seeds encoded with it decode in the fuzzer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kvstream/profile.h"

namespace kvstream::fuzz {

// A profile for (layers, channels), learned from a fixed pseudo-random sample; cached per shape. It has
// the transform scheme too when channels is even (RoPE over pairs of channels).
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
  options.transform = channels % 2 == 0;
  options.rope.head_dim = 2;
  ProfileBuilder builder(options);
  auto kv = TensorView::Dense(k.data(), DType::kF32, layers, tokens, channels);
  auto vv = TensorView::Dense(v.data(), DType::kF32, layers, tokens, channels);
  if (!builder.AddSample(kv, vv).ok()) return nullptr;
  auto p = builder.Build();
  if (!p.ok()) return nullptr;
  auto owned = std::make_unique<Profile>(std::move(p).value());
  const Profile* raw = owned.get();
  cache[{layers, channels}] = std::move(owned);
  return raw;
}

}  // namespace kvstream::fuzz
