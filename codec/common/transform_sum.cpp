#include "codec/common/transform_sum.h"

#include <algorithm>

#include "codec/common/cpu_features.h"

namespace kvstream::codec {

namespace {

// The columns [first, cols), portable: zero weights (the small components of a row) are skipped.
void SumColumnsPortable(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                        int64_t first) {
  const int64_t stride = WeightStride(kept);
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* out = acc + r * cols;
    std::fill(out + first, out + cols, 0);
    for (int64_t j = 0; j < kept; ++j) {
      const int32_t w = q[r * stride + j];
      if (w == 0) continue;
      const int16_t* row = basis + j * cols;
      for (int64_t c = first; c < cols; ++c) out[c] += w * row[c];
    }
  }
}

}  // namespace

AmxMatrix AmxMatrix::Pack(const int16_t* matrix, int64_t rows, int64_t cols) {
  AmxMatrix m;
  if (!AmxEnabled() || cols % 16 != 0 || rows <= 0) return m;
  constexpr int64_t kChunk = 64, kTile = 16 * 64;
  m.depth = (rows + kChunk - 1) / kChunk * kChunk;
  m.cols = cols;
  const int64_t chunks = m.depth / kChunk;
  const int16_t* end = matrix + rows * cols;
  m.bytes = std::all_of(matrix, end, [](int16_t v) { return v >= -128 && v <= 127; });
  const int64_t tiles_per_chunk = m.bytes ? 1 : 2;
  m.storage.assign(static_cast<size_t>(cols / 16 * chunks * tiles_per_chunk * kTile + 63), 0);
  uint8_t* tiles = AmxMatrix::AlignedTo64(m.storage.data());
  for (int64_t j = 0; j < rows; ++j) {
    for (int64_t c = 0; c < cols; ++c) {
      const int16_t v = matrix[j * cols + c];
      // Column block, chunk, then within the tile: row (j % 64) / 4, byte 4 x column + j % 4.
      const size_t at = static_cast<size_t>(((c / 16) * chunks + j / kChunk) * tiles_per_chunk * kTile +
                                            (j % kChunk) / 4 * 64 + (c % 16) * 4 + j % 4);
      if (m.bytes) {
        tiles[at] = static_cast<uint8_t>(v);
      } else {
        tiles[at] = static_cast<uint8_t>(v >> 8);
        tiles[at + kTile] = static_cast<uint8_t>(v & 0xff);
      }
    }
  }
  return m;
}

void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                   const AmxMatrix* amx) {
  int64_t done = 0;
#if defined(__x86_64__) || defined(_M_X64)
  if (amx && !amx->empty() && amx->cols == cols && AmxEnabled()) done = SumComponentsAmx(q, rows, kept, *amx, acc);
  if (done == cols) return;
  if (Avx512VnniEnabled()) {
    done = SumComponentsAvx512Vnni(q, rows, kept, basis, cols, acc);
  } else if (Avx512Enabled()) {
    done = SumComponentsAvx512(q, rows, kept, basis, cols, acc);
  } else if (Avx2Enabled()) {
    done = SumComponentsAvx2(q, rows, kept, basis, cols, acc);
  }
#endif
  if (done < cols) SumColumnsPortable(q, rows, kept, basis, cols, acc, done);
}

}  // namespace kvstream::codec
