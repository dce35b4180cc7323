// The built-in KV transforms: fp16 round trip (the uncompressed baseline) and per-token int8.
#include "common/half.h"
#include "common/int8_row.h"
#include "kvstream/quality.h"

namespace kvstream {
namespace {

// Calls fn(row pointer) for every (layer, token) row of K and V.
template <typename Fn>
void ForEachRow(KvCache& c, Fn fn) {
  for (std::vector<float>* buf : {&c.k, &c.v}) {
    for (int l = 0; l < c.layers; ++l) {
      for (int t = 0; t < c.tokens; ++t) fn(buf->data() + (static_cast<size_t>(l) * c.capacity + t) * c.kv_dim);
    }
  }
}

Status CheckCache(const KvCache& c) {
  const size_t need = static_cast<size_t>(c.layers) * c.capacity * c.kv_dim;
  if (c.layers < 0 || c.kv_dim < 1 || c.tokens < 0 || c.tokens > c.capacity || c.k.size() != need || c.v.size() != need) {
    return Status::InvalidArgument("KV cache buffers do not match layers x capacity x kv_dim");
  }
  return Status::Ok();
}

class Fp16Transform final : public KvTransform {
 public:
  std::string name() const override { return "fp16"; }
  Result<double> Apply(KvCache& cache) const override {
    KVSTREAM_RETURN_IF_ERROR(CheckCache(cache));
    const int n = cache.kv_dim;
    ForEachRow(cache, [n](float* row) {
      for (int i = 0; i < n; ++i) row[i] = HalfToFloat(FloatToHalf(row[i]));
    });
    return 16.0;
  }
};

// One symmetric scale per (layer, token) row of K and of V: scale = max|x| / 127, stored as fp16.
class Int8Transform final : public KvTransform {
 public:
  std::string name() const override { return "int8"; }
  Result<double> Apply(KvCache& cache) const override {
    KVSTREAM_RETURN_IF_ERROR(CheckCache(cache));
    const int n = cache.kv_dim;
    ForEachRow(cache, [n](float* row) {
      const uint16_t scale = Int8RowScale(row, n);
      const float inverse_scale = Int8InverseScale(scale);
      for (int i = 0; i < n; ++i) row[i] = DequantizeInt8(QuantizeInt8(row[i], inverse_scale), scale);
    });
    return 8.0 + 16.0 / n;
  }
};

}  // namespace

std::unique_ptr<KvTransform> MakeFp16Transform() { return std::make_unique<Fp16Transform>(); }
std::unique_ptr<KvTransform> MakeInt8Transform() { return std::make_unique<Int8Transform>(); }

}  // namespace kvstream
