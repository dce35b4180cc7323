#include "codec/compress/transform_projection.h"

#include <cstddef>
#include <vector>

#include "codec/common/quantizer.h"
#include "codec/compress/matrix_rows.h"

namespace kvstream::codec {

void ProjectRows(const float* centred, int64_t rows, int64_t channels, const int16_t* basis, int64_t kept, float inv_step,
                 float* out) {
  // The kept basis transposed ([channel][component]) with its scale and 1 / step folded in, so that one
  // row-times-matrix product gives the weights.
  const float scale = inv_step / static_cast<float>(1 << kBasisScaleBits);
  std::vector<float> projection(static_cast<size_t>(channels * kept));
  for (int64_t j = 0; j < kept; ++j) {
    for (int64_t c = 0; c < channels; ++c) projection[c * kept + j] = static_cast<float>(basis[j * channels + c]) * scale;
  }
  MultiplyRows(centred, rows, channels, projection.data(), kept, out);
}

}  // namespace kvstream::codec
