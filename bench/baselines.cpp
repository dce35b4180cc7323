// The simple baselines: fp16 passthrough, per-token int8 with fp16 scales, and zstd over fp16 bytes.
// Each chunk starts with a 12-byte header (layers, tokens, channels as little-endian u32) so that a
// chunk decodes on its own; the header is counted in the size like every other byte.
#include <zstd.h>

#include <cstring>

#include "bench/baselines.h"
#include "common/half.h"
#include "common/int8_row.h"

namespace kvstream::bench {
namespace {

constexpr size_t kHeaderBytes = 12;

void PutU32(std::vector<uint8_t>* out, uint32_t x) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<uint8_t>(x >> (8 * i)));
}
uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

void PutHeader(const KvChunk16& chunk, std::vector<uint8_t>* out) {
  PutU32(out, static_cast<uint32_t>(chunk.layers));
  PutU32(out, static_cast<uint32_t>(chunk.tokens));
  PutU32(out, static_cast<uint32_t>(chunk.channels));
}

Status ReadHeader(const uint8_t* data, size_t size, const KvChunk16& chunk, const char* what) {
  if (size < kHeaderBytes) {
    return Status::CorruptData(std::string(what) + ": chunk of " + std::to_string(size) +
                               " bytes is shorter than the 12-byte header");
  }
  return CheckChunkShape(chunk, GetU32(data), GetU32(data + 4), GetU32(data + 8), what);
}

class Fp16Codec final : public KvCodec {
 public:
  std::string method() const override { return "fp16"; }
  Level level() const override { return kLevelFp16; }
  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost*) const override {
    PutHeader(chunk, out);
    const size_t start = out->size();
    out->resize(start + 2 * (chunk.k.size() + chunk.v.size()));
    std::memcpy(out->data() + start, chunk.k.data(), 2 * chunk.k.size());
    std::memcpy(out->data() + start + 2 * chunk.k.size(), chunk.v.data(), 2 * chunk.v.size());
    return Status::Ok();
  }
  Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const override {
    KVSTREAM_RETURN_IF_ERROR(ReadHeader(data, size, *chunk, "fp16"));
    const size_t want = kHeaderBytes + 2 * (chunk->k.size() + chunk->v.size());
    if (size != want) {
      return Status::CorruptData("fp16: chunk is " + std::to_string(size) + " bytes, expected " + std::to_string(want));
    }
    std::memcpy(chunk->k.data(), data + kHeaderBytes, 2 * chunk->k.size());
    std::memcpy(chunk->v.data(), data + kHeaderBytes + 2 * chunk->k.size(), 2 * chunk->v.size());
    return Status::Ok();
  }
};

class Int8Codec final : public KvCodec {
 public:
  std::string method() const override { return "int8"; }
  Level level() const override { return kLevelInt8; }

  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost*) const override {
    PutHeader(chunk, out);
    const size_t row = 2 + static_cast<size_t>(chunk.channels);
    size_t pos = out->size();
    out->resize(pos + 2 * static_cast<size_t>(chunk.layers) * chunk.tokens * row);
    std::vector<float> x(static_cast<size_t>(chunk.channels));
    for (const std::vector<uint16_t>* tensor : {&chunk.k, &chunk.v}) {
      for (int64_t r = 0; r < int64_t{chunk.layers} * chunk.tokens; ++r) {
        const uint16_t* in = tensor->data() + r * chunk.channels;
        for (int c = 0; c < chunk.channels; ++c) x[c] = HalfToFloat(in[c]);
        const uint16_t scale16 = Int8RowScale(x.data(), chunk.channels);
        const float inverse_scale = Int8InverseScale(scale16);
        uint8_t* o = out->data() + pos;
        o[0] = static_cast<uint8_t>(scale16);
        o[1] = static_cast<uint8_t>(scale16 >> 8);
        for (int c = 0; c < chunk.channels; ++c) o[2 + c] = static_cast<uint8_t>(QuantizeInt8(x[c], inverse_scale));
        pos += row;
      }
    }
    return Status::Ok();
  }

  Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const override {
    KVSTREAM_RETURN_IF_ERROR(ReadHeader(data, size, *chunk, "int8"));
    const size_t row = 2 + static_cast<size_t>(chunk->channels);
    const size_t want = kHeaderBytes + 2 * static_cast<size_t>(chunk->layers) * chunk->tokens * row;
    if (size != want) {
      return Status::CorruptData("int8: chunk is " + std::to_string(size) + " bytes, expected " + std::to_string(want));
    }
    const uint8_t* p = data + kHeaderBytes;
    for (std::vector<uint16_t>* tensor : {&chunk->k, &chunk->v}) {
      for (int64_t r = 0; r < int64_t{chunk->layers} * chunk->tokens; ++r) {
        const auto scale16 = static_cast<uint16_t>(p[0] | p[1] << 8);
        uint16_t* o = tensor->data() + r * chunk->channels;
        for (int c = 0; c < chunk->channels; ++c) o[c] = FloatToHalf(DequantizeInt8(static_cast<int8_t>(p[2 + c]), scale16));
        p += row;
      }
    }
    return Status::Ok();
  }
};

class ZstdCodec final : public KvCodec {
 public:
  explicit ZstdCodec(int level) : level_(level) {}
  std::string method() const override { return "zstd-" + std::to_string(level_); }
  Level level() const override { return kLevelFp16; }

  Status Encode(const KvChunk16& chunk, std::vector<uint8_t>* out, EncodeCost*) const override {
    std::vector<uint8_t> raw(2 * (chunk.k.size() + chunk.v.size()));
    std::memcpy(raw.data(), chunk.k.data(), 2 * chunk.k.size());
    std::memcpy(raw.data() + 2 * chunk.k.size(), chunk.v.data(), 2 * chunk.v.size());
    PutHeader(chunk, out);
    const size_t start = out->size();
    out->resize(start + ZSTD_compressBound(raw.size()));
    const size_t n = ZSTD_compress(out->data() + start, out->size() - start, raw.data(), raw.size(), level_);
    if (ZSTD_isError(n)) return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
    out->resize(start + n);
    return Status::Ok();
  }

  Status Decode(const uint8_t* data, size_t size, KvChunk16* chunk) const override {
    KVSTREAM_RETURN_IF_ERROR(ReadHeader(data, size, *chunk, "zstd"));
    const size_t want = 2 * (chunk->k.size() + chunk->v.size());
    std::vector<uint8_t> raw(want);
    const size_t n = ZSTD_decompress(raw.data(), raw.size(), data + kHeaderBytes, size - kHeaderBytes);
    if (ZSTD_isError(n)) return Status::CorruptData(std::string("zstd: ") + ZSTD_getErrorName(n));
    if (n != want) {
      return Status::CorruptData("zstd: decompressed " + std::to_string(n) + " bytes, expected " + std::to_string(want));
    }
    std::memcpy(chunk->k.data(), raw.data(), 2 * chunk->k.size());
    std::memcpy(chunk->v.data(), raw.data() + 2 * chunk->k.size(), 2 * chunk->v.size());
    return Status::Ok();
  }

 private:
  int level_;
};

}  // namespace


std::unique_ptr<KvCodec> MakeFp16Codec() { return std::make_unique<Fp16Codec>(); }
std::unique_ptr<KvCodec> MakeInt8Codec() { return std::make_unique<Int8Codec>(); }
std::unique_ptr<KvCodec> MakeZstdCodec(int level) { return std::make_unique<ZstdCodec>(level); }

}  // namespace kvstream::bench
