// SumComponents with AVX-512 (compiled with -mavx512f -mavx512bw): the shared tiles
// (transform_sum_tiles.h) on 512-bit vectors, 32 columns per tile.
#include "codec/common/transform_sum.h"

#if defined(__x86_64__) || defined(_M_X64)
#include "codec/common/transform_sum_avx512_ops.h"
#include "codec/common/transform_sum_tiles.h"

namespace kvstream::codec {

int64_t SumComponentsAvx512(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc) {
  return SumTiledColumns<Avx512Ops>(q, rows, kept, basis, cols, acc);
}

}  // namespace kvstream::codec

#endif
