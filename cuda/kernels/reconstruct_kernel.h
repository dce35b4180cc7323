// Kernels 4 and 5: where each coded row's escape values start (a count per row, then their prefix), and
// the reconstruction of every row into the destination (docs/format.md: fp16 and int8 as stored, lossy
// segments' sink rows as f16, their coded rows as mean + q x step with the escapes patched in, in symbol
// order). Reconstruction blocks take kRowsPerTile rows of one segment, a warp per row at a time, a lane
// per channel; a warp vote ranks a row's escapes.
#pragma once

#include <cstdint>

#include "codec/common/kv_address.h"
#include "codec/common/quantizer.h"
#include "common/half.h"
#include "common/int8_row.h"
#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/bytes.h"
#include "cuda/kernels/decode_job.h"

namespace kvstream::cuda {

inline constexpr int kEscapeThreads = 128;
inline constexpr int kReconstructThreads = 128;
inline constexpr int kRowsPerTile = 32;

KVSTREAM_HD bool IsCodedLossy(const DecodeArgs& a, int s) {
  return a.jobs[s].kind == SegmentKind::kChannelUniform && a.errors[s] == kGpuOk;
}

// Block s: the escape symbols of each of segment s's coded rows, then (thread 0) their exclusive prefix,
// checked against the frame's escape count.
template <typename X>
KVSTREAM_HD void EscapeScanKernel(X& x, const DecodeArgs& a) {
  const int s = x.block();
  if (!IsCodedLossy(a, s)) return;
  const SegmentJob& job = a.jobs[s];
  const int32_t rows = job.tokens - job.sink_rows;
  x.Each([&](int t) {
    for (int32_t r = t; r < rows; r += x.threads()) {
      const uint8_t* sym = job.symbols + static_cast<size_t>(r) * static_cast<size_t>(job.channels);
      uint32_t count = 0;
      for (int32_t c = 0; c < job.channels; ++c) count += sym[c] == codec::kEscapeSymbol ? 1u : 0u;
      job.row_escapes[r] = count;
    }
  });
  x.Sync();
  x.Each([&](int t) {
    if (t != 0) return;
    uint32_t total = 0;
    for (int32_t r = 0; r < rows; ++r) {
      const uint32_t count = job.row_escapes[r];
      job.row_escapes[r] = total;
      total += count;
    }
    if (total != a.frames[s].escape_count) a.errors[s] = kGpuEscapeCount;
  });
}

// The tiles of a launch: tile_first[s] is segment s's first tile, tile_first[segments] the count.
struct TileMap {
  const uint32_t* tile_first;
};

KVSTREAM_HD int SegmentOfTile(const TileMap& m, int segments, uint32_t tile) {
  int lo = 0, hi = segments - 1;  // the last segment whose first tile is <= tile
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (m.tile_first[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// The value of row t, channel c of a segment whose symbols are known not to be escapes (or sinks, fp16,
// int8): everything but the escape lookup.
KVSTREAM_HD float ReconstructValue(const DecodeArgs& a, const SegmentJob& job, const SegmentFrame& f, int32_t t,
                                   int32_t c, uint8_t symbol) {
  const size_t C = static_cast<size_t>(job.channels);
  if (job.kind == SegmentKind::kFp16) {
    const uint32_t bits = LoadU16(job.bytes + 2 * (static_cast<size_t>(t) * C + static_cast<size_t>(c)));
    return job.stored_bf16 ? BFloat16ToFloat(static_cast<uint16_t>(bits)) : HalfToFloat(static_cast<uint16_t>(bits));
  }
  if (job.kind == SegmentKind::kInt8) {
    const auto q = static_cast<int8_t>(job.bytes[2 * static_cast<size_t>(job.tokens) + static_cast<size_t>(t) * C +
                                                 static_cast<size_t>(c)]);
    return DequantizeInt8(q, static_cast<uint16_t>(LoadU16(job.bytes + 2 * static_cast<size_t>(t))));
  }
  if (t < job.sink_rows) {
    return HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + f.sinks + 2 * (static_cast<size_t>(t) * C + c))));
  }
  float mean, step;
  if (job.in_chunk_tables) {
    mean = HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + f.means + 2 * static_cast<size_t>(c))));
    step = f.step;
  } else {
    const ProfileTables& p = a.profile;
    const size_t at = (static_cast<size_t>(job.layer) * 2 + static_cast<size_t>(job.kv)) * C + static_cast<size_t>(c);
    mean = p.means[at];
    step = p.steps[(static_cast<size_t>(job.level) - 1) * static_cast<size_t>(p.layers) * 2 * C + at];
  }
  return codec::DequantChannelUniform(symbol, mean, step);
}

struct ReconstructLane {
  uint32_t escapes_before;  // escapes of the row before this lane's 32 channels
  bool escape;
  uint8_t symbol;
  int32_t channel;
};

template <typename X>
KVSTREAM_HD void ReconstructKernel(X& x, const DecodeArgs& a, const TileMap& tiles) {
  const int s = SegmentOfTile(tiles, a.segments, static_cast<uint32_t>(x.block()));
  if (a.errors[s] != kGpuOk) return;
  const SegmentJob& job = a.jobs[s];
  const SegmentFrame& f = a.frames[s];
  const int32_t first_row = static_cast<int32_t>(static_cast<uint32_t>(x.block()) - tiles.tile_first[s]) * kRowsPerTile;
  const bool lossy = job.kind == SegmentKind::kChannelUniform;
  const int warps = x.threads() / kWarpSize;
  typename X::template Local<ReconstructLane> lane(x);
  for (int32_t r0 = 0; r0 < kRowsPerTile; r0 += warps) {
    x.Each([&](int t) { lane[t].escapes_before = 0; });
    for (int32_t c0 = 0; c0 < job.channels; c0 += kWarpSize) {
      x.Each([&](int t) {
        ReconstructLane& l = lane[t];
        const int32_t row = first_row + r0 + t / kWarpSize;
        l.channel = c0 + t % kWarpSize;
        l.escape = false;
        l.symbol = 0;
        if (row >= job.tokens || l.channel >= job.channels) return;
        if (lossy && row >= job.sink_rows) {
          l.symbol = job.symbols[static_cast<size_t>(row - job.sink_rows) * static_cast<size_t>(job.channels) +
                                 static_cast<size_t>(l.channel)];
          l.escape = l.symbol == codec::kEscapeSymbol;
        }
      });
      x.Ballot([&](int t) { return lane[t].escape; },
               [&](int t, uint32_t mask) {
                 ReconstructLane& l = lane[t];
                 const int32_t row = first_row + r0 + t / kWarpSize;
                 if (row >= job.tokens || l.channel >= job.channels) return;
                 float value;
                 if (l.escape) {
                   const uint32_t rank = job.row_escapes[row - job.sink_rows] + l.escapes_before +
                                         static_cast<uint32_t>(PopCount(mask & ((1u << (t % kWarpSize)) - 1u)));
                   value = HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + f.escapes + 2 * static_cast<size_t>(rank))));
                 } else {
                   value = ReconstructValue(a, job, f, row, l.channel, l.symbol);
                 }
                 l.escapes_before += static_cast<uint32_t>(PopCount(mask));
                 const int64_t offset = codec::KvElementOffset(a.destination, job.token_begin + row, l.channel);
                 if (offset < 0) {
                   a.errors[s] = kGpuDestination;
                   return;
                 }
                 const DType stored = job.stored_bf16 ? DType::kBF16 : DType::kF16;
                 if (job.kind == SegmentKind::kFp16 && a.destination.dtype == stored) {
                   // The stored 16-bit format into the same format: the bits as they are (NaN payloads too).
                   const size_t at = 2 * (static_cast<size_t>(row) * static_cast<size_t>(job.channels) +
                                          static_cast<size_t>(l.channel));
                   codec::KvStoreBits16(a.destination, job.kv, job.layer, offset, static_cast<uint16_t>(LoadU16(job.bytes + at)));
                   return;
                 }
                 codec::KvStore(a.destination, job.kv, job.layer, offset, value);
               });
    }
  }
}

}  // namespace kvstream::cuda
