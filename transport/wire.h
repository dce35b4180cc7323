// Little-endian encoding of control-message fields with every read bounds-checked: a reader never reads
// past its buffer and never trusts a count without checking it against a limit and the bytes left.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::transport {

class WireWriter {
 public:
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Int(v, 2); }
  void U32(uint32_t v) { Int(v, 4); }
  void U64(uint64_t v) { Int(v, 8); }
  void I8(int8_t v) { U8(static_cast<uint8_t>(v)); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    U64(bits);
  }
  void Raw(const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  // u32 length + bytes.
  void Bytes(const void* data, size_t size) {
    U32(static_cast<uint32_t>(size));
    Raw(data, size);
  }
  void String(const std::string& s) { Bytes(s.data(), s.size()); }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  void Int(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t> out_;
};

// Reads fields in order; the first failure sticks and names the field, so a decoder reads everything and
// checks status() once.
class WireReader {
 public:
  WireReader(const uint8_t* data, size_t size, std::string what) : p_(data), left_(size), what_(std::move(what)) {}

  uint8_t U8(const char* field) { return static_cast<uint8_t>(Int(field, 1)); }
  uint16_t U16(const char* field) { return static_cast<uint16_t>(Int(field, 2)); }
  uint32_t U32(const char* field) { return static_cast<uint32_t>(Int(field, 4)); }
  uint64_t U64(const char* field) { return Int(field, 8); }
  int8_t I8(const char* field) { return static_cast<int8_t>(U8(field)); }
  double F64(const char* field) {
    const uint64_t bits = U64(field);
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
  }
  void Raw(const char* field, void* out, size_t size) {
    if (!Need(field, size)) {
      std::memset(out, 0, size);
      return;
    }
    std::memcpy(out, p_, size);
    Advance(size);
  }
  std::vector<uint8_t> Bytes(const char* field, uint32_t limit) {
    const uint32_t n = U32(field);
    if (!status_.ok()) return {};
    if (n > limit) {
      Fail(std::string(field) + " length = " + std::to_string(n) + " exceeds limit " + std::to_string(limit));
      return {};
    }
    if (!Need(field, n)) return {};
    std::vector<uint8_t> v(p_, p_ + n);
    Advance(n);
    return v;
  }
  std::string String(const char* field, uint32_t limit) {
    auto b = Bytes(field, limit);
    return std::string(b.begin(), b.end());
  }
  // A count of items of at least `min_item_bytes` each: checked against `limit` and the bytes left.
  uint32_t Count(const char* field, uint32_t limit, size_t min_item_bytes) {
    const uint32_t n = U32(field);
    if (!status_.ok()) return 0;
    if (n > limit) {
      Fail(std::string(field) + " = " + std::to_string(n) + " exceeds limit " + std::to_string(limit));
      return 0;
    }
    if (static_cast<uint64_t>(n) * min_item_bytes > left_) {
      Fail(std::string(field) + " = " + std::to_string(n) + " needs more bytes than the " +
           std::to_string(left_) + " left");
      return 0;
    }
    return n;
  }
  void Fail(const std::string& message) {
    if (status_.ok()) status_ = Status::CorruptData(what_ + ": " + message);
  }
  // Call after the last field: trailing bytes are an error too.
  Status Finish() {
    if (status_.ok() && left_ != 0) Fail(std::to_string(left_) + " unexpected trailing bytes");
    return status_;
  }
  const Status& status() const { return status_; }

 private:
  bool Need(const char* field, size_t n) {
    if (!status_.ok()) return false;
    if (n > left_) {
      Fail(std::string(field) + " truncated: needs " + std::to_string(n) + " bytes, " + std::to_string(left_) + " left");
      return false;
    }
    return true;
  }
  void Advance(size_t n) {
    p_ += n;
    left_ -= n;
  }
  uint64_t Int(const char* field, int n) {
    if (!Need(field, static_cast<size_t>(n))) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{p_[i]} << (8 * i);
    Advance(static_cast<size_t>(n));
    return v;
  }
  const uint8_t* p_;
  size_t left_;
  std::string what_;
  Status status_;
};

}  // namespace kvstream::transport
