// The ZIP container (model/zip_archive.h): the writer first, then the reader's sources, directory and local
// headers.
#include "model/zip_archive.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "common/whole_file.h"
#include "model/binary_reader.h"

namespace kvstream::model {
namespace {

constexpr uint32_t kLocalHeaderMagic = 0x04034b50;
constexpr uint32_t kCentralHeaderMagic = 0x02014b50;
constexpr uint32_t kEndOfDirectoryMagic = 0x06054b50;
constexpr size_t kLocalHeaderBytes = 30, kCentralHeaderBytes = 46, kEndOfDirectoryBytes = 22;
constexpr uint32_t kZip32Limit = 0xFFFFFFFFu;  // a size or offset at this value means "see the ZIP64 fields"
constexpr uint32_t kMaxMembers = 1024;

void Put16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void Put32(std::vector<uint8_t>& b, uint32_t v) {
  Put16(b, static_cast<uint16_t>(v));
  Put16(b, static_cast<uint16_t>(v >> 16));
}

}  // namespace

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

// ---------------------------------------------------------------------------------------------------------
// Writing

Status ZipWriter::Add(const std::string& name, const std::vector<uint8_t>& header, const void* data, size_t size) {
  const uint64_t member = header.size() + static_cast<uint64_t>(size);
  if (offset_ + kLocalHeaderBytes + name.size() + member + 4096 >= kZip32Limit) {
    return Status::ResourceExhausted(path_ +
                                     ": the archive would exceed 4 GiB (ZIP64 is not written); dump fewer tokens");
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

Status ZipWriter::Finish() {
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

Status ZipWriter::Write(const uint8_t* data, size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, f_) != n) {
    return Status::IoError(path_ + ": write failed: " + std::strerror(errno));
  }
  offset_ += n;
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------------------
// Reading

Status Source::CheckRange(uint64_t offset, uint64_t n, const std::string& what) const {
  if (offset <= size_ && n <= size_ - offset) return Status::Ok();
  return Status::CorruptData(name_ + ": " + what + ": file truncated: needs " + std::to_string(n) +
                             " bytes at offset " + std::to_string(offset) + " of " + std::to_string(size_));
}

Status Source::Read(uint64_t offset, uint64_t n, void* dst, const std::string& what) const {
  KVSTREAM_RETURN_IF_ERROR(CheckRange(offset, n, what));
  return n == 0 ? Status::Ok() : ReadRange(offset, n, dst);
}

Result<std::vector<uint8_t>> Source::Bytes(uint64_t offset, uint64_t n, const std::string& what) const {
  KVSTREAM_RETURN_IF_ERROR(CheckRange(offset, n, what));
  std::vector<uint8_t> out(static_cast<size_t>(n));
  KVSTREAM_RETURN_IF_ERROR(Read(offset, n, out.data(), what));
  return out;
}

Status MemorySource::ReadRange(uint64_t offset, uint64_t n, void* dst) const {
  std::memcpy(dst, data_ + offset, static_cast<size_t>(n));
  return Status::Ok();
}

Result<std::unique_ptr<FileSource>> FileSource::Open(const std::string& path, uint64_t max_bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(const uint64_t size, RegularFileSize(path, max_bytes));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(path + ": " + std::strerror(errno));
  return std::unique_ptr<FileSource>(new FileSource(path, size, fd));
}

FileSource::~FileSource() { ::close(fd_); }

Status FileSource::ReadRange(uint64_t offset, uint64_t n, void* dst) const {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const ssize_t got =
        ::pread(fd_, p, static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30)), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Status::IoError(name() + ": " + std::strerror(errno));
    if (got == 0) {
      return Status::IoError(name() + ": the file ended at " + std::to_string(offset) + " bytes while read");
    }
    p += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return Status::Ok();
}

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
    return Status::Unsupported(src.name() +
                               ": a ZIP64 archive (over 4 GiB or 65535 members); kv dumps are read up to 4 GiB");
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
    KVSTREAM_RETURN_IF_ERROR(
        cd.Take(static_cast<uint64_t>(u16(30)) + u16(32), "ZIP member extra field and comment").status());
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

Result<uint64_t> MemberDataOffset(const Source& src, const std::string& name, const Member& m) {
  KVSTREAM_ASSIGN_OR_RETURN(const std::vector<uint8_t> h,
                            src.Bytes(m.header_offset, kLocalHeaderBytes, "member " + name + ": local header"));
  uint32_t magic;
  std::memcpy(&magic, h.data(), 4);
  if (magic != kLocalHeaderMagic) {
    return Status::CorruptData(src.name() + ": member " + name + ": bad local header signature");
  }
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

}  // namespace kvstream::model
