// The ZIP container of the KV dump (docs/kv-dump-format.md): an archive of stored (uncompressed) members, the
// layout numpy.savez writes, written and read here without a ZIP library. ZIP64 is neither written nor read: the
// writer refuses an archive that would reach 4 GiB and the reader refuses one that uses ZIP64 fields, so every
// size and offset fits the 32-bit records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::model {

// The CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) of `n` bytes, continuing from `crc` (0 to start): the
// checksum a ZIP archive keeps for each member, also used by the fuzzer that repairs mutated archives' checksums.
uint32_t ZipCrc32(const uint8_t* data, size_t n, uint32_t crc = 0);

// ---------------------------------------------------------------------------------------------------------
// Writing

// A ZIP archive of stored members, streamed to `f` (which the caller opens and closes; `path` names it in
// errors). Add each member, then Finish once; after an error the file is incomplete.
class ZipWriter {
 public:
  ZipWriter(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}

  // A member of `header` then `size` bytes at `data`; ResourceExhausted if the archive would exceed 4 GiB.
  Status Add(const std::string& name, const std::vector<uint8_t>& header, const void* data, size_t size);
  // The central directory and its end record.
  Status Finish();

 private:
  struct Entry {
    std::string name;
    uint32_t crc, size, offset;
  };
  Status Write(const uint8_t* data, size_t n);

  std::FILE* f_;
  std::string path_;
  uint64_t offset_ = 0;
  std::vector<Entry> entries_;
};

// ---------------------------------------------------------------------------------------------------------
// Reading

// A member as the central directory describes it.
struct Member {
  uint32_t crc = 0;
  uint64_t size = 0;
  uint64_t header_offset = 0;  // of its local header
};

// Where the archive's bytes are: memory (MemorySource) or a file read piece by piece (FileSource), so that each
// member's data can go straight into its destination and reading an archive takes about its size, once. Every
// read is checked against the archive's size; errors name the source.
class Source {
 public:
  Source(std::string name, uint64_t size) : name_(std::move(name)), size_(size) {}
  virtual ~Source() = default;
  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }

  // CorruptData naming `what` unless the n bytes at `offset` lie within the archive.
  Status CheckRange(uint64_t offset, uint64_t n, const std::string& what) const;
  // The n bytes at `offset` into dst.
  Status Read(uint64_t offset, uint64_t n, void* dst, const std::string& what) const;
  // The n bytes at `offset`, as a vector.
  Result<std::vector<uint8_t>> Bytes(uint64_t offset, uint64_t n, const std::string& what) const;

 private:
  // Reads a range CheckRange has accepted (n > 0).
  virtual Status ReadRange(uint64_t offset, uint64_t n, void* dst) const = 0;
  std::string name_;
  uint64_t size_;
};

// An archive in memory the caller keeps alive, named `name` in errors.
class MemorySource final : public Source {
 public:
  MemorySource(std::string name, const uint8_t* data, size_t size) : Source(std::move(name), size), data_(data) {}

 private:
  Status ReadRange(uint64_t offset, uint64_t n, void* dst) const override;
  const uint8_t* data_;
};

// An archive in a regular file, kept open and read with pread.
class FileSource final : public Source {
 public:
  // The file at `path`, which must be a regular file of at most max_bytes.
  static Result<std::unique_ptr<FileSource>> Open(const std::string& path, uint64_t max_bytes);
  ~FileSource() override;

 private:
  FileSource(const std::string& path, uint64_t size, int fd) : Source(path, size), fd_(fd) {}
  Status ReadRange(uint64_t offset, uint64_t n, void* dst) const override;
  int fd_;
};

// The archive's members by name, from its central directory (the local headers are left to MemberDataOffset).
// Refuses encrypted or compressed members, ZIP64 and multi-disk archives, more than 1024 members, and a member
// listed twice.
Result<std::map<std::string, Member>> ReadDirectory(const Source& src);

// Where member `name`'s data starts, after its local header, which is checked against the directory (signature
// and name); the data itself is checked to lie within the archive.
Result<uint64_t> MemberDataOffset(const Source& src, const std::string& name, const Member& m);

}  // namespace kvstream::model
