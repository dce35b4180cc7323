// What the GPU decoder's kernels are handed: plain arrays that the host fills from chunk headers it has
// already validated (codec::ReadContainer) and from a profile, with pointers into the memory the kernels
// read (device memory on a GPU, host memory under the CPU launcher). Nothing here owns memory.
#pragma once

#include <cstdint>

#include "codec/common/kv_address.h"

namespace kvstream::cuda {

enum class SegmentKind : uint8_t { kFp16 = 0, kInt8 = 1, kChannelUniform = 2 };

// The largest in-chunk bank the GPU decoder takes (the encoder writes at most 16 tables; the format
// allows 255): each segment of such chunks has room for this many slot tables.
inline constexpr int kMaxInChunkTables = 16;
inline constexpr int kSlotsPerTable = 4096;

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
  int32_t tokens;
  int32_t channels;
  int32_t sink_rows;
  int64_t token_begin;       // context position of the segment's token 0
  uint8_t* symbols;          // scratch for (tokens - sink_rows) * channels decoded symbols
  uint32_t* row_escapes;     // scratch for tokens - sink_rows per-row escape counts, then their prefix
  uint16_t* channel_table;   // scratch for channels table numbers (in-chunk tables), or null
  uint32_t* tables;          // in-chunk tables: scratch for kMaxInChunkTables slot tables
};

// What the frame kernel learns from a lossy segment's own bytes, for the kernels after it.
struct SegmentFrame {
  uint32_t stream;           // offsets within the segment
  uint32_t stream_bytes;
  uint32_t escapes;
  uint32_t escape_count;
  uint32_t sinks;
  uint32_t means;            // in-chunk tables: the f16 means
  uint32_t bank;             // in-chunk tables: the table bank
  uint32_t table_count;
  float step;                // in-chunk tables
  const uint32_t* slot_base;        // slot tables the channel table numbers index
  const uint16_t* channel_table;    // per channel: its table's number under slot_base
};

// A profile's channel-uniform data, as DeviceProfile uploads it.
struct ProfileTables {
  int32_t layers = 0;
  int32_t channels = 0;
  int32_t levels = 0;
  const float* means = nullptr;          // [layer][kv][channel]
  const float* steps = nullptr;          // [level - 1][layer][kv][channel]
  const uint32_t* slots = nullptr;       // [model][4096] slot tables, every level's bank after the other
  const uint16_t* channel_table = nullptr;  // [level - 1][layer][kv][channel]: model number under slots
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

}  // namespace kvstream::cuda
