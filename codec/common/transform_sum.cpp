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

PackedMatrix PackedMatrix::Pack(const int16_t* matrix, int64_t rows, int64_t cols) {
  PackedMatrix m;
  if (cols % 16 != 0 || rows <= 0) return m;
  m.cols = cols;
  m.bytes = std::all_of(matrix, matrix + rows * cols, [](int16_t v) { return v >= -128 && v <= 127; });
  if (AmxEnabled()) {
    m.layout = Layout::kAmx;
    constexpr int64_t kChunk = 64, kTile = 16 * 64;
    m.depth = (rows + kChunk - 1) / kChunk * kChunk;
    const int64_t chunks = m.depth / kChunk;
    const int64_t tiles_per_chunk = m.bytes ? 1 : 2;
    m.storage.assign(static_cast<size_t>(cols / 16 * chunks * tiles_per_chunk * kTile + 63), 0);
    uint8_t* tiles = AlignedTo64(m.storage.data());
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
  } else if (Avx512VnniEnabled() && !m.bytes) {
    m.layout = Layout::kVnniPairs;
    m.depth = (rows + 1) / 2 * 2;
    m.storage.assign(static_cast<size_t>(m.depth * cols * 2 + 63), 0);  // the padding row stays 0
    int16_t* values = reinterpret_cast<int16_t*>(AlignedTo64(m.storage.data()));
    for (int64_t j = 0; j < rows; ++j) {
      for (int64_t c = 0; c < cols; ++c) values[(j / 2 * cols + c) * 2 + j % 2] = matrix[j * cols + c];
    }
  } else if (Avx512VnniEnabled()) {
    m.layout = Layout::kVnniBytes;
    m.depth = (rows + 3) / 4 * 4;
    m.storage.assign(static_cast<size_t>(m.depth * cols + 63), 0);  // the padding rows stay 0
    uint8_t* values = AlignedTo64(m.storage.data());
    m.column_offsets.assign(static_cast<size_t>(cols), 0);
    for (int64_t j = 0; j < rows; ++j) {
      for (int64_t c = 0; c < cols; ++c) {
        const int16_t v = matrix[j * cols + c];
        values[(j / 4 * cols + c) * 4 + j % 4] = static_cast<uint8_t>(v);
        m.column_offsets[static_cast<size_t>(c)] -= 128 * v;
      }
    }
  }
  return m;
}

void SumComponents(const int16_t* q, int64_t rows, int64_t kept, const int16_t* basis, int64_t cols, int32_t* acc,
                   const PackedMatrix* packed) {
  int64_t done = 0;
#if defined(__x86_64__) || defined(_M_X64)
  if (packed && packed->cols == cols) {
    if (packed->layout == PackedMatrix::Layout::kAmx && AmxEnabled()) {
      done = SumComponentsAmx(q, rows, kept, *packed, acc);
    } else if (packed->layout != PackedMatrix::Layout::kNone && Avx512VnniEnabled()) {
      done = SumComponentsAvx512VnniPacked(q, rows, kept, *packed, acc);
    }
  }
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
