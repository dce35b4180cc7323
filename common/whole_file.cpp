#include "common/whole_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sys/stat.h>

namespace kvstream {

Result<uint64_t> RegularFileSize(const std::string& path, uint64_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) return Status::InvalidArgument(path + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return Status::ResourceExhausted(path + ": size " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                                     std::to_string(max_bytes));
  }
  return static_cast<uint64_t>(st.st_size);
}

Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path, uint64_t max_bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(const uint64_t size, RegularFileSize(path, max_bytes));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::IoError(path + ": " + std::strerror(errno));
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed || got != bytes.size()) {
    return Status::IoError(path + ": read " + std::to_string(got) + " of " + std::to_string(bytes.size()) + " bytes");
  }
  return bytes;
}

Result<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, max_bytes));
  return std::string(bytes.begin(), bytes.end());
}

Status WriteWholeFile(const std::string& path, const void* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::IoError(path + ": cannot create");
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) return Status::IoError(path + ": write failed");
  return Status::Ok();
}

}  // namespace kvstream
