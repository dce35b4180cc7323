// cachegen-ref: a re-implementation of the RELEASED CacheGen configuration (LMCache's "cachegen"
// serializer, as in UChi-JCL/CacheGen and LMCache, 2024), the baseline kvstream must beat.
//
// What it reproduces, from the released code:
//   * quantiser: per (K/V, layer, token) one scale m = max|x| over all channels (kept in fp16, the KV
//     dtype); with B bins and M = B/2 - 1, symbol = round(x * M / m + M) in [0, 2M], reconstruction
//     (symbol - M) / M * m. Bins per layer: keys B1 for layers [0, a), B2 for [a, b), B3 after; values V1
//     for [0, c), V2 after; a, b, c = 10, 20, 2 of 32 layers, scaled to the model's depth (rounded).
//     Levels: 1 = all 32 bins (QUANT_LEVEL 3), 2 = keys 32/16/16 and values 32/16 (the default
//     configuration), 3 = keys 16/16/12 and values 16/12 (QUANT_LEVEL 1).
//   * tables: one CDF per (K/V, layer, channel), built from the chunk's own symbols and shipped inside
//     it: max_bins + 1 int16 entries (max_bins = the largest B of K, resp. V), cdf[i] =
//     (0xFFFF - max_bins) * count(<i) / n + i; the coder's probability of s is (cdf[s+1] - cdf[s]) / 2^16,
//     with 2^16 as the upper end of the last symbol.
//   * streams: one coded stream per (K/V, layer, channel) and 256-token block, with an int32 length per
//     stream per block.
// Entropy stage: rANS (codec/common/rans.h) with per-chunk 12-bit tables derived from the shipped CDFs,
// one segment per K/V and 256-token block (symbols in [token][layer][channel] order). Its size is checked against the ideal arithmetic-
// coding size under the released 16-bit CDFs (CacheGenRefSize::ac16_ideal_bits).
//
// Size accounting ("charged" bytes) follows the released layout: header + fp16 scales + int16 CDFs +
// int32 lengths per (stream, block) + coded payload. The bytes this codec actually writes replace the
// released per-channel length table with a per-segment one; the charge uses the released table's size.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "measure/kv_codec.h"

namespace kvstream::bench {

inline constexpr int kCacheGenRefLevels = 3;
inline constexpr int kCacheGenRefBlockTokens = 256;  // CACHEGEN_GPU_MAX_TOKENS_PER_CHUNK

struct CacheGenRefConfig {
  int key_first_layers = 0, key_second_layers = 0;
  int key_first_bins = 0, key_second_bins = 0, key_third_bins = 0;
  int value_first_layers = 0;
  int value_first_bins = 0, value_second_bins = 0;

  // level in [1, kCacheGenRefLevels]; n_layers >= 1.
  static Result<CacheGenRefConfig> ForLevel(int level, int n_layers);
  int key_bins(int layer) const;
  int value_bins(int layer) const;
};

// Where a chunk's bytes go, in the released layout.
struct CacheGenRefSize {
  int64_t header_bytes = 0;
  int64_t scale_bytes = 0;    // fp16 max per (K/V, layer, token)
  int64_t cdf_bytes = 0;      // int16 CDF entries per (K/V, layer, channel)
  int64_t length_bytes = 0;   // int32 per (K/V, layer, channel) stream per 256-token block
  int64_t payload_bytes = 0;  // rANS-coded symbols
  double rans_ideal_bits = 0;  // the symbols' cost under the 12-bit rANS tables used
  double ac16_ideal_bits = 0;  // the symbols' cost under the released 16-bit CDFs (ideal arithmetic coder)
  int64_t charged_bytes() const { return header_bytes + scale_bytes + cdf_bytes + length_bytes + payload_bytes; }
};

class CacheGenRefCodec final : public KvCodec {
 public:
  static Result<std::unique_ptr<CacheGenRefCodec>> Create(int level, int n_layers);
  std::string method() const override { return "cachegen-ref"; }
  Level level() const override { return level_; }
  const CacheGenRefConfig& config() const { return config_; }

  // Encodes and reports the released-layout size breakdown.
  Result<CacheGenRefSize> EncodeWithSize(const KvChunk16& chunk, std::vector<uint8_t>* out) const;
  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost* stats) const override;
  Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const override;

 private:
  CacheGenRefCodec(int level, const CacheGenRefConfig& config) : level_(level), config_(config) {}
  int level_;
  CacheGenRefConfig config_;
};

}  // namespace kvstream::bench
