// Bounds-checked reading of model files: the whole file in memory and a cursor whose every read names
// the file and the field it was reading, so a truncated or lying file gives a precise error, not a crash.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "common/whole_file.h"  // ReadWholeFile, which every loader reads its file with
#include "kvstream/status.h"

namespace kvstream::model {

// A read cursor over bytes owned elsewhere. Errors read "FILE: FIELD: what".
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, std::string file) : data_(data), size_(size), file_(std::move(file)) {}

  size_t offset() const { return offset_; }
  size_t size() const { return size_; }
  size_t remaining() const { return size_ - offset_; }
  const uint8_t* data() const { return data_; }
  const std::string& file() const { return file_; }

  Status Seek(size_t offset, const char* field) {
    if (offset > size_) return Error(field, "offset " + std::to_string(offset) + " is past the end of the file (" + std::to_string(size_) + " bytes)");
    offset_ = offset;
    return Status::Ok();
  }

  template <typename T>
  Result<T> Read(const char* field) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (remaining() < sizeof(T)) return Truncated(field, sizeof(T));
    T v;
    std::memcpy(&v, data_ + offset_, sizeof(T));
    offset_ += sizeof(T);
    return v;
  }

  // Returns a pointer to the next `n` bytes and advances past them.
  Result<const uint8_t*> Take(uint64_t n, const char* field) {
    if (n > remaining()) return Truncated(field, n);
    const uint8_t* p = data_ + offset_;
    offset_ += static_cast<size_t>(n);
    return p;
  }

  Result<std::string> ReadString(uint64_t n, const char* field) {
    KVSTREAM_ASSIGN_OR_RETURN(const uint8_t* p, Take(n, field));
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }

  Status Error(const std::string& field, const std::string& what) const {
    return Status::CorruptData(file_ + ": " + field + ": " + what);
  }
  Status Truncated(const std::string& field, uint64_t wanted) const {
    return Status::CorruptData(file_ + ": " + field + ": file truncated: needs " + std::to_string(wanted) +
                               " bytes at offset " + std::to_string(offset_) + ", only " +
                               std::to_string(remaining()) + " left");
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
  std::string file_;
};

}  // namespace kvstream::model
