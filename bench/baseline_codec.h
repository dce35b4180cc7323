// The baselines kvstream is compared against, as byte codecs over fp16 KV chunks: raw fp16, per-token
// int8, zstd on the fp16 bytes, and cachegen-ref (the released CacheGen configuration, cachegen_ref.h).
//
// Contract: Encode turns one chunk into self-contained bytes (every header and table the method needs is
// inside, so the size is the whole cost); Decode of those bytes fills a chunk of the same shape. Lossless
// methods reproduce the fp16 input bit for bit. Codecs are immutable and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/kv_chunk.h"
#include "kvstream/level.h"
#include "kvstream/status.h"

namespace kvstream::bench {

// What an encode cost beyond its bytes, for the benchmark's columns.
struct EncodeStats {
  // Bits the method is charged for (bytes * 8 unless the method's reference layout differs, see
  // cachegen_ref.h); 0 means "bytes * 8".
  double charged_bits = 0;
  // Entropy-stage figures: coded bits and the empirical entropy of the symbols under the tables used.
  // Both 0 when the method has no entropy stage of its own.
  double entropy_coded_bits = 0;
  double entropy_ideal_bits = 0;
};

class BaselineCodec {
 public:
  virtual ~BaselineCodec() = default;
  virtual std::string method() const = 0;  // "fp16", "int8", "zstd-3", "zstd-19", "cachegen-ref"
  virtual Level level() const = 0;
  virtual Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeStats* stats) const = 0;
  // `chunk` must already have the encoded shape (layers, tokens, channels) and sized k/v.
  virtual Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const = 0;
};

std::unique_ptr<BaselineCodec> MakeFp16Codec();
// Per (K/V, layer, token): an fp16 scale max|x|/127 and round(x/scale) as int8.
std::unique_ptr<BaselineCodec> MakeInt8Codec();
// zstd at `level` over the chunk's fp16 bytes (K then V).
std::unique_ptr<BaselineCodec> MakeZstdCodec(int level);

// Checks that a decode target has the shape a header announced; `what` names the codec.
Status CheckChunkShape(const KvChunk16& chunk, uint32_t layers, uint32_t tokens, uint32_t channels,
                       const char* what);

}  // namespace kvstream::bench
