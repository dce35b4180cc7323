// The reconstruction of transform-coded rows, written once for the decoder and for the encoder of the
// predicted scheme, which must hold exactly what the decoder will (its next layers predict from it).
// Every step is quantizer.h's per-element arithmetic on exact integer sums (transform_sum.h), so the
// result is the same bit for bit whichever SumComponents kernel runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "codec/common/container_format.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "codec/common/row_kernels.h"
#include "codec/common/transform_sum.h"
#include "kvstream/status.h"

namespace kvstream::codec {

// A coded component whose weight did not fit a symbol and travels as fp16 (the segment's escape list).
struct EscapedComponent {
  int64_t row;  // within the rows being reconstructed
  int64_t component;
  float weight;
};

// The integer weights the sums take from coded rows' symbols (rows x kept): row r of `weights`, whose rows
// are WeightStride(kept) wide, gets row r's weights, an escape symbol's weight 0 (its value is added after
// the sums) and a 0 after an odd kept (the pad the kernels read); and the escaped components in symbol
// order, each numbered as row index[r] (r when index is null) of the rows being reconstructed, each weight
// from next_escape(float*) -> Status (a decoder's escape list may run out). Rows are not searched for
// escapes when the stream has none (escape_count 0).
template <typename NextEscape>
Status SymbolWeights(const uint8_t* symbols, int64_t rows, int64_t kept, const int64_t* index, size_t escape_count,
                     int16_t* weights, std::vector<EscapedComponent>* escaped, NextEscape&& next_escape) {
  const int64_t stride = WeightStride(kept);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* sym = symbols + r * kept;
    int16_t* w = weights + r * stride;
    // Branch-free (vectorisable); the escapes are looked for only in rows that have one.
    for (int64_t j = 0; j < kept; ++j) w[j] = static_cast<int16_t>(sym[j] == kEscapeSymbol ? 0 : SymbolToQ(sym[j]));
    if (stride > kept) w[kept] = 0;
    if (escape_count == 0) continue;
    const int64_t row = index ? index[r] : r;
    for (const uint8_t* e = FindEscapeSymbol(sym, sym + kept); e != nullptr; e = FindEscapeSymbol(e + 1, sym + kept)) {
      float weight = 0.0f;
      KVSTREAM_RETURN_IF_ERROR(next_escape(&weight));
      escaped->push_back({row, e - sym, weight});
    }
  }
  return Status::Ok();
}

// The integer weights of coded rows that share a level, and so a depth: row i of q (rows WeightStride(kept)
// wide, as SymbolWeights lays them out) is row index[i] (i when index is null) of the rows being
// reconstructed, index ascending. A chunk's fine rows are a second such class beside its level's rows.
struct WeightRows {
  const int16_t* q = nullptr;
  int64_t kept = 0;
  int64_t count = 0;
  const int64_t* index = nullptr;
};

// The reconstruction's integer sums (SumComponents against `basis`, packed or not) of rows [first, first +
// rows), whose weights come in `classes` that together hold each of those rows once: each class at its own
// depth, so that a block's few fine rows do not widen every row's sums to the fine level's components.
// acc: room for rows x channels sums; sums[r] is set to row first + r's.
void SumWeightRows(const WeightRows* classes, int class_count, int64_t first, int64_t rows, const int16_t* basis,
                   int64_t channels, const PackedMatrix* packed, int32_t* acc, const int32_t** sums);

// Orders escaped components by row, then component: the order the reconstruction reads them in, once
// the escapes of two streams (fine rows) are in one list.
void SortEscapes(std::vector<EscapedComponent>* escaped);

// A row's escaped components (`escapes`, in component order) added to y as quantizer.h's
// AddEscapedComponent. kernels: RowKernelsForCpu(), looked up once per block of rows.
void AddEscapedComponents(const RowKernels& kernels, const EscapedComponent* escapes, size_t escape_count,
                          float scaled_step, const int16_t* basis, int64_t channels, float* y);

// y_c = offset_c + f32(acc_c) * scaled_step for c < channels, then the row's escaped components
// (AddEscapedComponents). `escapes` holds those of this row.
void DequantTransformRow(const RowKernels& kernels, const int32_t* acc, const float* offset, float scaled_step,
                         const EscapedComponent* escapes, size_t escape_count, const int16_t* basis, int64_t channels,
                         float* y);

// Rows of a predicted chunk that one task codes or reconstructs, through every slice. Each task streams
// every slice's predictor weights once (5.5 MB for SmolLM2, more than L2 holds), so taller blocks read
// less; two blocks per 256-token chunk still let two threads share one chunk. Measured on 2 vCPUs: a shaped
// fetch of 2048 tokens took 48-50 ms with 64 rows, 46 with 128, 51-54 with 256; encoding, 10 % faster
// with 128 than 64.
inline constexpr int64_t kPredictedRowBlock = 128;

// The integer rows (PredictorInput) that later slices read, for a block of `rows` positions: the last two
// layers' keys and values, each rows x WeightStride(channels). Slice s = 2 x layer + K/V keeps slot
// (layer mod 2, K/V), which no slice still needs once s is written.
class PredictorRing {
 public:
  // Not zeroed: every slice's rows are written before a later slice reads them.
  PredictorRing(int64_t rows, int64_t channels)
      : rows_(rows), stride_(WeightStride(channels)),
        z_(std::make_unique_for_overwrite<int16_t[]>(static_cast<size_t>(4 * rows * stride_))) {}
  int16_t* Rows(int slice) { return z_.get() + PredictorRingSlot(slice) * rows_ * stride_; }
  // The rows of the slice's input slices, in block order (PredictorInputs); returns their count.
  int Inputs(int slice, const int16_t* inputs[3]) {
    int slices[3];
    const int n = PredictorInputs(slice, slices);
    for (int b = 0; b < n; ++b) inputs[b] = Rows(slices[b]);
    return n;
  }

 private:
  int64_t rows_, stride_;
  std::unique_ptr<int16_t[]> z_;
};

// Rows of one slice of a predicted chunk (docs/format.md, "Scheme 4"), a block of positions at a time.
// Reusable across slices and blocks; buffers grow to the largest block.
class PredictedRows {
 public:
  explicit PredictedRows(const ProfileData& d) : d_(d) {}

  // The prediction of `rows` rows of `slice` from its input slices' integer rows, inputs[b] for the b-th
  // input slice (PredictorInputs), each rows x WeightStride(channels): its integer sums, which Reconstruct
  // finishes row by row.
  void Predict(int slice, const int16_t* const* inputs, int64_t rows);

  // The last Predict's prediction as floats (rows x channels), valid until the next call: what an encoder
  // codes the residual of (a decoder only needs Reconstruct).
  const float* Prediction();

  // The reconstruction of the same rows, rows [first, first + rows) of the weight classes (SumWeightRows),
  // from each row's scaled step (TransformStepScale of its level's step) and escapes (rows numbered from
  // first, sorted by row, then component) on top of the last Predict: y (rows x channels, keys still
  // de-rotated) and the rows as the next slices' integer inputs z (rows x WeightStride(channels)).
  void Reconstruct(int slice, const float* scaled_steps, const WeightRows* classes, int class_count, int64_t first,
                   int64_t rows, const EscapedComponent* escapes, size_t escape_count, float* y, int16_t* z);

 private:
  // Grown, never zeroed (every call writes what it reads): zero fills of a block's buffers were 2 % of a
  // decode.
  template <typename T>
  struct Scratch {
    std::unique_ptr<T[]> data;
    size_t size = 0;
    T* Reserve(size_t n) {
      if (n > size) data = std::make_unique_for_overwrite<T[]>(size = n);
      return data.get();
    }
  };

  // The last Predict's sums of row r, one per predictor block.
  const int32_t* const* PredictionSums(int64_t r, const int32_t* sums[3]) const;

  const ProfileData& d_;
  // The last Predict: its blocks' sums (blocks x rows x channels), scales and the slice's bias.
  Scratch<int32_t> prediction_sums_;
  int blocks_ = 0;
  int64_t rows_ = 0;
  const float* scales_[3] = {};
  const float* bias_ = nullptr;
  Scratch<int32_t> acc_;  // the residual's sums
  Scratch<float> base_;
  Scratch<const int32_t*> sums_;
};

}  // namespace kvstream::codec
