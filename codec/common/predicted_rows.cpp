#include "codec/common/predicted_rows.h"

#include <algorithm>

#include "codec/common/quantizer.h"
#include "codec/common/transform_sum.h"

namespace kvstream::codec {

void AddEscapedComponents(const RowKernels& kernels, const EscapedComponent* escapes, size_t escape_count,
                          float scaled_step, const int16_t* basis, int64_t channels, float* y) {
  for (size_t e = 0; e < escape_count; ++e) {
    kernels.add_escaped(y, escapes[e].weight, scaled_step, basis + escapes[e].component * channels, channels);
  }
}

void DequantTransformRow(const RowKernels& kernels, const int32_t* acc, const float* offset, float scaled_step,
                         const EscapedComponent* escapes, size_t escape_count, const int16_t* basis, int64_t channels,
                         float* y) {
  kernels.dequant(acc, offset, scaled_step, channels, y);
  AddEscapedComponents(kernels, escapes, escape_count, scaled_step, basis, channels, y);
}

void SortEscapes(std::vector<EscapedComponent>* escaped) {
  std::sort(escaped->begin(), escaped->end(), [](const EscapedComponent& a, const EscapedComponent& b) {
    return a.row != b.row ? a.row < b.row : a.component < b.component;
  });
}

void SumWeightRows(const WeightRows* classes, int class_count, int64_t first, int64_t rows, const int16_t* basis,
                   int64_t channels, const PackedMatrix* packed, int32_t* acc, const int32_t** sums) {
  const int64_t end = first + rows;
  int32_t* out = acc;
  for (int k = 0; k < class_count; ++k) {
    const WeightRows& c = classes[k];
    // The class's rows within [first, end): a range of its rows, as both run in ascending order.
    const int64_t lo = c.index ? std::lower_bound(c.index, c.index + c.count, first) - c.index : std::min(first, c.count);
    const int64_t hi = c.index ? std::lower_bound(c.index + lo, c.index + c.count, end) - c.index : std::min(end, c.count);
    if (hi <= lo) continue;
    SumComponents(c.q + lo * WeightStride(c.kept), hi - lo, c.kept, basis, channels, out, packed);
    for (int64_t i = lo; i < hi; ++i, out += channels) sums[(c.index ? c.index[i] : i) - first] = out;
  }
}

void PredictedRows::Predict(int slice, const int16_t* const* inputs, int64_t rows) {
  const int64_t n_c = d_.channels;
  const size_t values = static_cast<size_t>(rows * n_c);
  int input_slices[3];
  size_t first_block = 0;
  blocks_ = PredictorInputs(slice, input_slices, &first_block);
  int32_t* const sums = prediction_sums_.Reserve(static_cast<size_t>(std::max(blocks_, 1)) * values);
  for (int b = 0; b < blocks_; ++b) {
    const size_t block = first_block + static_cast<size_t>(b);
    const int16_t* weights = d_.prediction.weights.data() + block * static_cast<size_t>(n_c * n_c);
    SumComponents(inputs[b], rows, n_c, weights, n_c, sums + b * values, d_.PackedPredictorBlock(block));
    scales_[b] = d_.prediction.weight_scales.data() + block * static_cast<size_t>(n_c);
  }
  bias_ = d_.prediction.bias.data() + static_cast<size_t>(slice) * static_cast<size_t>(n_c);
  rows_ = rows;
}

const int32_t* const* PredictedRows::PredictionSums(int64_t r, const int32_t* sums[3]) const {
  const size_t values = static_cast<size_t>(rows_ * d_.channels);
  for (int b = 0; b < blocks_; ++b) sums[b] = prediction_sums_.data.get() + b * values + r * d_.channels;
  return sums;
}

const float* PredictedRows::Prediction() {
  const int64_t n_c = d_.channels;
  float* const base = base_.Reserve(static_cast<size_t>(rows_ * n_c));
  const RowKernels& kernels = RowKernelsForCpu();
  const int32_t* sums[3];
  for (int64_t r = 0; r < rows_; ++r) {
    kernels.predict(bias_, PredictionSums(r, sums), scales_, blocks_, n_c, base + r * n_c);
  }
  return base;
}

void PredictedRows::Reconstruct(int slice, const float* scaled_steps, const WeightRows* classes, int class_count,
                                int64_t first, int64_t rows, const EscapedComponent* escapes, size_t escape_count, float* y,
                                int16_t* z) {
  const int64_t n_c = d_.channels, z_stride = WeightStride(n_c);
  const int16_t* basis = d_.ResidualBasis(slice);
  int32_t* const acc = acc_.Reserve(static_cast<size_t>(rows * n_c));
  const int32_t** sums = sums_.Reserve(static_cast<size_t>(rows));
  SumWeightRows(classes, class_count, first, rows, basis, n_c, d_.PackedResidualBasis(slice), acc, sums);
  const float* input_scale = d_.prediction.input_scales.data() + static_cast<size_t>(slice) * static_cast<size_t>(n_c);
  const RowKernels& kernels = RowKernelsForCpu();
  const int32_t* prediction[3];
  size_t e = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t first_escape = e;
    while (e < escape_count && escapes[e].row == r) ++e;
    float* out = y + r * n_c;
    int16_t* zr = z + r * z_stride;
    if (z_stride > n_c) zr[n_c] = 0;
    PredictionSums(r, prediction);
    if (e == first_escape) {
      kernels.predicted_row(bias_, prediction, scales_, blocks_, sums[r], scaled_steps[r], input_scale, n_c, out, zr);
      continue;
    }
    // The escaped components go in after the dequantisation and before the row becomes an input.
    kernels.predicted_row(bias_, prediction, scales_, blocks_, sums[r], scaled_steps[r], input_scale, n_c, out, nullptr);
    AddEscapedComponents(kernels, escapes + first_escape, e - first_escape, scaled_steps[r], basis, n_c, out);
    kernels.predictor_input(out, input_scale, n_c, zr);
  }
}

}  // namespace kvstream::codec
