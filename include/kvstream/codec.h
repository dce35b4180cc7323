// kvstream/codec.h — encode and decode one KV chunk into kvstream's self-describing container.
//
// A chunk is the keys and values of every layer for tokens [token_begin, token_begin + N) of one
// context. It is encoded on its own (no state shared with other chunks), so any chunk decodes by itself
// and in any order. The byte format is specified in docs/format.md; the scheme and levels in docs/codec.md.
//
// Contract:
//   * EncodeChunk reads the caller's views in place (any dtype, any strides) and returns the container
//     bytes. It never modifies its inputs.
//   * DecodeChunk treats its bytes as untrusted: every size, count and offset is checked against the
//     buffer and against DecodeLimits before use, every CRC32C is verified, and a malformed chunk gives
//     StatusCode::kCorruptData (or kResourceExhausted for a limit, kUnsupported for an unknown version or
//     scheme) with a message naming the field, the value and the limit. It writes only inside the
//     destination views, and writes nothing if the header or index is bad (a bad segment may leave
//     earlier layers written).
//   * Lossy levels reconstruct exactly the fp32 values docs/format.md defines bit for bit, rounded once to
//     the destination dtype (round to nearest even; only NaN payloads may vary). Level fp16 is bit-exact
//     for fp16 and bf16 inputs (stored in their own 16-bit format) and rounds fp32 inputs to fp16.
//   * All functions are thread-safe: they share no state; a Profile is immutable and may be shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <functional>
#include <string>
#include <vector>

#include "kvstream/kv_destination.h"
#include "kvstream/level.h"
#include "kvstream/profile.h"
#include "kvstream/scheme.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

// The chunk format version this build writes and the only one it reads (docs/format.md, "Version
// history"); a chunk of another version gives kUnsupported, "unsupported version".
inline constexpr int kChunkFormatVersion = 7;

// Runs task(0) .. task(count - 1), possibly concurrently, and returns when all have finished. Lets a
// caller hand the codec its own thread pool; the codec starts no threads when one is given.
using ParallelFor = std::function<void(size_t count, const std::function<void(size_t)>& task)>;

// One chunk to encode. keys and values are [layers][tokens][channels] host views of equal shape.
struct ChunkInput {
  TensorView keys;
  TensorView values;
  int64_t token_begin = 0;                // position of the chunk's first token in its context
  const int32_t* token_ids = nullptr;     // the chunk's token ids (tokens of them); required for kLevelText
  // How much attention each token received (tokens of them, higher = more), e.g. KvCache::Importance:
  // what EncodeOptions::fine_min_importance compares with.
  const float* importance = nullptr;
};

// What the entropy stage of an encoded chunk cost, summed over its lossy segments (zero for fp16, int8
// and text). coded_bits / ideal_bits - 1 is the rANS overhead over the empirical entropy of the symbols
// under the tables used.
struct EncodeStats {
  uint64_t coded_symbols = 0;   // rANS-coded symbols (escapes included, sink rows excluded)
  double coded_bits = 0;        // 8 x the rANS streams' bytes
  double ideal_bits = 0;        // sum over symbols of -log2(p) under the symbol's table (RansIdealBits)
  uint64_t escapes = 0;         // values sent as fp16 escapes
  uint64_t sink_values = 0;     // values of sink rows stored exact as fp16
  uint64_t table_bytes = 0;     // in-chunk parameters and table banks (0 with a profile)
};

struct EncodeOptions {
  Level level = 1;                        // see kvstream/level.h; lossy levels 1..ladder size
  // Entropy tables and quantisation parameters learned offline. Null (default): the chunk carries
  // compact tables of its own (a few hundred bytes per layer and K/V). Must match the chunk's shape.
  const Profile* profile = nullptr;
  QuantScheme scheme = QuantScheme::kChannelUniform;  // ignored by fp16, int8 and text
  // Fine rows (transform and predicted schemes only; ignored by the others and when fine_level is not
  // finer than level): the coded tokens whose ChunkInput::importance (required then) is at least
  // fine_min_importance are coded at fine_level. Errors in the few tokens attention concentrates on cost
  // the most, so this buys more quality per bit than a finer level everywhere (lab/rate-distortion.md,
  // "Fine rows"). FineRowsThreshold picks the value for a share of a context's tokens. Infinity: none.
  float fine_min_importance = std::numeric_limits<float>::infinity();
  Level fine_level = 2;
  int threads = 1;                        // segments encoded concurrently; 1 = the calling thread only
  ParallelFor parallel_for;               // if set, used instead of starting `threads` std::threads
  EncodeStats* stats = nullptr;           // if set, overwritten with the chunk's entropy-stage figures
};

// Bounds on what a decoder accepts from untrusted bytes. Defaults fit any current open model with
// chunks up to 64K tokens; raise them deliberately.
struct DecodeLimits {
  int64_t max_layers = 1024;
  int64_t max_tokens = 65536;             // tokens in one chunk
  int64_t max_channels = 65536;           // kv_heads * head_dim
  int64_t max_values = int64_t{1} << 32;  // layers * tokens * channels * 2 (K and V)
  uint64_t max_chunk_bytes = uint64_t{1} << 32;
  uint64_t max_segment_bytes = uint64_t{1} << 31;
};

struct DecodeOptions {
  // Required when the chunk references a profile (ChunkInfo::profile_hash != 0); its hash must match.
  const Profile* profile = nullptr;
  DecodeLimits limits;
  int threads = 1;
  ParallelFor parallel_for;
  // Only layers [layer_begin, layer_end) (layer_end -1: through the last) are decoded and written; the
  // other segments' bytes are not read, so a chunk whose later layers have not arrived yet decodes its
  // first ones (layer-major sending). A predicted chunk's layers are predicted from the ones before, so it
  // decodes (and writes) [0, layer_end) and needs those segments. Outside the chunk's layers:
  // kInvalidArgument.
  int64_t layer_begin = 0;
  int64_t layer_end = -1;
};

enum class SegmentTensor : uint8_t { kKeys = 0, kValues = 1, kTokens = 2 };

struct SegmentInfo {
  SegmentTensor tensor = SegmentTensor::kKeys;
  uint32_t layer = 0;
  uint64_t offset = 0;                    // from the start of the chunk
  uint32_t size = 0;
  uint32_t crc32c = 0;
};

// The header and segment index of a chunk, validated (CRCs of header and segments checked).
struct ChunkInfo {
  uint16_t version = 0;
  Level level = kLevelFp16;
  QuantScheme scheme = QuantScheme::kChannelUniform;  // meaningful for lossy levels only
  DType source_dtype = DType::kF32;       // dtype of the encoded input
  DType stored_dtype = DType::kF16;       // level fp16: the 16-bit format of the payload
  bool in_chunk_tables = false;           // lossy: tables and parameters travel in the chunk
  int64_t layers = 0;
  int64_t tokens = 0;
  int64_t channels = 0;
  int64_t token_begin = 0;
  int64_t sink_rows = 0;                  // lossy: leading tokens (positions < 4) stored as exact fp16
  Level fine_level = 0;                   // 0, or the finer level of the fine rows
  std::vector<uint8_t> fine_rows;         // empty, or per token 1 if coded at fine_level, else 0
  uint64_t profile_hash = 0;              // 0 when no profile is referenced
  uint64_t total_bytes = 0;
  uint32_t header_bytes = 0;              // fixed header + segment index + fine-row map + CRC
  std::vector<SegmentInfo> segments;
};

Result<std::vector<uint8_t>> EncodeChunk(const ChunkInput& chunk, const EncodeOptions& options);

// The same chunk, written into memory the caller provides once its size is known: `allocate(n)` returns
// n writable bytes (or null: kResourceExhausted), called once, from the calling thread, after every
// segment is coded. Returns n. For callers that own the chunk's final home (a Python bytes object, a
// registered send buffer), so that it is not copied there from a vector.
using ChunkAllocator = std::function<uint8_t*(uint64_t bytes)>;
Result<uint64_t> EncodeChunkInto(const ChunkInput& chunk, const EncodeOptions& options, const ChunkAllocator& allocate);

// The fine_min_importance that selects `fraction` (in [0, 1]) of a context's tokens, `importance` holding
// one value per position from 0: the value of the round(fraction x n)-th most important of its n tokens at
// positions >= 4 (those before are stored exactly anyway; NaN counts as least important). Infinity when
// that is no token.
float FineRowsThreshold(const float* importance, int64_t tokens, double fraction);
// The share of tokens coded as fine rows when a caller does not choose (`--fine-fraction`, the Python
// encode's fine_fraction): where fine rows bought the most quality per bit (lab/rate-distortion.md).
inline constexpr double kDefaultFineFraction = 0.08;

// Decodes a chunk into keys_out and values_out, host views of any dtype and strides whose shape must be
// [layers][tokens][channels] of the chunk (an error names the dimension that differs). A text-level chunk
// holds no KV: DecodeChunk returns kInvalidArgument; use DecodeChunkTokens and recompute.
Status DecodeChunk(const uint8_t* data, size_t size, const DecodeOptions& options, const TensorView& keys_out,
                   const TensorView& values_out);

// Decodes a chunk into a host KvDestination (any layout of kvstream/kv_destination.h): token t goes to
// context position token_begin + t, every value exactly as DecodeChunk gives it. The chunk's layers and
// channels must match the destination's, and each of its positions must lie inside it (checked, with its
// block-table entry, before anything is written). The GPU decoder (kvstream/cuda.h) writes the same bits.
Status DecodeChunkInto(const uint8_t* data, size_t size, const DecodeOptions& options, const KvDestination& destination);

// Validates the header, index and every CRC without decoding; cheap (one pass of CRC32C).
Result<ChunkInfo> InspectChunk(const uint8_t* data, size_t size, const DecodeLimits& limits = {});
// The header and index only (their CRC checked, the segments' not: DecodeChunk checks each as it reads
// it): where a chunk goes before decoding it, at no cost proportional to its size.
Result<ChunkInfo> ReadChunkHeader(const uint8_t* data, size_t size, const DecodeLimits& limits = {});

// The token ids carried by a text-level chunk.
Result<std::vector<int32_t>> DecodeChunkTokens(const uint8_t* data, size_t size, const DecodeLimits& limits = {});

}  // namespace kvstream
