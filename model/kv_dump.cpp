// The KV dump (kvstream/kv_dump.h, docs/kv-dump-format.md): a ZIP archive of stored .npy members, the
// layout numpy.savez writes, written and read here without a ZIP or NumPy library. Writing comes first,
// then reading: the ZIP directory, each member's .npy header, and the members checked against each other.
#include "kvstream/kv_dump.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include <fcntl.h>
#include <unistd.h>

#include "common/whole_file.h"
#include "model/binary_reader.h"
#include "model/zip_crc32.h"

namespace kvstream {
namespace {

using model::ByteReader;
using model::ZipCrc32;

constexpr uint32_t kLocalHeaderMagic = 0x04034b50;
constexpr uint32_t kCentralHeaderMagic = 0x02014b50;
constexpr uint32_t kEndOfDirectoryMagic = 0x06054b50;
constexpr size_t kLocalHeaderBytes = 30, kCentralHeaderBytes = 46, kEndOfDirectoryBytes = 22;
constexpr uint32_t kZip32Limit = 0xFFFFFFFFu;  // a size or offset at this value means "see the ZIP64 fields"
constexpr int kConfigFields = 8;               // layers, tokens, kv_dim, n_heads, n_kv_heads, head_dim, rope_layout, vocab_size

void Put16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(std::vector<uint8_t>& b, uint32_t v) {
  Put16(b, static_cast<uint16_t>(v));
  Put16(b, static_cast<uint16_t>(v >> 16));
}

// What makes a model's heads inconsistent (what both the writer and the reader refuse), or "".
std::string GeometryError(const KvDump& d) {
  if (d.n_kv_heads < 1 || d.n_heads < 1 || d.rope.head_dim < 1 || d.vocab_size < 1) {
    return "n_heads, n_kv_heads, head_dim and vocab_size must be positive";
  }
  if (d.kv_dim != d.n_kv_heads * d.rope.head_dim) {
    return "kv_dim = " + std::to_string(d.kv_dim) + " is not n_kv_heads x head_dim = " + std::to_string(d.n_kv_heads) + " x " +
           std::to_string(d.rope.head_dim);
  }
  if (d.n_heads % d.n_kv_heads != 0) {
    return "n_heads = " + std::to_string(d.n_heads) + " is not a multiple of n_kv_heads = " + std::to_string(d.n_kv_heads);
  }
  if (d.rope.head_dim % 2 != 0) return "head_dim = " + std::to_string(d.rope.head_dim) + " is odd";
  return "";
}

// ---------------------------------------------------------------------------------------------------------
// Writing

// A .npy header (format version 1.0): magic, version, and the dictionary padded so that the data starts
// on a multiple of 64 bytes, as numpy writes it.
std::vector<uint8_t> NpyHeader(const char* descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // a 1-tuple keeps its trailing comma: "(3,)"
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  Put16(out, static_cast<uint16_t>(dict.size()));
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

// A ZIP archive of stored (uncompressed) members, streamed to a file.
class ZipWriter {
 public:
  ZipWriter(std::FILE* f, std::string path) : f_(f), path_(std::move(path)) {}

  // A member of `header` then `size` bytes at `data`.
  Status Add(const std::string& name, const std::vector<uint8_t>& header, const void* data, size_t size) {
    const uint64_t member = header.size() + static_cast<uint64_t>(size);
    if (offset_ + kLocalHeaderBytes + name.size() + member + 4096 >= kZip32Limit) {
      return Status::ResourceExhausted(path_ + ": the archive would exceed 4 GiB (ZIP64 is not written); dump fewer tokens");
    }
    const auto* bytes = static_cast<const uint8_t*>(data);
    Entry e{name, ZipCrc32(bytes, size, ZipCrc32(header.data(), header.size())), static_cast<uint32_t>(member),
            static_cast<uint32_t>(offset_)};
    std::vector<uint8_t> h;
    Put32(h, kLocalHeaderMagic);
    Put16(h, 20);    // version needed: 2.0
    Put16(h, 0);     // flags
    Put16(h, 0);     // method: stored
    Put16(h, 0);     // time
    Put16(h, 0x21);  // date: 1980-01-01
    Put32(h, e.crc);
    Put32(h, e.size);
    Put32(h, e.size);
    Put16(h, static_cast<uint16_t>(name.size()));
    Put16(h, 0);
    h.insert(h.end(), name.begin(), name.end());
    KVSTREAM_RETURN_IF_ERROR(Write(h.data(), h.size()));
    KVSTREAM_RETURN_IF_ERROR(Write(header.data(), header.size()));
    KVSTREAM_RETURN_IF_ERROR(Write(bytes, size));
    entries_.push_back(std::move(e));
    return Status::Ok();
  }

  // The central directory and its end record.
  Status Finish() {
    std::vector<uint8_t> cd;
    for (const Entry& e : entries_) {
      Put32(cd, kCentralHeaderMagic);
      Put16(cd, 20);  // made by: 2.0
      Put16(cd, 20);  // needed: 2.0
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0x21);
      Put32(cd, e.crc);
      Put32(cd, e.size);
      Put32(cd, e.size);
      Put16(cd, static_cast<uint16_t>(e.name.size()));
      Put16(cd, 0);  // extra
      Put16(cd, 0);  // comment
      Put16(cd, 0);  // disk
      Put16(cd, 0);  // internal attributes
      Put32(cd, 0);  // external attributes
      Put32(cd, e.offset);
      cd.insert(cd.end(), e.name.begin(), e.name.end());
    }
    std::vector<uint8_t> end;
    Put32(end, kEndOfDirectoryMagic);
    Put16(end, 0);
    Put16(end, 0);
    Put16(end, static_cast<uint16_t>(entries_.size()));
    Put16(end, static_cast<uint16_t>(entries_.size()));
    Put32(end, static_cast<uint32_t>(cd.size()));
    Put32(end, static_cast<uint32_t>(offset_));
    Put16(end, 0);
    KVSTREAM_RETURN_IF_ERROR(Write(cd.data(), cd.size()));
    return Write(end.data(), end.size());
  }

 private:
  struct Entry {
    std::string name;
    uint32_t crc, size, offset;
  };
  Status Write(const uint8_t* data, size_t n) {
    if (n != 0 && std::fwrite(data, 1, n, f_) != n) return Status::IoError(path_ + ": write failed: " + std::strerror(errno));
    offset_ += n;
    return Status::Ok();
  }
  std::FILE* f_;
  std::string path_;
  uint64_t offset_ = 0;
  std::vector<Entry> entries_;
};

Status CheckDumpFields(const KvDump& d) {
  const uint64_t values = static_cast<uint64_t>(d.layers) * static_cast<uint64_t>(d.tokens) * static_cast<uint64_t>(d.kv_dim);
  if (d.layers < 1 || d.tokens < 1 || d.kv_dim < 1) return Status::InvalidArgument("kv dump: empty shape");
  if (d.dtype != DType::kF32 && d.dtype != DType::kF16) {
    return Status::InvalidArgument(std::string("kv dump: keys and values must be f32 or f16, not ") + DTypeName(d.dtype));
  }
  if (d.keys.size() != values * DTypeSize(d.dtype) || d.values.size() != d.keys.size()) {
    return Status::InvalidArgument("kv dump: keys and values must hold layers x tokens x kv_dim = " + std::to_string(values) +
                                   " values each");
  }
  if (const std::string geometry = GeometryError(d); !geometry.empty()) return Status::InvalidArgument("kv dump: " + geometry);
  if (!d.token_ids.empty() && d.token_ids.size() != static_cast<size_t>(d.tokens)) {
    return Status::InvalidArgument("kv dump: token_ids must be empty or hold one id per token");
  }
  if (!d.importance.empty() && d.importance.size() != static_cast<size_t>(d.tokens)) {
    return Status::InvalidArgument("kv dump: importance must be empty or hold one value per token");
  }
  return Status::Ok();
}

Status WriteMembers(const KvDump& d, ZipWriter& zip) {
  const char* descr = d.dtype == DType::kF16 ? "<f2" : "<f4";
  const std::vector<int64_t> shape = {d.layers, d.tokens, d.kv_dim};
  KVSTREAM_RETURN_IF_ERROR(zip.Add("k.npy", NpyHeader(descr, shape), d.keys.data(), d.keys.size()));
  KVSTREAM_RETURN_IF_ERROR(zip.Add("v.npy", NpyHeader(descr, shape), d.values.data(), d.values.size()));
  if (!d.token_ids.empty()) {
    KVSTREAM_RETURN_IF_ERROR(zip.Add("tokens.npy", NpyHeader("<i4", {d.tokens}), d.token_ids.data(), d.token_ids.size() * 4));
  }
  const int64_t config[kConfigFields] = {
      d.layers,    d.tokens, d.kv_dim, d.n_heads, d.n_kv_heads, d.rope.head_dim, static_cast<int64_t>(d.rope.layout),
      d.vocab_size};
  KVSTREAM_RETURN_IF_ERROR(zip.Add("config.npy", NpyHeader("<i8", {kConfigFields}), config, sizeof config));
  KVSTREAM_RETURN_IF_ERROR(zip.Add("rope_theta.npy", NpyHeader("<f4", {1}), &d.rope.theta, 4));
  if (!d.importance.empty()) {
    KVSTREAM_RETURN_IF_ERROR(
        zip.Add("importance.npy", NpyHeader("<f4", {d.tokens}), d.importance.data(), d.importance.size() * 4));
  }
  return zip.Finish();
}

// ---------------------------------------------------------------------------------------------------------
// Reading

constexpr uint32_t kMaxMembers = 1024;
constexpr uint64_t kMaxNpyHeaderBytes = 1 << 20;
constexpr int kMaxDims = 8;

struct Member {
  uint32_t crc = 0;
  uint64_t size = 0;
  uint64_t header_offset = 0;  // of its local header
};

// Where the archive's bytes are: memory (ParseKvDump) or a file read piece by piece (ReadKvDump), so that
// each member's data goes straight into its array and reading a dump takes about its size, once.
class Source {
 public:
  Source(std::string name, uint64_t size) : name_(std::move(name)), size_(size) {}
  virtual ~Source() = default;
  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }

  // CorruptData naming `what` unless the n bytes at `offset` lie within the archive.
  Status CheckRange(uint64_t offset, uint64_t n, const std::string& what) const {
    if (offset <= size_ && n <= size_ - offset) return Status::Ok();
    return Status::CorruptData(name_ + ": " + what + ": file truncated: needs " + std::to_string(n) + " bytes at offset " +
                               std::to_string(offset) + " of " + std::to_string(size_));
  }
  // The n bytes at `offset` into dst.
  Status Read(uint64_t offset, uint64_t n, void* dst, const std::string& what) const {
    KVSTREAM_RETURN_IF_ERROR(CheckRange(offset, n, what));
    return n == 0 ? Status::Ok() : ReadRange(offset, n, dst);
  }
  Result<std::vector<uint8_t>> Bytes(uint64_t offset, uint64_t n, const std::string& what) const {
    KVSTREAM_RETURN_IF_ERROR(CheckRange(offset, n, what));
    std::vector<uint8_t> out(static_cast<size_t>(n));
    KVSTREAM_RETURN_IF_ERROR(Read(offset, n, out.data(), what));
    return out;
  }

 private:
  virtual Status ReadRange(uint64_t offset, uint64_t n, void* dst) const = 0;
  std::string name_;
  uint64_t size_;
};

class MemorySource final : public Source {
 public:
  MemorySource(const uint8_t* data, size_t size) : Source("kv dump", size), data_(data) {}

 private:
  Status ReadRange(uint64_t offset, uint64_t n, void* dst) const override {
    std::memcpy(dst, data_ + offset, static_cast<size_t>(n));
    return Status::Ok();
  }
  const uint8_t* data_;
};

class FileSource final : public Source {
 public:
  static Result<std::unique_ptr<FileSource>> Open(const std::string& path, uint64_t max_bytes) {
    KVSTREAM_ASSIGN_OR_RETURN(const uint64_t size, RegularFileSize(path, max_bytes));
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::IoError(path + ": " + std::strerror(errno));
    return std::unique_ptr<FileSource>(new FileSource(path, size, fd));
  }
  ~FileSource() override { ::close(fd_); }

 private:
  FileSource(const std::string& path, uint64_t size, int fd) : Source(path, size), fd_(fd) {}
  Status ReadRange(uint64_t offset, uint64_t n, void* dst) const override {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      const ssize_t got =
          ::pread(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30)), static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Status::IoError(name() + ": " + std::strerror(errno));
      if (got == 0) return Status::IoError(name() + ": the file ended at " + std::to_string(offset) + " bytes while read");
      p += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
    return Status::Ok();
  }
  int fd_;
};

// The archive's members by name, from its central directory (the local headers are read only to find
// where each member's data starts).
Result<std::map<std::string, Member>> ReadDirectory(const Source& src) {
  const uint64_t size = src.size();
  if (size < kEndOfDirectoryBytes) {
    return Status::CorruptData(src.name() + ": not a ZIP archive: " + std::to_string(size) + " bytes");
  }
  // The end record is the last 22 bytes unless a comment (at most 65535 bytes) follows it.
  const uint64_t tail_bytes = std::min<uint64_t>(size, kEndOfDirectoryBytes + 0xFFFF), tail_at = size - tail_bytes;
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> tail, src.Bytes(tail_at, tail_bytes, "ZIP end record"));
  size_t end = tail.size() - kEndOfDirectoryBytes;
  while (true) {
    uint32_t magic;
    std::memcpy(&magic, tail.data() + end, 4);
    if (magic == kEndOfDirectoryMagic) break;
    if (end == 0) return Status::CorruptData(src.name() + ": not a ZIP archive (no end-of-central-directory record)");
    --end;
  }
  ByteReader in(tail.data(), tail.size(), src.name());
  KVSTREAM_RETURN_IF_ERROR(in.Seek(end + 4, "ZIP end record"));
  KVSTREAM_ASSIGN_OR_RETURN(uint16_t disk, in.Read<uint16_t>("ZIP end record: disk"));
  KVSTREAM_ASSIGN_OR_RETURN(uint16_t directory_disk, in.Read<uint16_t>("ZIP end record: directory disk"));
  KVSTREAM_ASSIGN_OR_RETURN(uint16_t disk_entries, in.Read<uint16_t>("ZIP end record: entries"));
  KVSTREAM_ASSIGN_OR_RETURN(uint16_t entries, in.Read<uint16_t>("ZIP end record: entries"));
  KVSTREAM_ASSIGN_OR_RETURN(uint32_t directory_size, in.Read<uint32_t>("ZIP end record: directory size"));
  KVSTREAM_ASSIGN_OR_RETURN(uint32_t directory_offset, in.Read<uint32_t>("ZIP end record: directory offset"));
  if (disk != 0 || directory_disk != 0 || disk_entries != entries) {
    return Status::Unsupported(src.name() + ": a multi-disk ZIP archive");
  }
  if (entries == 0xFFFF || directory_size == kZip32Limit || directory_offset == kZip32Limit) {
    return Status::Unsupported(src.name() + ": a ZIP64 archive (over 4 GiB or 65535 members); kv dumps are read up to 4 GiB");
  }
  if (entries > kMaxMembers) {
    return in.Error("ZIP end record", std::to_string(entries) + " members, at most " + std::to_string(kMaxMembers));
  }
  if (static_cast<uint64_t>(directory_offset) + directory_size > tail_at + end) {
    return in.Error("ZIP end record", "central directory [" + std::to_string(directory_offset) + ", +" +
                                          std::to_string(directory_size) + ") runs past its end record at " +
                                          std::to_string(tail_at + end));
  }

  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> directory,
                            src.Bytes(directory_offset, directory_size, "ZIP central directory"));
  ByteReader cd(directory.data(), directory.size(), src.name());
  std::map<std::string, Member> members;
  for (uint32_t i = 0; i < entries; ++i) {
    KVSTREAM_ASSIGN_OR_RETURN(const uint8_t* h, cd.Take(kCentralHeaderBytes, "ZIP central directory entry"));
    const auto u16 = [h](int at) { return static_cast<uint16_t>(h[at] | h[at + 1] << 8); };
    const auto u32 = [h](int at) {
      return static_cast<uint32_t>(h[at] | h[at + 1] << 8 | h[at + 2] << 16 | uint32_t{h[at + 3]} << 24);
    };
    if (u32(0) != kCentralHeaderMagic) {
      return cd.Error("ZIP central directory", "entry " + std::to_string(i) + " has a bad signature");
    }
    KVSTREAM_ASSIGN_OR_RETURN(std::string name, cd.ReadString(u16(28), "ZIP member name"));
    KVSTREAM_RETURN_IF_ERROR(cd.Take(static_cast<uint64_t>(u16(30)) + u16(32), "ZIP member extra field and comment").status());
    const uint16_t flags = u16(8), method = u16(10);
    if (flags & 1) return Status::Unsupported(src.name() + ": member " + name + " is encrypted");
    if (method != 0) {
      return Status::Unsupported(src.name() + ": member " + name + " is compressed (method " + std::to_string(method) +
                                 "; numpy.savez_compressed writes such archives): write the dump with numpy.savez");
    }
    const uint32_t compressed = u32(20), uncompressed = u32(24);
    if (compressed == kZip32Limit || uncompressed == kZip32Limit || u32(42) == kZip32Limit) {
      return Status::Unsupported(src.name() + ": member " + name + " has ZIP64 sizes; kv dumps are read up to 4 GiB");
    }
    if (compressed != uncompressed) {
      return cd.Error("member " + name,
                      "stored with " + std::to_string(compressed) + " bytes for " + std::to_string(uncompressed));
    }
    if (!members.emplace(name, Member{u32(16), uncompressed, u32(42)}).second) {
      return cd.Error("ZIP central directory", "member " + name + " appears twice");
    }
  }
  return members;
}

// Where a member's data starts, after its local header (checked against the directory).
Result<uint64_t> MemberDataOffset(const Source& src, const std::string& name, const Member& m) {
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> h,
                            src.Bytes(m.header_offset, kLocalHeaderBytes, "member " + name + ": local header"));
  uint32_t magic;
  std::memcpy(&magic, h.data(), 4);
  if (magic != kLocalHeaderMagic) return Status::CorruptData(src.name() + ": member " + name + ": bad local header signature");
  const uint16_t name_bytes = static_cast<uint16_t>(h[26] | h[27] << 8),
                 extra_bytes = static_cast<uint16_t>(h[28] | h[29] << 8);
  const uint64_t name_at = m.header_offset + kLocalHeaderBytes;
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> local_name,
                            src.Bytes(name_at, name_bytes, "member " + name + ": local name"));
  if (std::string(local_name.begin(), local_name.end()) != name) {
    return Status::CorruptData(src.name() + ": member " + name + ": its local header names it '" +
                               std::string(local_name.begin(), local_name.end()) + "'");
  }
  const uint64_t data_at = name_at + name_bytes + extra_bytes;
  KVSTREAM_RETURN_IF_ERROR(src.CheckRange(data_at, m.size, "member " + name + ": data"));
  return data_at;
}

// A cursor over a .npy header's dictionary, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (30, 2048, 192), }
class DictCursor {
 public:
  DictCursor(const std::string& text, std::string member) : text_(text), member_(std::move(member)) {}

  Status Error(const std::string& what) const {
    return Status::CorruptData(member_ + ": .npy header: " + what + " at character " + std::to_string(at_) + " of '" + text_ +
                               "'");
  }
  void SkipSpaces() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n')) ++at_;
  }
  bool Accept(char c) {
    SkipSpaces();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  Status Expect(char c) { return Accept(c) ? Status::Ok() : Error(std::string("expected '") + c + "'"); }
  Result<std::string> String() {
    SkipSpaces();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return Error("expected a string");
    const char quote = text_[at_++];
    const size_t close = text_.find(quote, at_);
    if (close == std::string::npos) return Error("unterminated string");
    std::string s = text_.substr(at_, close - at_);
    at_ = close + 1;
    return s;
  }
  Result<bool> Boolean() {
    SkipSpaces();
    for (const bool value : {true, false}) {
      const std::string word = value ? "True" : "False";
      if (text_.compare(at_, word.size(), word) == 0) {
        at_ += word.size();
        return value;
      }
    }
    return Error("expected True or False");
  }
  // A tuple of non-negative integers: (), (3,) or (2, 3).
  Result<std::vector<int64_t>> Shape() {
    KVSTREAM_RETURN_IF_ERROR(Expect('('));
    std::vector<int64_t> dims;
    while (!Accept(')')) {
      SkipSpaces();
      int64_t d = 0;
      size_t digits = 0;
      while (at_ < text_.size() && text_[at_] >= '0' && text_[at_] <= '9') {
        if (++digits > 15) return Error("a dimension beyond 10^15");
        d = d * 10 + (text_[at_++] - '0');
      }
      if (digits == 0) return Error("expected a dimension");
      if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2's long literal
      if (dims.size() == kMaxDims) return Error("more than " + std::to_string(kMaxDims) + " dimensions");
      dims.push_back(d);
      if (!Accept(',')) {
        KVSTREAM_RETURN_IF_ERROR(Expect(')'));
        break;
      }
    }
    return dims;
  }
  bool AtEnd() {
    SkipSpaces();
    return at_ == text_.size();
  }

 private:
  const std::string& text_;
  std::string member_;
  size_t at_ = 0;
};

struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  uint64_t numel = 0;
};

size_t ItemSize(const std::string& descr) {
  if (descr == "<f2") return 2;
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f8" || descr == "<i8") return 8;
  return 0;
}

// A member holding a .npy file (format version 1, 2 or 3): its header parsed, its data (exactly what the
// shape needs) read into *data, and the member checked against its CRC-32.
Result<NpyArray> ReadNpyMember(const Source& src, const std::string& member, const Member& m, std::vector<uint8_t>* data) {
  KVSTREAM_ASSIGN_OR_RETURN(const uint64_t at, MemberDataOffset(src, member, m));
  // The fixed prefix: magic, version, and the header's length (2 bytes in version 1, 4 after).
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> prefix, src.Bytes(at, std::min<uint64_t>(m.size, 12), member));
  ByteReader in(prefix.data(), prefix.size(), member);
  KVSTREAM_ASSIGN_OR_RETURN(std::string magic, in.ReadString(6, ".npy magic"));
  if (magic != "\x93NUMPY") return in.Error(".npy magic", "not a .npy file");
  KVSTREAM_ASSIGN_OR_RETURN(uint8_t major, in.Read<uint8_t>(".npy version"));
  KVSTREAM_RETURN_IF_ERROR(in.Read<uint8_t>(".npy version").status());
  if (major < 1 || major > 3) return Status::Unsupported(member + ": .npy format version " + std::to_string(major));
  uint64_t header_bytes = 0;
  if (major == 1) {
    KVSTREAM_ASSIGN_OR_RETURN(header_bytes, in.Read<uint16_t>(".npy header length"));
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(header_bytes, in.Read<uint32_t>(".npy header length"));
  }
  if (header_bytes > kMaxNpyHeaderBytes) return in.Error(".npy header", std::to_string(header_bytes) + " bytes, at most 1 MiB");
  const uint64_t head = in.offset() + header_bytes;
  if (head > m.size) {
    return in.Error(".npy header", std::to_string(header_bytes) + " bytes, the member holds " +
                                       std::to_string(m.size - in.offset()) + " after its prefix");
  }
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> head_bytes, src.Bytes(at, head, member + ": .npy header"));
  const std::string text(head_bytes.begin() + static_cast<std::ptrdiff_t>(in.offset()), head_bytes.end());
  DictCursor dict(text, member);
  NpyArray a;
  bool fortran_order = false, has_descr = false, has_order = false, has_shape = false;
  KVSTREAM_RETURN_IF_ERROR(dict.Expect('{'));
  while (!dict.Accept('}')) {
    KVSTREAM_ASSIGN_OR_RETURN(std::string key, dict.String());
    KVSTREAM_RETURN_IF_ERROR(dict.Expect(':'));
    if (key == "descr" && !has_descr) {
      KVSTREAM_ASSIGN_OR_RETURN(a.descr, dict.String());
      has_descr = true;
    } else if (key == "fortran_order" && !has_order) {
      KVSTREAM_ASSIGN_OR_RETURN(fortran_order, dict.Boolean());
      has_order = true;
    } else if (key == "shape" && !has_shape) {
      KVSTREAM_ASSIGN_OR_RETURN(a.shape, dict.Shape());
      has_shape = true;
    } else {
      return dict.Error("unexpected or repeated key '" + key + "'");
    }
    if (!dict.Accept(',')) {
      KVSTREAM_RETURN_IF_ERROR(dict.Expect('}'));
      break;
    }
  }
  if (!dict.AtEnd()) return dict.Error("trailing characters");
  if (!has_descr || !has_order || !has_shape) return dict.Error("needs the keys descr, fortran_order and shape");
  const size_t item = ItemSize(a.descr);
  if (item == 0) return Status::Unsupported(member + ": dtype '" + a.descr + "' (kv dumps hold <f4, <f2, <f8, <i4 or <i8)");
  const uint64_t data_bytes = m.size - head;
  a.numel = 1;
  for (int64_t d : a.shape) {
    // Every dimension is below 10^15, and the product never exceeds the bytes there are.
    if (d != 0 && a.numel > data_bytes / static_cast<uint64_t>(d)) {
      return in.Error(".npy data", "shape needs more values than the " + std::to_string(data_bytes) + " data bytes hold");
    }
    a.numel *= static_cast<uint64_t>(d);
  }
  if (a.numel * item != data_bytes) {
    return in.Error(".npy data", std::to_string(data_bytes) + " bytes, the shape of " + a.descr + " needs " +
                                     std::to_string(a.numel * item));
  }
  if (fortran_order && a.shape.size() > 1) return Status::Unsupported(member + ": Fortran (column-major) order; write C order");
  data->resize(static_cast<size_t>(data_bytes));
  KVSTREAM_RETURN_IF_ERROR(src.Read(at + head, data_bytes, data->data(), member + ": .npy data"));
  if (ZipCrc32(data->data(), data->size(), ZipCrc32(head_bytes.data(), head_bytes.size())) != m.crc) {
    return Status::CorruptData(member + ": CRC-32 mismatch: the file is corrupt");
  }
  a.data = data->data();
  return a;
}

int64_t IntAt(const NpyArray& a, uint64_t i) {
  if (a.descr == "<i4") {
    int32_t v;
    std::memcpy(&v, a.data + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, a.data + 8 * i, 8);
  return v;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

Status ExpectArray(const NpyArray& a, const std::string& member, std::initializer_list<const char*> descrs,
                   const std::vector<int64_t>& shape) {
  bool known = false;
  std::string names;
  for (const char* d : descrs) {
    known |= a.descr == d;
    names += std::string(names.empty() ? "" : " or ") + d;
  }
  if (!known) return Status::Unsupported(member + ": dtype " + a.descr + ", expected " + names);
  if (a.shape != shape) return Status::CorruptData(member + ": shape " + ShapeText(a.shape) + ", expected " + ShapeText(shape));
  return Status::Ok();
}

// config.npy's fields into `d`, each within what a model can have.
Status ReadConfig(const NpyArray& config, KvDump* d) {
  KVSTREAM_RETURN_IF_ERROR(ExpectArray(config, "config.npy", {"<i8", "<i4"}, {kConfigFields}));
  const char* names[kConfigFields] = {"layers",     "tokens",   "kv_dim",      "n_heads",
                                      "n_kv_heads", "head_dim", "rope_layout", "vocab_size"};
  const int64_t limits[kConfigFields] = {4096, 1 << 24, 1 << 16, 1 << 12, 1 << 12, 1 << 12, 1, 1 << 24};
  int64_t v[kConfigFields];
  for (int i = 0; i < kConfigFields; ++i) {
    v[i] = IntAt(config, static_cast<uint64_t>(i));
    const int64_t lowest = i == 6 ? 0 : 1;
    if (v[i] < lowest || v[i] > limits[i]) {
      return Status::CorruptData("config.npy: " + std::string(names[i]) + " = " + std::to_string(v[i]) + " outside [" +
                                 std::to_string(lowest) + ", " + std::to_string(limits[i]) + "]");
    }
  }
  d->layers = static_cast<int>(v[0]);
  d->tokens = static_cast<int>(v[1]);
  d->kv_dim = static_cast<int>(v[2]);
  d->n_heads = static_cast<int>(v[3]);
  d->n_kv_heads = static_cast<int>(v[4]);
  d->rope.head_dim = static_cast<int>(v[5]);
  d->rope.layout = static_cast<RopeLayout>(v[6]);
  d->vocab_size = static_cast<int>(v[7]);
  const std::string geometry = GeometryError(*d);
  if (!geometry.empty()) return Status::CorruptData("config.npy: " + geometry);
  return Status::Ok();
}

Status ReadDump(const Source& src, KvDump* d) {
  KVSTREAM_ASSIGN_OR_RETURN(auto members, ReadDirectory(src));
  std::map<std::string, NpyArray> arrays;
  std::map<std::string, std::vector<uint8_t>> small;  // the data of the members besides keys and values
  // Member `name`'s array, its data read into *into (the keys and values) or kept in `small`.
  const auto array = [&](const std::string& name, bool required,
                         std::vector<uint8_t>* into = nullptr) -> Result<const NpyArray*> {
    const auto m = members.find(name);
    if (m == members.end()) {
      if (required) return Status::CorruptData(src.name() + ": no member " + name + " (docs/kv-dump-format.md lists them)");
      return static_cast<const NpyArray*>(nullptr);
    }
    Result<NpyArray> a = ReadNpyMember(src, name, m->second, into ? into : &small[name]);
    if (!a.ok()) return a.status().WithContext(src.name());
    return &(arrays[name] = std::move(*a));
  };
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* config, array("config.npy", true));
  Status st = ReadConfig(*config, d);
  if (!st.ok()) return st.WithContext(src.name());

  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* theta, array("rope_theta.npy", true));
  if (theta->numel != 1 || (theta->descr != "<f4" && theta->descr != "<f8")) {
    return Status::CorruptData(src.name() + ": rope_theta.npy must hold one <f4 or <f8, not " + std::to_string(theta->numel) +
                               " of " + theta->descr);
  }
  double theta_value;
  if (theta->descr == "<f4") {
    float f;
    std::memcpy(&f, theta->data, 4);
    theta_value = f;
  } else {
    std::memcpy(&theta_value, theta->data, 8);
  }
  if (!(theta_value > 0 && theta_value < 1e12)) {
    return Status::CorruptData(src.name() + ": rope_theta = " + std::to_string(theta_value) + ", expected a positive number");
  }
  d->rope.theta = static_cast<float>(theta_value);

  const std::vector<int64_t> shape = {d->layers, d->tokens, d->kv_dim};
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* k, array("k.npy", true, &d->keys));
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* v, array("v.npy", true, &d->values));
  for (const auto& [a, name] : {std::pair{k, "k.npy"}, std::pair{v, "v.npy"}}) {
    st = ExpectArray(*a, name, {"<f4", "<f2"}, shape);
    if (!st.ok()) return st.WithContext(src.name());
  }
  if (k->descr != v->descr) return Status::CorruptData(src.name() + ": k.npy is " + k->descr + ", v.npy " + v->descr);
  d->dtype = k->descr == "<f2" ? DType::kF16 : DType::kF32;

  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* ids, array("tokens.npy", false));
  if (ids) {
    st = ExpectArray(*ids, "tokens.npy", {"<i4", "<i8"}, {d->tokens});
    if (!st.ok()) return st.WithContext(src.name());
    d->token_ids.resize(static_cast<size_t>(d->tokens));
    for (uint64_t t = 0; t < ids->numel; ++t) {
      const int64_t id = IntAt(*ids, t);
      if (id < 0 || id >= d->vocab_size) {
        return Status::CorruptData(src.name() + ": tokens.npy: token " + std::to_string(t) + " is " + std::to_string(id) +
                                   ", outside the vocabulary of " + std::to_string(d->vocab_size));
      }
      d->token_ids[t] = static_cast<int32_t>(id);
    }
  }
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* importance, array("importance.npy", false));
  if (importance) {
    st = ExpectArray(*importance, "importance.npy", {"<f4"}, {d->tokens});
    if (!st.ok()) return st.WithContext(src.name());
    d->importance.resize(static_cast<size_t>(d->tokens));
    std::memcpy(d->importance.data(), importance->data, d->importance.size() * 4);
    for (size_t t = 0; t < d->importance.size(); ++t) {
      if (!(d->importance[t] >= 0 && std::isfinite(d->importance[t]))) {
        return Status::CorruptData(src.name() + ": importance.npy: token " + std::to_string(t) + " is " +
                                   std::to_string(d->importance[t]) + ", expected a finite value >= 0");
      }
    }
  }
  return Status::Ok();
}

Result<KvDump> Parse(const Source& src) {
  KvDump d;
  KVSTREAM_RETURN_IF_ERROR(ReadDump(src, &d));
  return d;
}

}  // namespace

namespace model {

uint32_t ZipCrc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

}  // namespace model

TensorView KvDump::keys_view() const {
  return TensorView::Dense(const_cast<uint8_t*>(keys.data()), dtype, layers, tokens, kv_dim);
}
TensorView KvDump::values_view() const {
  return TensorView::Dense(const_cast<uint8_t*>(values.data()), dtype, layers, tokens, kv_dim);
}

Result<KvDump> ParseKvDump(const uint8_t* data, size_t size) { return Parse(MemorySource(data, size)); }

Result<KvDump> ReadKvDump(const std::string& path, uint64_t max_bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(const std::unique_ptr<FileSource> file, FileSource::Open(path, max_bytes));
  return Parse(*file);
}

Status WriteKvDump(const KvDump& dump, const std::string& path) {
  KVSTREAM_RETURN_IF_ERROR(CheckDumpFields(dump));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::IoError(path + ": " + std::strerror(errno));
  ZipWriter zip(f, path);
  Status s = WriteMembers(dump, zip);
  if (std::fclose(f) != 0 && s.ok()) s = Status::IoError(path + ": close failed");
  if (!s.ok()) std::remove(path.c_str());
  return s;
}

}  // namespace kvstream
