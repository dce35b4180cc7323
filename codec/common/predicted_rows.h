// The reconstruction of transform-coded rows, written once for the decoder and for the encoder of the
// predicted scheme, which must hold exactly what the decoder will (its next layers predict from it).
// Every step is quantizer.h's per-element arithmetic on exact integer sums (transform_sum.h), so the
// result is the same bit for bit whichever SumComponents kernel runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codec/common/profile_data.h"

namespace kvstream::codec {

// A coded component whose weight did not fit a symbol and travels as fp16 (the segment's escape list).
struct EscapedComponent {
  int64_t row;  // within the rows being reconstructed
  int64_t component;
  float weight;
};

// y_c = offset_c + f32(acc_c) * scaled_step for c < channels, then the row's escaped components (in
// component order) added as quantizer.h's AddEscapedComponent. `escapes` holds those of this row.
void DequantTransformRow(const int32_t* acc, const float* offset, float scaled_step, const EscapedComponent* escapes,
                         size_t escape_count, const int16_t* basis, int64_t channels, float* y);

// Rows of one slice of a predicted chunk (docs/format.md, "Scheme 4"), a block of positions at a time.
// Reusable across slices and blocks; buffers grow to the largest block.
class PredictedRows {
 public:
  explicit PredictedRows(const ProfileData& d) : d_(d) {}

  // The prediction of `rows` rows of `slice` from its input slices' integer rows, inputs[b] for the b-th
  // input slice (PredictorInputs), each rows x WeightStride(channels). Returns rows x channels floats,
  // valid until the next call.
  const float* Predict(int slice, const int16_t* const* inputs, int64_t rows);

  // The reconstruction of the same rows from their integer weights q (rows x WeightStride(kept)) and
  // escapes (sorted by row, then component) on top of the last Predict: y (rows x channels, keys still
  // de-rotated) and the rows as the next slices' integer inputs z (rows x WeightStride(channels)).
  void Reconstruct(int slice, float step, const int16_t* q, int64_t kept, int64_t rows, const EscapedComponent* escapes,
                   size_t escape_count, float* y, int16_t* z);

 private:
  const ProfileData& d_;
  std::vector<int32_t> acc_;
  std::vector<float> base_;
};

}  // namespace kvstream::codec
