// The exact integer sums of the transform's and the predicted scheme's reconstruction on the tensor cores
// (docs/format.md, "Scheme 3", "Scheme 4"): S[r][c] = sum over k < depth of A(r, k) x W(k, c) for the
// kTileRows rows of a tile and every column, with the block's warps taking 16 x 8 blocks of S in turn.
// Operands are bytes for the MMA (warp_mma.h): a factor within int8 goes as it is, any other int16 as a
// signed high byte and an unsigned low byte (v = 256 hi + lo), each pair of planes its own product and
// accumulator (every partial sum stays far inside int32: depth <= 1024), recombined modulo 2^32, which
// gives the exact sum the format bounds below 2^31. A quantised weight (|q| <= 127) against a basis takes
// 2 products per step; a predictor input (|z| <= 2047) against an int16 predictor 4, against a predictor
// within int8 (a byte-predictor profile) 2.
#pragma once

#include <cstdint>

#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/warp_mma.h"

namespace kvstream::cuda {

inline constexpr int kTileRows = 32;

struct MmaLane {
  uint32_t a[2][4];   // [0]: A's bytes, or its high bytes; [1]: its low bytes
  uint32_t b[2][2];
  int32_t acc[4][4];  // the partial products: hh (or the one), hl, lh, ll
};

// The planes of v: the byte itself when `bytes`, else its high (signed) and low (unsigned) bytes.
KVSTREAM_HD void PutMmaByte(uint32_t* words0, uint32_t* words1, int reg, int byte, int32_t v, bool bytes) {
  const int shift = 8 * byte;
  if (bytes) {
    words0[reg] |= (static_cast<uint32_t>(v) & 0xffu) << shift;
    return;
  }
  words0[reg] |= (static_cast<uint32_t>(v >> 8) & 0xffu) << shift;
  words1[reg] |= (static_cast<uint32_t>(v) & 0xffu) << shift;
}

// A(r, k) for r < kTileRows, k < depth; W(k, c) for k < depth, c < columns; out(r, c, sum) for every
// r < kTileRows and c < columns. a_bytes / w_bytes: every A / W value lies within int8 (uniform).
template <typename X, typename AValue, typename WValue, typename Out>
KVSTREAM_HD void TileSums(X& x, typename X::template Local<MmaLane>& lane, int columns, int depth, bool a_bytes,
                          bool w_bytes, AValue&& a, WValue&& w, Out&& out) {
  const int warps = x.threads() / kWarpSize;
  const int column_blocks = (columns + kMmaN - 1) / kMmaN;
  const int items = (kTileRows / kMmaM) * column_blocks;
  const int steps = (depth + kMmaK - 1) / kMmaK;
  const auto item_of = [&](int round, int t) { return round * warps + t / kWarpSize; };
  for (int round = 0; round * warps < items; ++round) {
    x.Each([&](int t) {
      MmaLane& l = lane[t];
      for (auto& acc : l.acc) acc[0] = acc[1] = acc[2] = acc[3] = 0;
    });
    for (int step = 0; step < steps; ++step) {
      x.Each([&](int t) {
        MmaLane& l = lane[t];
        for (auto& v : l.a) v[0] = v[1] = v[2] = v[3] = 0;
        for (auto& v : l.b) v[0] = v[1] = 0;
        const int item = item_of(round, t);
        if (item >= items) return;
        const int row0 = (item % (kTileRows / kMmaM)) * kMmaM, column0 = (item / (kTileRows / kMmaM)) * kMmaN;
        const int ln = t % kWarpSize, k0 = step * kMmaK;
        for (int reg = 0; reg < 4; ++reg) {
          for (int byte = 0; byte < 4; ++byte) {
            const int k = k0 + MmaAK(ln, reg, byte);
            if (k < depth) PutMmaByte(l.a[0], l.a[1], reg, byte, a(row0 + MmaARow(ln, reg), k), a_bytes);
          }
        }
        const int c = column0 + MmaBColumn(ln);
        for (int reg = 0; reg < 2; ++reg) {
          for (int byte = 0; byte < 4; ++byte) {
            const int k = k0 + MmaBK(ln, reg, byte);
            if (k < depth && c < columns) PutMmaByte(l.b[0], l.b[1], reg, byte, w(k, c), w_bytes);
          }
        }
      });
      // The plane pairs: A's high (or only) plane is signed, its low plane unsigned; W's likewise.
      const auto mma = [&](int ai, int bi, int acc) {
        return [&, ai, bi, acc](int t, const uint32_t*& pa, const uint32_t*& pb, int32_t*& pd) {
          pa = lane[t].a[ai];
          pb = lane[t].b[bi];
          pd = lane[t].acc[acc];
        };
      };
      x.template Mma<false, false>(mma(0, 0, 0));
      if (!w_bytes) x.template Mma<false, true>(mma(0, 1, 1));
      if (!a_bytes) x.template Mma<true, false>(mma(1, 0, 2));
      if (!a_bytes && !w_bytes) x.template Mma<true, true>(mma(1, 1, 3));
    }
    x.Each([&](int t) {
      const MmaLane& l = lane[t];
      const int item = item_of(round, t);
      if (item >= items) return;
      const int row0 = (item % (kTileRows / kMmaM)) * kMmaM, column0 = (item / (kTileRows / kMmaM)) * kMmaN;
      const int ln = t % kWarpSize;
      for (int reg = 0; reg < 4; ++reg) {
        const int c = column0 + MmaCColumn(ln, reg);
        if (c >= columns) continue;
        // hi x hi counts 2^16 (both split), 2^8 (one split) or 1; the cross terms 2^8; lo x lo 1.
        const uint32_t hh = static_cast<uint32_t>(l.acc[0][reg]);
        const uint32_t cross = static_cast<uint32_t>(l.acc[1][reg]) + static_cast<uint32_t>(l.acc[2][reg]);
        const uint32_t ll = static_cast<uint32_t>(l.acc[3][reg]);
        const int shift = (a_bytes ? 0 : 8) + (w_bytes ? 0 : 8);
        const uint32_t sum = (hh << shift) + (shift == 16 ? (cross << 8) + ll : cross);
        out(row0 + MmaCRow(ln, reg), c, static_cast<int32_t>(sum));
      }
    });
  }
}

}  // namespace kvstream::cuda
