// The chunk container's constants and the bounds-checked little-endian byte reader/writer that the
// encoder, the decoder and the profile code share. docs/format.md is the specification; this file is
// its transcription, so a change here is a format change (bump kChunkVersion / kProfileVersion).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/status.h"

namespace kvstream::codec {

inline constexpr uint8_t kChunkMagic[4] = {'K', 'V', 'C', 'K'};
// The only version read (docs/format.md, "Version history"): 2 added sink rows (header byte 13); 3 rANS
// streams of 16 lanes; 4 their states stored by bit length; 5 rANS tails and spread slots; 6 all-tail short
// streams; 7 removed the cachegen-token scheme.
inline constexpr uint16_t kChunkVersion = kChunkFormatVersion;
inline constexpr uint32_t kChunkFixedHeaderBytes = 64;
inline constexpr uint32_t kSegmentEntryBytes = 24;
inline constexpr uint8_t kChunkFlagInChunkTables = 0x01;
// Transform and predicted chunks: some tokens' rows are coded at a finer level (header byte 14), listed by
// a bitmap after the segment index; each segment then carries a second rANS stream for them.
inline constexpr uint8_t kChunkFlagFineRows = 0x02;
inline size_t FineRowMapBytes(int64_t tokens) { return static_cast<size_t>((tokens + 7) / 8); }

// Channel-uniform chunks keep the first kSinkPositions positions of a context exact (fp16): attention
// sinks dominate the quantisation error (lab/rate-distortion.md). A chunk's sink rows are its tokens
// at positions < kSinkPositions; the header records their count and the decoder requires this value.
inline constexpr int64_t kSinkPositions = 4;
inline int64_t SinkRows(int64_t token_begin, int64_t tokens) {
  if (token_begin >= kSinkPositions) return 0;
  return kSinkPositions - token_begin < tokens ? kSinkPositions - token_begin : tokens;
}

inline constexpr uint8_t kProfileMagic[4] = {'K', 'V', 'P', 'F'};
// The only version read: 2 added the optional transform section; 3 the optional prediction section; 4 the
// fine rows of the measured qualities; 5 dropped the cachegen-token fields of each level.
inline constexpr uint16_t kProfileVersion = 5;

// Symbol alphabet of the lossy schemes: 0 is the escape (the value follows as fp16 in the segment's
// escape list); s in [1, 255] is the integer q = s - 128.
inline constexpr uint8_t kEscapeSymbol = 0;
inline constexpr int kSymbolZero = 128;
inline constexpr int kMaxAbsQ = 127;

// The first escape symbol in [from, end), or null. Decoders walk a row's escapes with it (memchr's
// vector search: a row rarely has one, and a loop over its bytes cost a channel-uniform decode 3-4 %).
inline const uint8_t* FindEscapeSymbol(const uint8_t* from, const uint8_t* end) {
  return static_cast<const uint8_t*>(std::memchr(from, kEscapeSymbol, static_cast<size_t>(end - from)));
}

// Appends little-endian fields to a byte vector.
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<uint8_t>* out) : out_(out) {}
  void U8(uint8_t v) { out_->push_back(v); }
  void U16(uint16_t v) { Raw(&v, 2); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void F32(float v) { Raw(&v, 4); }
  void F64(double v) { Raw(&v, 8); }
  // The host is little-endian (x86-64, aarch64); a big-endian port would byte-swap here.
  void Raw(const void* p, size_t n) {
    if (n == 0) return;
    // resize + memcpy rather than insert: GCC 12 warns falsely on insert into a cleared vector.
    const size_t at = out_->size();
    out_->resize(at + n);
    std::memcpy(out_->data() + at, p, n);
  }
  size_t size() const { return out_->size(); }

 private:
  std::vector<uint8_t>* out_;
};

// Reads little-endian fields from [data, data + size); every read is bounds-checked and a short buffer
// gives CorruptData naming `what` (the structure being read) and the field.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string what) : data_(data), size_(size), what_(std::move(what)) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* cursor() const { return data_ + pos_; }

  Status Need(size_t n, const char* field) const {
    if (n > size_ - pos_) {
      return Status::CorruptData(what_ + ": " + field + " needs " + std::to_string(n) + " bytes at offset " +
                                 std::to_string(pos_) + " but only " + std::to_string(size_ - pos_) + " remain");
    }
    return Status::Ok();
  }
  Status U8(uint8_t* v, const char* field) { return Read(v, 1, field); }
  Status U16(uint16_t* v, const char* field) { return Read(v, 2, field); }
  Status U32(uint32_t* v, const char* field) { return Read(v, 4, field); }
  Status U64(uint64_t* v, const char* field) { return Read(v, 8, field); }
  Status F32(float* v, const char* field) { return Read(v, 4, field); }
  Status F64(double* v, const char* field) { return Read(v, 8, field); }
  Status Read(void* v, size_t n, const char* field) {
    KVSTREAM_RETURN_IF_ERROR(Need(n, field));
    std::memcpy(v, data_ + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  // Returns a pointer to the next n bytes and skips them.
  Status Span(size_t n, const uint8_t** p, const char* field) {
    KVSTREAM_RETURN_IF_ERROR(Need(n, field));
    *p = data_ + pos_;
    pos_ += n;
    return Status::Ok();
  }
  const std::string& what() const { return what_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
};

// a * b, or false when the product exceeds `limit` (both non-negative).
inline bool MulWithin(uint64_t a, uint64_t b, uint64_t limit, uint64_t* product) {
  if (a != 0 && b > limit / a) return false;
  *product = a * b;
  return *product <= limit;
}

}  // namespace kvstream::codec
