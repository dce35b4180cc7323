#include "codec/compress/predicted_slice.h"

#include "codec/common/container_format.h"
#include "codec/common/quantizer.h"
#include "codec/common/transform_sum.h"
#include "codec/compress/transform_projection.h"
#include "common/half.h"

namespace kvstream::codec {

void PredictedSliceCoder::Code(int slice, float* targets, const int16_t* const* inputs, int64_t rows, int64_t kept,
                               float step, const std::vector<const RansModel*>* models, Symbols* out, int16_t* z) {
  const int64_t n_c = d_.channels, stride = WeightStride(kept);
  const float* base = rows_.Predict(slice, inputs, rows);
  for (int64_t i = 0; i < rows * n_c; ++i) targets[i] -= base[i];
  weights_.resize(static_cast<size_t>(rows * kept));
  ProjectRows(targets, rows, n_c, d_.ResidualBasis(slice), kept, 1.0f / step, weights_.data());
  out->symbols.resize(weights_.size());
  for (size_t i = 0; i < weights_.size(); ++i) out->symbols[i] = QuantizeToSymbol(weights_[i], 0.0f, 1.0f);
  if (models) {
    EscapeUncodable(*models, weights_.data(), out);
  } else {
    out->escapes.clear();
    for (size_t i = 0; i < weights_.size(); ++i) {
      if (out->symbols[i] == kEscapeSymbol) out->escapes.push_back(FloatToHalf(weights_[i]));
    }
  }
  // The integer weights and escapes exactly as the decoder reads them back.
  q_.resize(static_cast<size_t>(rows * stride));
  escapes_.clear();
  size_t e = 0;
  (void)SymbolWeights(out->symbols.data(), rows, kept, out->escapes.size(), q_.data(), &escapes_, [&](float* weight) {
    *weight = HalfToFloat(out->escapes[e++]);  // one value per escape symbol, by construction
    return Status::Ok();
  });
  reconstructed_.resize(static_cast<size_t>(rows * n_c));
  rows_.Reconstruct(slice, step, q_.data(), kept, rows, escapes_.data(), escapes_.size(), reconstructed_.data(), z);
}

}  // namespace kvstream::codec
