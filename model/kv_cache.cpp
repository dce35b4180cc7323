// KvCache allocation and views.
#include "kvstream/model.h"

namespace kvstream {

KvCache KvCache::Allocate(const ModelConfig& config, int capacity) {
  KvCache c;
  c.layers = config.n_layers;
  c.kv_dim = config.kv_dim();
  c.capacity = capacity < 0 ? 0 : capacity;
  c.k.assign(static_cast<size_t>(c.layers) * c.capacity * c.kv_dim, 0.0f);
  c.v.assign(c.k.size(), 0.0f);
  c.attention.assign(static_cast<size_t>(c.capacity), 0.0);
  c.uniform_attention.assign(static_cast<size_t>(c.capacity), 0.0);
  return c;
}

namespace {
TensorView View(const float* data, const KvCache& c) {
  TensorView v = TensorView::Dense(const_cast<float*>(data), DType::kF32, c.layers, c.tokens, c.kv_dim);
  v.strides[0] = static_cast<int64_t>(c.capacity) * c.kv_dim;
  return v;
}
}  // namespace

TensorView KvCache::keys() { return View(k.data(), *this); }
TensorView KvCache::values() { return View(v.data(), *this); }
TensorView KvCache::keys() const { return View(k.data(), *this); }
TensorView KvCache::values() const { return View(v.data(), *this); }

std::vector<float> KvCache::Importance() const {
  std::vector<float> importance(static_cast<size_t>(tokens), 0.0f);
  for (size_t t = 0; t < importance.size() && t < attention.size() && t < uniform_attention.size(); ++t) {
    if (uniform_attention[t] > 0.0) importance[t] = static_cast<float>(attention[t] / uniform_attention[t]);
  }
  return importance;
}

}  // namespace kvstream
