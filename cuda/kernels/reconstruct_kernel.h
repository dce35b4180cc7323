// Kernels 4 and 5: where each coded row's escape values start (a count per row, then their prefix per
// stream), and the reconstruction of every row into the destination (docs/format.md: fp16 and int8 as
// stored, lossy segments' sink rows as f16, channel-uniform rows as mean + q x step with the escapes
// patched in, in symbol order, transform rows as TransformRows says). Reconstruction blocks take
// kRowsPerTile rows of one segment, a warp per row at a time, a lane per channel; a warp vote ranks a
// channel-uniform row's escapes.
#pragma once

#include <cstdint>

#include "codec/common/key_rotation.h"
#include "codec/common/kv_address.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "common/half.h"
#include "common/int8_row.h"
#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/bytes.h"
#include "cuda/kernels/decode_job.h"
#include "cuda/kernels/tile_sums.h"

namespace kvstream::cuda {

inline constexpr int kEscapeThreads = 128;
inline constexpr int kReconstructThreads = 128;
inline constexpr int kRowsPerTile = 32;

KVSTREAM_HD bool IsCodedLossy(const DecodeArgs& a, int s) {
  return IsEntropyCoded(a.jobs[s].kind) && a.errors[s] == kGpuOk;
}

// Block s: the escape symbols of each of segment s's coded rows, then (thread 0) their exclusive prefix
// per stream, checked against the stream's escape count.
template <typename X>
KVSTREAM_HD void EscapeScanKernel(X& x, const DecodeArgs& a) {
  const int s = x.block();
  if (!IsCodedLossy(a, s)) return;
  const SegmentJob& job = a.jobs[s];
  const SegmentFrame& f = a.frames[s];
  x.Each([&](int t) {
    for (int i = 0; i < StreamCount(job); ++i) {
      const StreamFrame& st = f.stream[i];
      for (int32_t r = t; r < job.stream_rows[i]; r += x.threads()) {
        const uint8_t* sym = job.symbols + st.symbols + static_cast<size_t>(r) * st.period;
        uint32_t count = 0;
        for (uint32_t c = 0; c < st.period; ++c) count += sym[c] == codec::kEscapeSymbol ? 1u : 0u;
        job.row_escapes[st.first_row + static_cast<uint32_t>(r)] = count;
      }
    }
  });
  x.Sync();
  x.Each([&](int t) {
    if (t != 0) return;
    for (int i = 0; i < StreamCount(job); ++i) {
      const StreamFrame& st = f.stream[i];
      uint32_t total = 0;
      for (int32_t r = 0; r < job.stream_rows[i]; ++r) {
        uint32_t& e = job.row_escapes[st.first_row + static_cast<uint32_t>(r)];
        const uint32_t count = e;
        e = total;
        total += count;
      }
      if (total != st.escape_count) a.errors[s] = kGpuEscapeCount;
    }
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

// Where coded row r (0-based after the sink rows) of a segment is: its stream and its row within it.
KVSTREAM_HD int StreamOfRow(const SegmentJob& job, int32_t r, uint32_t* stream_row) {
  if (job.row_map == nullptr) {
    *stream_row = static_cast<uint32_t>(r);
    return 0;
  }
  const uint32_t e = job.row_map[r];
  *stream_row = e & ~kFineRowBit;
  return (e & kFineRowBit) ? 1 : 0;
}

static_assert(kRowsPerTile == kTileRows, "a reconstruction tile is a tile of sums");
inline constexpr int kPredictedSumArrays = 4;  // up to 3 predictor blocks' sums and the residual's
inline constexpr int kMaxTransformRow = 1024;  // codec::kMaxTransformChannels
struct ReconstructShared {
  float y[kReconstructThreads / kWarpSize][kMaxTransformRow];  // a warp's transform row before RoPE
};

// Where a coded row's symbols are: its stream and its first symbol (docs/format.md, "Fine rows").
KVSTREAM_HD const uint8_t* RowSymbols(const SegmentJob& job, const SegmentFrame& f, int32_t row, const StreamFrame** st) {
  uint32_t stream_row = 0;
  *st = &f.stream[StreamOfRow(job, row - job.sink_rows, &stream_row)];
  return job.symbols + (*st)->symbols + static_cast<size_t>(stream_row) * (*st)->period;
}

// A coded row's weight of component k (0 for an escape, whose value is added after the sums, and past
// the row's kept components).
KVSTREAM_HD int32_t RowWeight(const SegmentJob& job, const SegmentFrame& f, int32_t row, int k) {
  if (row < job.sink_rows || row >= job.tokens) return 0;
  const StreamFrame* st;
  const uint8_t* sym = RowSymbols(job, f, row, &st);
  if (static_cast<uint32_t>(k) >= st->period || sym[k] == codec::kEscapeSymbol) return 0;
  return codec::SymbolToQ(sym[k]);
}

// A coded row's value at channel c in the transform's and the predicted scheme's residual form
// (docs/format.md, "Scheme 3"): base + the exact integer sum `acc` of the row's weights against `basis`
// (TileSums), times the scaled step, then the escaped components in component order.
KVSTREAM_HD float ComponentValue(const SegmentJob& job, const SegmentFrame& f, const int16_t* basis, size_t c, int32_t row,
                                 float base, int32_t acc) {
  const size_t C = static_cast<size_t>(job.channels);
  const StreamFrame* st;
  const uint8_t* sym = RowSymbols(job, f, row, &st);
  float v = codec::DequantTransform(acc, base, st->scaled_step);
  uint32_t stream_row = 0;
  StreamOfRow(job, row - job.sink_rows, &stream_row);
  uint32_t escape = job.row_escapes[st->first_row + stream_row];
  for (uint32_t j = 0; j < st->period; ++j) {
    if (sym[j] != codec::kEscapeSymbol) continue;
    const float w = HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + st->escapes + 2 * static_cast<size_t>(escape++))));
    v = codec::AddEscapedComponent(v, w, st->scaled_step, basis[j * C + c]);
  }
  return v;
}

// The deepest stream of a segment: how many components the sums of a tile of its rows run over.
KVSTREAM_HD int SumDepth(const SegmentJob& job, const SegmentFrame& f) {
  uint32_t depth = f.stream[0].period;
  if (StreamCount(job) == 2 && f.stream[1].period > depth) depth = f.stream[1].period;
  return static_cast<int>(depth);
}

KVSTREAM_HD float SinkValue(const SegmentJob& job, const SegmentFrame& f, int32_t row, size_t c) {
  const size_t at = static_cast<size_t>(row) * static_cast<size_t>(job.channels) + c;
  return HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + f.sinks + 2 * at)));
}

// Lane `lane`'s share of storing a warp's row y (before RoPE) of segment s: keys' coded rows rotated at
// their position by the host's table, then every value at its element of the destination.
KVSTREAM_HD void StoreComponentRow(const DecodeArgs& a, int s, int32_t row, const float* y, int lane) {
  const SegmentJob& job = a.jobs[s];
  const ProfileTables& p = a.profile;
  const size_t C = static_cast<size_t>(job.channels);
  const int64_t position = job.token_begin + row;
  if (job.kv == 0 && row >= job.sink_rows) {
    const size_t half = static_cast<size_t>(p.head_dim) / 2;
    const float* cs = job.rope + static_cast<size_t>(row) * 2 * half;
    for (size_t pair = static_cast<size_t>(lane); pair < C / 2; pair += kWarpSize) {
      const size_t head = pair / half, i = pair % half;
      const size_t c0 = head * static_cast<size_t>(p.head_dim) + (p.rope_layout == 0 ? 2 * i : i);
      const size_t c1 = p.rope_layout == 0 ? c0 + 1 : c0 + half;
      float v0 = y[c0], v1 = y[c1];
      codec::RotatePair(&v0, &v1, cs[i], cs[half + i]);
      const int64_t o0 = codec::KvElementOffset(a.destination, position, static_cast<int64_t>(c0));
      const int64_t o1 = codec::KvElementOffset(a.destination, position, static_cast<int64_t>(c1));
      if (o0 < 0 || o1 < 0) {
        a.errors[s] = kGpuDestination;
        return;
      }
      codec::KvStore(a.destination, job.kv, job.layer, o0, v0);
      codec::KvStore(a.destination, job.kv, job.layer, o1, v1);
    }
    return;
  }
  for (size_t c = static_cast<size_t>(lane); c < C; c += kWarpSize) {
    const int64_t o = codec::KvElementOffset(a.destination, position, static_cast<int64_t>(c));
    if (o < 0) {
      a.errors[s] = kGpuDestination;
      return;
    }
    codec::KvStore(a.destination, job.kv, job.layer, o, y[c]);
  }
}

// The exact sums of a tile's coded rows' weights against `basis` (a transform basis or a residual basis)
// into out[r][channel] for the tile's rows r.
template <typename X>
KVSTREAM_HD void ResidualSums(X& x, typename X::template Local<MmaLane>& lane, const SegmentJob& job,
                              const SegmentFrame& f, const int16_t* basis, int32_t first_row, int32_t* out) {
  const size_t C = static_cast<size_t>(job.channels);
  TileSums(x, lane, static_cast<int>(C), SumDepth(job, f), /*a_bytes=*/true, /*w_bytes=*/false,
           [&](int r, int k) { return RowWeight(job, f, first_row + r, k); },
           [&](int k, int c) { return static_cast<int32_t>(basis[static_cast<size_t>(k) * C + static_cast<size_t>(c)]); },
           [&](int r, int c, int32_t v) { out[static_cast<size_t>(r) * C + static_cast<size_t>(c)] = v; });
}

// The tile's rows of segment s, a warp per row at a time, a lane per channel: every value into the warp's
// row in shared memory (sink rows as stored, coded rows as coded_value(r, row, channel), r the row within
// the tile); then after_row(row, y, lane), and the row stored (StoreComponentRow).
template <typename X, typename CodedValue, typename AfterRow>
KVSTREAM_HD void ComponentTileRows(X& x, const DecodeArgs& a, int s, int32_t first_row, ReconstructShared& sh,
                                   CodedValue&& coded_value, AfterRow&& after_row) {
  const SegmentJob& job = a.jobs[s];
  const SegmentFrame& f = a.frames[s];
  const size_t C = static_cast<size_t>(job.channels);
  const int warps = x.threads() / kWarpSize;
  for (int32_t r0 = 0; r0 < kRowsPerTile; r0 += warps) {
    x.Each([&](int t) {
      const int32_t r = r0 + t / kWarpSize, row = first_row + r;
      if (row >= job.tokens) return;
      float* y = sh.y[t / kWarpSize];
      for (size_t c = static_cast<size_t>(t % kWarpSize); c < C; c += kWarpSize) {
        y[c] = row < job.sink_rows ? SinkValue(job, f, row, c) : coded_value(r, row, c);
      }
    });
    x.Sync();
    x.Each([&](int t) {
      const int32_t row = first_row + r0 + t / kWarpSize;
      if (row >= job.tokens) return;
      after_row(row, sh.y[t / kWarpSize], t % kWarpSize);
      StoreComponentRow(a, s, row, sh.y[t / kWarpSize], t % kWarpSize);
    });
    x.Sync();
  }
}

// Transform segments (docs/format.md, "Scheme 3"): the tile's sums on the tensor cores into the
// segment's scratch, then warp w's row at a time, a lane per channel, into the warp's row in shared
// memory; then RoPE (keys) and the stores.
template <typename X>
KVSTREAM_HD void TransformRows(X& x, const DecodeArgs& a, int s, int32_t first_row, ReconstructShared& sh) {
  const SegmentJob& job = a.jobs[s];
  const SegmentFrame& f = a.frames[s];
  const ProfileTables& p = a.profile;
  const size_t C = static_cast<size_t>(job.channels);
  const size_t slice = static_cast<size_t>(job.layer) * 2 + static_cast<size_t>(job.kv);
  const int16_t* basis = p.bases + slice * C * C;
  const float* mean = p.transform_means + slice * C;
  int32_t* sums = job.sums + static_cast<size_t>(first_row) * C;  // the tile's rows
  typename X::template Local<MmaLane> lane(x);
  ResidualSums(x, lane, job, f, basis, first_row, sums);
  x.Sync();
  ComponentTileRows(
      x, a, s, first_row, sh,
      [&](int32_t r, int32_t row, size_t c) {
        return ComponentValue(job, f, basis, c, row, mean[c], sums[static_cast<size_t>(r) * C + c]);
      },
      [](int32_t, const float*, int) {});
}

// Predicted chunks (docs/format.md, "Scheme 4"), from the block of the chunk's first segment's tile: each
// slice in order, each of the tile's rows predicted from its input slices' integer rows (the ring), its
// residual added as the transform's, its own integer row kept for the slices after it, then stored.
template <typename X>
KVSTREAM_HD void PredictedRows(X& x, const DecodeArgs& a, int s0, int32_t first_row, ReconstructShared& sh) {
  const ProfileTables& p = a.profile;
  const int slices = a.jobs[s0].predicted_slices;  // the chunk's layers [0, layer_end)
  for (int k = 0; k < slices; ++k) {
    if (a.errors[s0 + k] != kGpuOk) return;  // the chunk's later slices would predict from a failed one
  }
  const size_t C = static_cast<size_t>(p.channels);
  int16_t* ring = a.jobs[s0].predictor_ring;
  // The tile's sums: one array per predictor block, then the residual's (kPredictedSumArrays).
  int32_t* tile_sums = a.jobs[s0].sums + static_cast<size_t>(first_row / kTileRows) * kPredictedSumArrays * kTileRows * C;
  const auto sums_of = [&](int array) { return tile_sums + static_cast<size_t>(array) * kTileRows * C; };
  typename X::template Local<MmaLane> lane(x);
  for (int slice = 0; slice < slices; ++slice) {
    const int s = s0 + slice;
    const SegmentJob& job = a.jobs[s];
    const SegmentFrame& f = a.frames[s];
    int inputs[3];
    size_t first_block = 0;
    const int blocks = ::kvstream::PredictorInputs(slice, inputs, &first_block);
    const int16_t* basis = p.residual_bases + static_cast<size_t>(slice) * C * C;
    for (int b = 0; b < blocks; ++b) {
      const int16_t* weights = p.predictor + (first_block + static_cast<size_t>(b)) * C * C;
      const size_t slot = static_cast<size_t>(::kvstream::PredictorRingSlot(inputs[b]));
      int32_t* out = sums_of(b);
      TileSums(x, lane, static_cast<int>(C), static_cast<int>(C), /*a_bytes=*/false, p.predictor_bytes != 0,
               [&](int r, int k) -> int32_t {
                 const int32_t row = first_row + r;
                 if (row < job.sink_rows || row >= job.tokens) return 0;
                 return ring[(static_cast<size_t>(row - job.sink_rows) * 4 + slot) * C + static_cast<size_t>(k)];
               },
               [&](int k, int c) { return static_cast<int32_t>(weights[static_cast<size_t>(k) * C + static_cast<size_t>(c)]); },
               [&](int r, int c, int32_t v) { out[static_cast<size_t>(r) * C + static_cast<size_t>(c)] = v; });
    }
    int32_t* residual = sums_of(kPredictedSumArrays - 1);
    ResidualSums(x, lane, job, f, basis, first_row, residual);
    x.Sync();
    const float* inv_grid = p.input_scales + static_cast<size_t>(slice) * C;
    const size_t own_slot = static_cast<size_t>(::kvstream::PredictorRingSlot(slice));
    ComponentTileRows(
        x, a, s, first_row, sh,
        [&](int32_t r, int32_t row, size_t c) {
          const size_t at = static_cast<size_t>(r) * C + c;
          float base = p.bias[static_cast<size_t>(slice) * C + c];
          for (int b = 0; b < blocks; ++b) {
            base = codec::AddPrediction(base, sums_of(b)[at], p.predictor_scales[(first_block + static_cast<size_t>(b)) * C + c]);
          }
          return ComponentValue(job, f, basis, c, row, base, residual[at]);
        },
        // The row's integer inputs for the slices after it (before RoPE).
        [&](int32_t row, const float* y, int lane_index) {
          if (row < job.sink_rows) return;
          int16_t* z = ring + (static_cast<size_t>(row - job.sink_rows) * 4 + own_slot) * C;
          for (size_t c = static_cast<size_t>(lane_index); c < C; c += kWarpSize) z[c] = codec::PredictorInput(y[c], inv_grid[c]);
        });
  }
}

struct ReconstructLane {
  uint32_t escapes_before;  // escapes of the row before this lane's 32 channels
  bool escape;
  uint8_t symbol;
  int32_t channel;
};

template <typename X>
KVSTREAM_HD void ReconstructKernel(X& x, const DecodeArgs& a, const TileMap& tiles, ReconstructShared& shared) {
  const int s = SegmentOfTile(tiles, a.segments, static_cast<uint32_t>(x.block()));
  if (a.errors[s] != kGpuOk) return;
  const SegmentJob& job = a.jobs[s];
  const SegmentFrame& f = a.frames[s];
  const int32_t first_row = static_cast<int32_t>(static_cast<uint32_t>(x.block()) - tiles.tile_first[s]) * kRowsPerTile;
  if (job.kind == SegmentKind::kTransform) return TransformRows(x, a, s, first_row, shared);
  if (job.kind == SegmentKind::kPredicted) {
    // A predicted chunk's slices depend on each other: its first segment's tiles take every slice.
    if (job.layer == 0 && job.kv == 0) PredictedRows(x, a, s, first_row, shared);
    return;
  }
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
                   value = HalfToFloat(static_cast<uint16_t>(LoadU16(job.bytes + f.stream[0].escapes + 2 * static_cast<size_t>(rank))));
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
