// The transform scheme's forward projection, shared by the encoder and the profile builder.
#pragma once

#include <cstdint>

namespace kvstream::codec {

// out[t][j] = (sum over c of centred[t][c] * u[j][c]) / step for rows t < rows and components j < kept,
// with u = basis * 2^-kBasisScaleBits (the profile's int16 rows): the weights of rows already de-rotated
// (keys) and centred. basis is [>= kept][channels].
void ProjectRows(const float* centred, int64_t rows, int64_t channels, const int16_t* basis, int64_t kept, float inv_step,
                 float* out);

}  // namespace kvstream::codec
