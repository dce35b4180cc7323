#include "codec/compress/predicted_slice.h"

#include <algorithm>

#include "codec/common/container_format.h"
#include "codec/common/quantizer.h"
#include "codec/common/transform_sum.h"
#include "codec/compress/transform_projection.h"
#include "common/half.h"

namespace kvstream::codec {

void PredictedSliceCoder::Code(int slice, float* targets, const int16_t* const* inputs, int64_t rows,
                               const RowCoding& coding, Symbols* out, int16_t* z, const uint8_t* fine,
                               const RowCoding* fine_coding, Symbols* fine_out) {
  const int64_t n_c = d_.channels;
  rows_.Predict(slice, inputs, rows);
  const float* base = rows_.Prediction();
  for (int64_t i = 0; i < rows * n_c; ++i) targets[i] -= base[i];
  const bool any_fine = fine != nullptr && std::find(fine, fine + rows, 1) != fine + rows;
  scales_.resize(static_cast<size_t>(rows));
  escapes_.clear();
  WeightRows classes[2];
  int class_count = 0;
  for (const bool fine_class : {false, true}) {
    if (fine_class && !any_fine) break;
    const RowCoding& c = fine_class ? *fine_coding : coding;
    Symbols* symbols = fine_class ? fine_out : out;
    std::vector<int64_t>& index = index_[fine_class];
    std::vector<int16_t>& q = q_[fine_class];
    // The class's rows, gathered when the block mixes levels.
    const float* residuals = targets;
    int64_t n = rows;
    if (any_fine) {
      index.clear();
      for (int64_t r = 0; r < rows; ++r) {
        if ((fine[r] != 0) == fine_class) index.push_back(r);
      }
      n = static_cast<int64_t>(index.size());
      gathered_.resize(static_cast<size_t>(n * n_c));
      for (int64_t i = 0; i < n; ++i) std::copy_n(targets + index[i] * n_c, n_c, gathered_.data() + i * n_c);
      residuals = gathered_.data();
    }
    weights_.resize(static_cast<size_t>(n * c.kept));
    ProjectRows(residuals, n, n_c, d_.ResidualBasis(slice), c.kept, 1.0f / c.step, weights_.data());
    symbols->symbols.resize(weights_.size());
    for (size_t i = 0; i < weights_.size(); ++i) symbols->symbols[i] = QuantizeToSymbol(weights_[i], 0.0f, 1.0f);
    if (c.models) {
      EscapeUncodable(*c.models, weights_.data(), symbols);
    } else {
      symbols->escapes.clear();
      for (size_t i = 0; i < weights_.size(); ++i) {
        if (symbols->symbols[i] == kEscapeSymbol) symbols->escapes.push_back(FloatToHalf(weights_[i]));
      }
    }
    // The integer weights and escapes exactly as the decoder reads them back.
    q.resize(static_cast<size_t>(n * WeightStride(c.kept)));
    size_t e = 0;
    const int64_t* rows_of_class = any_fine ? index.data() : nullptr;
    (void)SymbolWeights(symbols->symbols.data(), n, c.kept, rows_of_class, symbols->escapes.size(), q.data(), &escapes_,
                        [&](float* weight) {
                          *weight = HalfToFloat(symbols->escapes[e++]);  // one value per escape symbol, by construction
                          return Status::Ok();
                        });
    classes[class_count++] = WeightRows{q.data(), c.kept, n, rows_of_class};
    const float scale = TransformStepScale(c.step);
    if (any_fine) {
      for (int64_t r : index) scales_[static_cast<size_t>(r)] = scale;
    } else {
      std::fill(scales_.begin(), scales_.end(), scale);
    }
  }
  if (any_fine) SortEscapes(&escapes_);
  reconstructed_.resize(static_cast<size_t>(rows * n_c));
  rows_.Reconstruct(slice, scales_.data(), classes, class_count, 0, rows, escapes_.data(), escapes_.size(),
                    reconstructed_.data(), z);
}

}  // namespace kvstream::codec
