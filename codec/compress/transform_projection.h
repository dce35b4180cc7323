// The transform scheme's forward projection, shared by the encoder and the profile builder.
#pragma once

#include <cstdint>

namespace kvstream::codec {

// out[t][j] = (sum over c of centred[t][c] * basis[j][c]) * inv_step for rows t < rows and components
// j < kept: the weights of rows already de-rotated (keys) and centred. basis is [>= kept][channels].
void ProjectRows(const float* centred, int64_t rows, int64_t channels, const float* basis, int64_t kept, float inv_step,
                 float* out);

}  // namespace kvstream::codec
