// What the GPU decoder's kernels are handed: plain arrays that the host fills from chunk headers it has
// already validated (codec::ReadContainer) and from a profile, with pointers into the memory the kernels
// read (device memory on a GPU, host memory under the CPU launcher). Nothing here owns memory.
#pragma once

#include <cstdint>

#include "codec/common/kv_address.h"

namespace kvstream::cuda {

enum class SegmentKind : uint8_t { kFp16 = 0, kInt8 = 1, kChannelUniform = 2, kTransform = 3, kPredicted = 4 };

// The largest in-chunk bank the GPU decoder takes (the encoder writes at most 16 tables; the format
// allows 255): each segment of such chunks has room for this many slot tables.
inline constexpr int kMaxInChunkTables = 16;
inline constexpr int kSlotsPerTable = 4096;
// A coded row's entry in a chunk's row map (chunks with fine rows): its stream, and its row within it.
inline constexpr uint32_t kFineRowBit = 1u << 31;

// One (chunk, layer, K/V) segment, as the host knows it from the chunk's header and index.
struct SegmentJob {
  const uint8_t* bytes;      // the segment's payload (size bytes)
  uint32_t size;
  int32_t layer;
  int32_t kv;                // 0 keys, 1 values
  SegmentKind kind;
  uint8_t stored_bf16;       // fp16 level: the payload is bf16
  uint8_t in_chunk_tables;   // channel-uniform: the segment carries its step, means and bank
  int8_t level;              // lossy level, 1..15
  int8_t fine_level;         // transform with fine rows: their level; else 0 (one stream)
  int32_t tokens;
  int32_t channels;
  int32_t sink_rows;
  int32_t stream_rows[2];    // coded rows in the stream at `level` and in the fine stream
  int64_t token_begin;       // context position of the segment's token 0
  const uint32_t* row_map;   // fine rows: per coded row, kFineRowBit if fine | its row in its stream
  const float* rope;         // transform and predicted keys: per token, the pairs' cosines then their sines
  int16_t* predictor_ring;   // predicted, a chunk's first segment: per coded row, 4 slices' integer rows
  int32_t predicted_slices;  // predicted, a chunk's first segment: the slices it reconstructs, 2 layer_end
  int32_t* sums;             // scratch for the exact sums: transform, per token [channels]; predicted, the
                             // chunk's first segment, per 32-row tile 4 x [32][channels]
  uint8_t* symbols;          // scratch for every coded row's symbols (the fine stream's after the other's)
  uint32_t* row_escapes;     // scratch for a count per coded row (stream order), then their prefix
  uint16_t* channel_table;   // scratch for channels table numbers (in-chunk tables), or null
  uint32_t* tables;          // in-chunk tables: scratch for kMaxInChunkTables slot tables
};

// One rANS stream of a lossy segment and its escapes, as the frame kernel finds them.
struct StreamFrame {
  uint32_t offset;           // within the segment
  uint32_t bytes;
  uint32_t escapes;          // offset of its escape values
  uint32_t escape_count;
  uint32_t period;           // symbols per row: channels, or the level's kept components
  uint32_t symbols;          // its first symbol in SegmentJob::symbols
  uint32_t first_row;        // its first row in SegmentJob::row_escapes
  float scaled_step;         // transform: TransformStepScale of its level's step
  const uint16_t* channel_table;  // per symbol of a row: its table's number under SegmentFrame::slot_base
};

// What the frame kernel learns from a lossy segment's own bytes, for the kernels after it.
struct SegmentFrame {
  StreamFrame stream[2];     // [1]: the fine rows' stream, when the chunk has them
  uint32_t sinks;
  uint32_t means;            // in-chunk tables: the f16 means
  uint32_t bank;             // in-chunk tables: the table bank
  uint32_t table_count;
  float step;                // in-chunk tables
  const uint32_t* slot_base; // the slot tables the channel table numbers index
};

// A profile's data as DeviceProfile uploads it: channel-uniform means, steps and tables; the transform
// section's means, bases, steps, kept counts and tables. Every level's bank of every scheme is one run of
// slot tables, numbered from 0.
struct ProfileTables {
  int32_t layers = 0;
  int32_t channels = 0;
  int32_t levels = 0;
  const float* means = nullptr;             // [layer][kv][channel]
  const float* steps = nullptr;             // [level - 1][layer][kv][channel]
  const uint16_t* channel_table = nullptr;  // [level - 1][layer][kv][channel]: table number
  const uint32_t* slots = nullptr;          // [table][4096]
  // The transform section (null without one).
  int32_t head_dim = 0;
  int32_t rope_layout = 0;                  // 0 interleaved pairs, 1 rotate-half
  const float* transform_means = nullptr;   // [layer][kv][channel]
  const int16_t* bases = nullptr;           // [layer][kv][component][channel]
  const float* transform_steps = nullptr;   // [level - 1][layer][kv]
  const uint32_t* transform_kept = nullptr; // [level - 1][layer][kv]
  const uint16_t* transform_table = nullptr;  // [level - 1][layer][kv][component]
  // The prediction section (null without one); slices s = 2 layer + kv.
  const float* input_scales = nullptr;      // [slice][channel]
  const float* bias = nullptr;              // [slice][channel]
  const int16_t* predictor = nullptr;       // [block][input channel][channel], blocks in slice order
  int32_t predictor_bytes = 0;              // 1: every predictor weight lies within int8
  const float* predictor_scales = nullptr;  // [block][channel]
  const int16_t* residual_bases = nullptr;  // [slice][component][channel]
  const uint32_t* prediction_kept = nullptr;    // [level - 1][slice]
  const uint16_t* prediction_table = nullptr;   // [level - 1][slice][component]
};

// Per-segment outcome, 0 when it decoded (GpuDecodeError).
enum GpuDecodeError : uint32_t {
  kGpuOk = 0,
  kGpuFrameTruncated,      // a field of the frame runs past the segment
  kGpuFrameLeftOver,       // bytes after the escapes
  kGpuBadStep,
  kGpuBadMean,
  kGpuBadBank,             // a table's range, frequencies or an index
  kGpuTooManyTables,       // an in-chunk bank above kMaxInChunkTables
  kGpuEscapeCount,         // escape_count above the coded values, or not what the stream holds
  kGpuBadSize,             // fp16 / int8: the payload size does not fit the shape
  kGpuRansHeader,          // the stream's header is truncated, its padding not 0, or its tail too long
  kGpuRansTruncated,       // a state needs a word past the end
  kGpuRansLeftOver,        // words left after the last symbol
  kGpuRansFinalState,      // a lane does not end where the encoder started it
  kGpuDestination,         // a position outside the destination, or its block-table entry outside the blocks
  kGpuRansHandover,        // a chained stream starts from a state below 2^16
  kGpuErrorCount
};

struct DecodeArgs {
  const SegmentJob* jobs = nullptr;
  SegmentFrame* frames = nullptr;
  uint32_t* errors = nullptr;            // per segment
  int32_t segments = 0;
  ProfileTables profile;
  codec::KvAddress destination{};
};

KVSTREAM_HD bool IsEntropyCoded(SegmentKind kind) {
  return kind == SegmentKind::kChannelUniform || kind == SegmentKind::kTransform || kind == SegmentKind::kPredicted;
}
KVSTREAM_HD int StreamCount(const SegmentJob& job) { return job.fine_level > 0 ? 2 : 1; }

}  // namespace kvstream::cuda
