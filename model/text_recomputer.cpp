// MakeTextRecomputer: the reference engine's prefill behind the stream layer's TextRecomputer.
#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/text_recomputer.h"

namespace kvstream {
namespace {

class ModelTextRecomputer final : public TextRecomputer {
 public:
  explicit ModelTextRecomputer(const Model& model) : model_(model) {}

  Status Recompute(const std::vector<int32_t>& token_ids, int64_t begin, const TensorView& keys,
                   const TensorView& values) override {
    const ModelConfig& config = model_.config();
    if (config.n_layers != keys.layers() || config.kv_dim() != keys.channels()) {
      return Status::InvalidArgument("level text: the receiver's model has " + std::to_string(config.n_layers) +
                                     " layers x " + std::to_string(config.kv_dim()) + " channels, the context " +
                                     std::to_string(keys.layers()) + " x " + std::to_string(keys.channels()));
    }
    const int64_t tokens = static_cast<int64_t>(token_ids.size());
    if (begin < 0 || begin + tokens > keys.tokens() || begin + tokens > values.tokens()) {
      return Status::InvalidArgument("level text: positions [" + std::to_string(begin) + ", " +
                                     std::to_string(begin + tokens) + ") do not fit views of " +
                                     std::to_string(keys.tokens()) + " tokens");
    }
    // The earlier positions' KV, as the destination holds it, is what the new tokens attend to.
    KvCache cache = KvCache::Allocate(config, static_cast<int>(begin + tokens));
    const int64_t kv_dim = cache.kv_dim;
    for (int64_t l = 0; l < cache.layers; ++l) {
      for (int64_t t = 0; t < begin; ++t) {
        float* k = cache.k.data() + (l * cache.capacity + t) * kv_dim;
        float* v = cache.v.data() + (l * cache.capacity + t) * kv_dim;
        for (int64_t c = 0; c < kv_dim; ++c) {
          k[c] = LoadAsFloat(keys, l, t, c);
          v[c] = LoadAsFloat(values, l, t, c);
        }
      }
    }
    cache.tokens = static_cast<int>(begin);
    KVSTREAM_RETURN_IF_ERROR(model_.Forward(std::vector<int>(token_ids.begin(), token_ids.end()), cache, nullptr));
    for (int64_t l = 0; l < cache.layers; ++l) {
      for (int64_t t = begin; t < begin + tokens; ++t) {
        const float* k = cache.k.data() + (l * cache.capacity + t) * kv_dim;
        const float* v = cache.v.data() + (l * cache.capacity + t) * kv_dim;
        for (int64_t c = 0; c < kv_dim; ++c) {
          StoreFromFloat(keys, l, t, c, k[c]);
          StoreFromFloat(values, l, t, c, v[c]);
        }
      }
    }
    return Status::Ok();
  }

 private:
  const Model& model_;
};

}  // namespace

std::unique_ptr<TextRecomputer> MakeTextRecomputer(const Model& model) {
  return std::make_unique<ModelTextRecomputer>(model);
}

}  // namespace kvstream
