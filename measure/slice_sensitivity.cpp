// Per-slice sensitivity of a decoded KV cache (see the header).
#include "measure/slice_sensitivity.h"

#include <algorithm>

#include "measure/codec_quality.h"

namespace kvstream {
namespace {

// `original` with one (layer, K/V) slice replaced by `decoded`'s.
KvCache OneSliceDecoded(const KvCache& original, const KvCache& decoded, int layer, int kv) {
  KvCache cache = original;
  std::vector<float>& to = kv == 0 ? cache.k : cache.v;
  const std::vector<float>& from = kv == 0 ? decoded.k : decoded.v;
  const size_t row = static_cast<size_t>(cache.kv_dim);
  const auto first = static_cast<long>(static_cast<size_t>(layer) * static_cast<size_t>(cache.capacity) * row);
  std::copy_n(from.begin() + first, static_cast<size_t>(cache.tokens) * row, to.begin() + first);
  return cache;
}

}  // namespace

Result<std::vector<double>> MeasureSliceSensitivity(const QualityMeter& meter,
                                                    const std::shared_ptr<const Profile>& profile, QuantScheme scheme,
                                                    Level level, FineRowsOption fine, int chunk_tokens) {
  const std::unique_ptr<KvCodec> codec = MakeKvstreamLevelCodec(profile, level, scheme, fine);
  const KvCache& original = meter.context_cache();
  KvCache decoded = original;
  KVSTREAM_RETURN_IF_ERROR(ApplyCodec(*codec, chunk_tokens, decoded).status());
  std::vector<double> kl(static_cast<size_t>(decoded.layers) * 2);
  for (int l = 0; l < decoded.layers; ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r,
                                meter.Measure("one-slice", OneSliceDecoded(original, decoded, l, kv), 16.0));
      kl[static_cast<size_t>(l) * 2 + static_cast<size_t>(kv)] = std::max(0.0, r.kl_mean);
    }
  }
  return kl;
}

}  // namespace kvstream
