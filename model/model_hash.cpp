// ModelHash: FNV-1a over the architecture fields that make two models' KV caches interchangeable.
#include <cstring>

#include "kvstream/model.h"

namespace kvstream {

uint64_t ModelHash(const ModelConfig& config) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(static_cast<uint64_t>(config.n_layers));
  mix(static_cast<uint64_t>(config.n_kv_heads));
  mix(static_cast<uint64_t>(config.head_dim));
  mix(static_cast<uint64_t>(config.dim));
  mix(static_cast<uint64_t>(config.vocab_size));
  uint32_t theta;
  static_assert(sizeof theta == sizeof config.rope_theta);
  std::memcpy(&theta, &config.rope_theta, sizeof theta);
  mix(theta);
  mix(static_cast<uint64_t>(config.rope_layout));
  return h == 0 ? 1 : h;  // 0 means "any model" in a handshake
}

}  // namespace kvstream
