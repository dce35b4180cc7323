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

// Codes rows of one slice against their prediction and reconstructs them exactly as a decoder will, since
// the next slices predict from that reconstruction. Reusable across slices and blocks of rows.
class PredictedSliceCoder {
 public:
  explicit PredictedSliceCoder(const ProfileData& d) : d_(d), rows_(d) {}

  // targets: rows x channels, the slice's rows (keys de-rotated); overwritten with their residuals.
  // inputs: the input slices' integer rows (PredictedRows::Predict). models: the level's table of each of
  // the `kept` components, whose uncodable symbols escape; null while tables are being learned (then only
  // weights beyond +-kMaxAbsQ escape). Writes the rows' symbols and escapes into *out, and the rows as
  // later slices' integer inputs into z (rows x WeightStride(channels)).
  void Code(int slice, float* targets, const int16_t* const* inputs, int64_t rows, int64_t kept, float step,
            const std::vector<const RansModel*>* models, Symbols* out, int16_t* z);

 private:
  const ProfileData& d_;
  PredictedRows rows_;
  std::vector<float> weights_, reconstructed_;
  std::vector<int16_t> q_;
  std::vector<EscapedComponent> escapes_;
};

}  // namespace kvstream::codec
