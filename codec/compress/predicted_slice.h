// The predicted scheme's encoder step for one slice (docs/codec.md, "Predicted"), shared by the
// chunk encoder and the profile builder, which learns the tables from what it produces.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/common/predicted_rows.h"
#include "codec/common/profile_data.h"
#include "codec/common/rans.h"
#include "codec/compress/coded_symbols.h"

namespace kvstream::codec {

// How rows are coded: their level's kept components, step and tables (the tables' uncodable symbols
// escape; null while tables are being learned, when only weights beyond +-kMaxAbsQ escape).
struct RowCoding {
  int64_t kept = 0;
  float step = 0.0f;
  const std::vector<const RansModel*>* models = nullptr;
};

// Codes rows of one slice against their prediction and reconstructs them exactly as a decoder will, since
// the next slices predict from that reconstruction. Reusable across slices and blocks of rows.
class PredictedSliceCoder {
 public:
  explicit PredictedSliceCoder(const ProfileData& d) : d_(d), rows_(d) {}

  // targets: rows x channels, the slice's rows (keys de-rotated); overwritten with their residuals.
  // inputs: the input slices' integer rows (PredictedRows::Predict). Rows r with fine[r] set (fine may be
  // null: none) are coded with fine_coding into *fine_out, the others with `coding` into *out (symbols in
  // row order, then escapes). Writes the rows as later slices' integer inputs into z (rows x
  // WeightStride(channels)).
  void Code(int slice, float* targets, const int16_t* const* inputs, int64_t rows, const RowCoding& coding, Symbols* out,
            int16_t* z, const uint8_t* fine = nullptr, const RowCoding* fine_coding = nullptr, Symbols* fine_out = nullptr);

 private:
  const ProfileData& d_;
  PredictedRows rows_;
  std::vector<float> gathered_, weights_, reconstructed_, scales_;
  // Per class of rows (the level's, the fine ones): their rows and integer weights.
  std::vector<int64_t> index_[2];
  std::vector<int16_t> q_[2];
  std::vector<EscapedComponent> escapes_;
};

}  // namespace kvstream::codec
