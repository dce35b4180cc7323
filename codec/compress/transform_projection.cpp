#include "codec/compress/transform_projection.h"

#include <cstddef>
#include <vector>

#include "codec/common/matrix_rows.h"

namespace kvstream::codec {

void ProjectRows(const float* centred, int64_t rows, int64_t channels, const float* basis, int64_t kept, float inv_step,
                 float* out) {
  // The kept basis transposed ([channel][component]) with 1 / step folded in, so that one row-times-matrix
  // product gives the weights.
  std::vector<float> projection(static_cast<size_t>(channels * kept));
  for (int64_t j = 0; j < kept; ++j) {
    for (int64_t c = 0; c < channels; ++c) projection[c * kept + j] = basis[j * channels + c] * inv_step;
  }
  MultiplyRows(centred, rows, channels, projection.data(), kept, out);
}

}  // namespace kvstream::codec
