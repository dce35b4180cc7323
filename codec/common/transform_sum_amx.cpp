// SumComponents with Intel AMX (compiled with -mamx-tile -mamx-int8 besides AVX-512F and BW). AMX only
// multiplies bytes, so each int16 factor is split into a signed high and an unsigned low byte,
// a = 256 a_hi + a_lo, and the sum is assembled from the byte products' sums:
//   sum(q b) = 65536 sum(q_hi b_hi) + 256 (sum(q_hi b_lo) + sum(q_lo b_hi)) + sum(q_lo b_lo),
// each an exact int32 tile sum (|q_hi b_hi| <= 2^14, |q_lo b_lo| < 2^16, at most a matrix's rows of terms).
// Factors within [-128, 127] are bytes already and need no split: weights within int8 (the transform's and
// the residual's, |q| <= kMaxAbsQ; a predictor's inputs on ProfileOptions::byte_predictors' grid) take two
// products against an int16 matrix and one against a matrix of bytes (PackedMatrix::bytes: such a profile's
// predictor blocks).
// The assembly wraps modulo 2^32 like every int32 vector add, so it yields the exact sum whenever the sum
// fits in int32, which SumComponents requires. Same integers as every other kernel.
#include "codec/common/transform_sum.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "codec/common/transform_sum_avx512_ops.h"

namespace kvstream::codec {
namespace {

constexpr int kTileRows = 16;   // rows of a tile (the most AMX allows)
constexpr int kTileBytes = 64;  // bytes of a tile row (the most AMX allows)

// Palette 1, every tile 16 rows x 64 bytes: 0-3 accumulate int32 sums (16 x 16), 4-5 hold weight bytes
// (16 rows x 64 components), 6-7 a matrix's high and low bytes (16 rows of 4 interleaved matrix rows).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// Components [j, j + 32) of weight row `row`: zeros past `kept`, and for rows past `rows`.
__m512i LoadWeights(const int16_t* q, int64_t rows, int64_t kept, int64_t row, int64_t j) {
  const __mmask32 mask = FirstLanes(row < rows ? kept - j : 0);
  return _mm512_maskz_loadu_epi16(mask, mask ? q + row * WeightStride(kept) + j : q);
}

// The low bytes of the weights of rows [r, r + 16) into lo, components padded with zeros to `depth` (whole
// 64-byte chunks) and rows past `rows` all zero. Returns whether every weight lies within int8: then lo,
// read as signed bytes, holds the weights themselves and no high bytes are needed.
bool LowBytes(const int16_t* q, int64_t rows, int64_t kept, int64_t r, int64_t depth, uint8_t* lo) {
  const __m512i bias = _mm512_set1_epi16(128);
  __mmask32 outside = 0;
  for (int64_t i = 0; i < kTileRows; ++i) {
    for (int64_t j = 0; j < depth; j += 32) {
      const __m512i v = LoadWeights(q, rows, kept, r + i, j);
      outside |= BeyondInt8(_mm512_add_epi16(v, bias));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + i * depth + j), _mm512_cvtepi16_epi8(v));  // vpmovwb: low byte
    }
  }
  return outside == 0;
}

// The high bytes (signed) of the same rows into hi, for weights beyond int8.
void HighBytes(const int16_t* q, int64_t rows, int64_t kept, int64_t r, int64_t depth, uint8_t* hi) {
  for (int64_t i = 0; i < kTileRows; ++i) {
    for (int64_t j = 0; j < depth; j += 32) {
      const __m512i v = LoadWeights(q, rows, kept, r + i, j);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i * depth + j), _mm512_cvtepi16_epi8(_mm512_srai_epi16(v, 8)));
    }
  }
}

// Rows [0, n) of a 16-column block: out = high x 2^shift + low (wrapping, see above).
void Assemble(const int32_t* high, int shift, const int32_t* low, int64_t n, int32_t* out, int64_t out_stride) {
  const __m128i count = _mm_cvtsi32_si128(shift);
  for (int64_t i = 0; i < n; ++i) {
    const __m512i h = _mm512_sll_epi32(_mm512_load_si512(high + i * 16), count);
    _mm512_storeu_si512(out + i * out_stride, _mm512_add_epi32(h, _mm512_load_si512(low + i * 16)));
  }
}

// Rows [0, n) of a 16-column block of finished sums.
void Store(const int32_t* sums, int64_t n, int32_t* out, int64_t out_stride) {
  for (int64_t i = 0; i < n; ++i) _mm512_storeu_si512(out + i * out_stride, _mm512_load_si512(sums + i * 16));
}

// One 16 x 16 block of sums over `chunks` chunks of 64 components: tiles 0-3 accumulate (A x matrix high
// bytes, A x low bytes, A' x high, A' x low) and are stored into part[0..3]. A (tile 4) holds signed bytes
// at `first`; A' (tile 5) at `second` holds signed bytes too when kSignedSecond (a second row block's int8
// weights), unsigned ones otherwise (the low bytes of A's weights). a_stride: bytes between weight rows.
template <bool kSignedSecond>
void MultiplyBlock(const uint8_t* first, const uint8_t* second, int64_t a_stride, const uint8_t* matrix, int64_t chunks,
                   int32_t (*part)[kTileRows * 16]) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < chunks; ++k) {
    const uint8_t* b = matrix + k * 2 * kTileRows * kTileBytes;
    _tile_loadd(6, b, kTileBytes);
    _tile_loadd(7, b + kTileRows * kTileBytes, kTileBytes);
    _tile_loadd(4, first + k * kTileBytes, a_stride);
    _tile_loadd(5, second + k * kTileBytes, a_stride);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbsud(1, 4, 7);
    if (kSignedSecond) {
      _tile_dpbssd(2, 5, 6);
      _tile_dpbsud(3, 5, 7);
    } else {
      _tile_dpbusd(2, 5, 6);
      _tile_dpbuud(3, 5, 7);
    }
  }
  _tile_stored(0, part[0], 64);
  _tile_stored(1, part[1], 64);
  _tile_stored(2, part[2], 64);
  _tile_stored(3, part[3], 64);
}

// Where a 16 x 16 block of sums goes: rows `stride` int32 apart.
struct SumsOut {
  int32_t* at;
  int64_t stride;
};

// The same against a matrix of bytes: tiles 6 and 7 hold its column blocks at `m0` and `m1` (kMatrixBlocks
// of them), tiles 4 and 5 the weight blocks at `first` and `second` (signed bytes; `second` unsigned when
// kUnsignedSecond: the low bytes of `first`'s weights). Tile 2 m + w, stored to out[2 m + w], sums weight
// block w against matrix block m.
template <bool kUnsignedSecond, int kMatrixBlocks>
void MultiplyByteMatrix(const uint8_t* first, const uint8_t* second, int64_t a_stride, const uint8_t* m0,
                        const uint8_t* m1, int64_t chunks, const SumsOut* out) {
  constexpr int64_t kTileSize = kTileRows * kTileBytes;
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kMatrixBlocks == 2) {
    _tile_zero(2);
    _tile_zero(3);
  }
  for (int64_t k = 0; k < chunks; ++k) {
    _tile_loadd(4, first + k * kTileBytes, a_stride);
    _tile_loadd(5, second + k * kTileBytes, a_stride);
    _tile_loadd(6, m0 + k * kTileSize, kTileBytes);
    // Spelled out per matrix tile: the intrinsics paste their tile numbers into the instruction, so they
    // must be literals (a template parameter does not assemble).
    _tile_dpbssd(0, 4, 6);
    if constexpr (kUnsignedSecond) {
      _tile_dpbusd(1, 5, 6);
    } else {
      _tile_dpbssd(1, 5, 6);
    }
    if constexpr (kMatrixBlocks == 2) {
      _tile_loadd(7, m1 + k * kTileSize, kTileBytes);
      _tile_dpbssd(2, 4, 7);
      if constexpr (kUnsignedSecond) {
        _tile_dpbusd(3, 5, 7);
      } else {
        _tile_dpbssd(3, 5, 7);
      }
    }
  }
  _tile_stored(0, out[0].at, out[0].stride * 4);
  _tile_stored(1, out[1].at, out[1].stride * 4);
  if constexpr (kMatrixBlocks == 2) {
    _tile_stored(2, out[2].at, out[2].stride * 4);
    _tile_stored(3, out[3].at, out[3].stride * 4);
  }
}

// SumComponentsAmx against a matrix of bytes, two column blocks at a time (each weight tile loaded serves
// both). The weights as LowBytes and HighBytes left them, `bytes` when they are within int8 (then lo holds
// them and hi was not written).
template <int kMatrixBlocks>
void SumAgainstByteColumns(const uint8_t* hi, const uint8_t* lo, bool bytes, int64_t rows, int64_t row_blocks,
                           int64_t depth, const uint8_t* m0, const uint8_t* m1, int64_t cols, int64_t c, int32_t* acc) {
  const int64_t chunks = depth / kTileBytes, block_bytes = kTileRows * depth;
  alignas(64) int32_t part[4][kTileRows * 16];
  const SumsOut to_part[4] = {{part[0], 16}, {part[1], 16}, {part[2], 16}, {part[3], 16}};
  if (bytes) {
    for (int64_t rb = 0; rb < row_blocks; rb += 2) {
      const uint8_t* a = lo + rb * block_bytes;
      const int64_t r = rb * kTileRows;
      if (r + 2 * kTileRows <= rows) {  // whole blocks: the tiles are the sums, stored in place
        int32_t* at = acc + r * cols + c;
        const SumsOut to_acc[4] = {{at, cols}, {at + kTileRows * cols, cols}, {at + 16, cols}, {at + kTileRows * cols + 16, cols}};
        MultiplyByteMatrix<false, kMatrixBlocks>(a, a + block_bytes, depth, m0, m1, chunks, to_acc);
        continue;
      }
      MultiplyByteMatrix<false, kMatrixBlocks>(a, a + block_bytes, depth, m0, m1, chunks, to_part);
      for (int64_t half = 0; half < 2; ++half) {
        const int64_t first_row = r + half * kTileRows, n = std::min<int64_t>(kTileRows, rows - first_row);
        if (n <= 0) continue;
        Store(part[half], n, acc + first_row * cols + c, cols);
        if (kMatrixBlocks == 2) Store(part[2 + half], n, acc + first_row * cols + c + 16, cols);
      }
    }
    return;
  }
  for (int64_t r = 0; r < rows; r += kTileRows) {
    MultiplyByteMatrix<true, kMatrixBlocks>(hi + r * depth, lo + r * depth, depth, m0, m1, chunks, to_part);
    const int64_t n = std::min<int64_t>(kTileRows, rows - r);
    Assemble(part[0], 8, part[1], n, acc + r * cols + c, cols);  // q_hi b x 2^8 + q_lo b
    if (kMatrixBlocks == 2) Assemble(part[2], 8, part[3], n, acc + r * cols + c + 16, cols);
  }
}

}  // namespace

int64_t SumComponentsAmx(const int16_t* q, int64_t rows, int64_t kept, const PackedMatrix& matrix, int32_t* acc) {
  const int64_t cols = matrix.cols;
  if (kept > matrix.depth || kept <= 0 || rows <= 0) return 0;
  const int64_t chunks = (kept + kTileBytes - 1) / kTileBytes, depth = chunks * kTileBytes;
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTileRows;
    config.bytes_per_row[t] = kTileBytes;
  }
  _tile_loadconfig(&config);
  // Every row's weight bytes first, so that columns can go outermost: a column block's matrix tiles
  // (depth x 32 bytes) then stay in L1 while every row block passes (row blocks outermost reloaded the whole
  // matrix, 72 KiB for SmolLM2, from L2 for each). Weights within int8 take their row blocks in pairs (an
  // odd count gets a zero block), so that each matrix tile loaded serves two and four accumulators build
  // their sums independently: a tile's sum waits for its previous product, and one chain per tile would
  // leave the unit idle.
  const int64_t row_blocks = ((rows + kTileRows - 1) / kTileRows + 1) / 2 * 2;
  const size_t block_bytes = static_cast<size_t>(kTileRows * depth);
  thread_local std::vector<uint8_t> hi_storage, lo_storage;
  lo_storage.resize(static_cast<size_t>(row_blocks) * block_bytes + 63);
  hi_storage.resize(lo_storage.size());
  uint8_t* lo = PackedMatrix::AlignedTo64(lo_storage.data());
  uint8_t* hi = PackedMatrix::AlignedTo64(hi_storage.data());
  bool bytes = true;
  for (int64_t rb = 0; rb < row_blocks; ++rb) {
    bytes &= LowBytes(q, rows, kept, rb * kTileRows, depth, lo + rb * block_bytes);
  }
  if (!bytes) {
    for (int64_t rb = 0; rb < row_blocks; ++rb) HighBytes(q, rows, kept, rb * kTileRows, depth, hi + rb * block_bytes);
  }
  if (matrix.bytes) {
    const size_t block_stride = static_cast<size_t>(matrix.depth / kTileBytes) * kTileRows * kTileBytes;
    for (int64_t c = 0; c < cols; c += 32) {
      const uint8_t* m0 = matrix.data() + static_cast<size_t>(c / 16) * block_stride;
      if (c + 16 < cols) {
        SumAgainstByteColumns<2>(hi, lo, bytes, rows, row_blocks, depth, m0, m0 + block_stride, cols, c, acc);
      } else {
        SumAgainstByteColumns<1>(hi, lo, bytes, rows, row_blocks, depth, m0, m0, cols, c, acc);
      }
    }
    _tile_release();
    return cols;
  }
  alignas(64) int32_t part[4][kTileRows * 16];
  const size_t tile_stride = static_cast<size_t>(matrix.depth / kTileBytes) * 2 * kTileRows * kTileBytes;
  for (int64_t c = 0; c < cols; c += 16) {
    const uint8_t* matrix_block = matrix.data() + static_cast<size_t>(c / 16) * tile_stride;
    if (bytes) {
      for (int64_t rb = 0; rb < row_blocks; rb += 2) {
        const uint8_t* a = lo + rb * block_bytes;
        MultiplyBlock<true>(a, a + block_bytes, depth, matrix_block, chunks, part);
        for (int64_t half = 0; half < 2; ++half) {
          const int64_t r = (rb + half) * kTileRows, n = std::min<int64_t>(kTileRows, rows - r);
          if (n > 0) Assemble(part[2 * half], 8, part[2 * half + 1], n, acc + r * cols + c, cols);  // q b_hi, q b_lo
        }
      }
    } else {
      for (int64_t r = 0; r < rows; r += kTileRows) {
        MultiplyBlock<false>(hi + r * depth, lo + r * depth, depth, matrix_block, chunks, part);
        // Parts hh, hl, lh, ll: (hh x 2^8 + hl + lh) x 2^8 + ll, through part[1].
        Assemble(part[0], 8, part[1], kTileRows, part[1], 16);
        Assemble(part[2], 0, part[1], kTileRows, part[1], 16);
        Assemble(part[1], 8, part[3], std::min<int64_t>(kTileRows, rows - r), acc + r * cols + c, cols);
      }
    }
  }
  _tile_release();
  return cols;
}

}  // namespace kvstream::codec

#endif
