// A KV transformation: what measure/ scores and bench/ times. Every method kvstream is measured with or
// against (kvstream's own levels, fp16, int8, zstd, cachegen-ref, the lab's schemes) implements KvCodec.
//
// Contract: Encode turns one fp16 chunk into self-contained bytes (every header and table the method
// needs is inside, so the size is the whole cost); Decode of those bytes fills a chunk of the same shape.
// Lossless methods reproduce the fp16 input bit for bit. Codecs are immutable and safe to share between
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/level.h"
#include "kvstream/status.h"
#include "measure/kv_chunk.h"

namespace kvstream {

// What an encode cost beyond its bytes.
struct EncodeCost {
  // Bits the method is charged for (bytes * 8 unless the method's reference layout differs, see
  // bench/cachegen_ref.h); 0 means "bytes * 8".
  double charged_bits = 0;
  // Entropy-stage figures: coded bits and the empirical entropy of the symbols under the tables used.
  // Both 0 when the method has no entropy stage of its own.
  double entropy_coded_bits = 0;
  double entropy_ideal_bits = 0;
};

class KvCodec {
 public:
  virtual ~KvCodec() = default;
  // "fp16", "int8", "kvstream", "kvstream-predicted", "zstd-3", "cachegen-ref", ...
  virtual std::string method() const = 0;
  virtual Level level() const = 0;
  virtual Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost* cost) const = 0;
  // `chunk` must already have the encoded shape (layers, tokens, channels) and sized k/v.
  virtual Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const = 0;
  // "int8", "zstd-3", "cachegen-ref-L3", "kvstream-L3": the level only where the method has several.
  std::string name() const;
};

// Checks that a decode target has the shape a header announced; `what` names the codec.
Status CheckChunkShape(const KvChunk16& chunk, uint32_t layers, uint32_t tokens, uint32_t channels, const char* what);

}  // namespace kvstream
