// Whole-file reads with the size checked before allocating: what every command and loader that takes a
// file from the user reads it with; and the matching whole-file write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream {

// The size of a regular file: NotFound/IoError naming it, InvalidArgument for a device, pipe or folder
// (their size is not known ahead, and /dev/zero has no end), ResourceExhausted above `max_bytes`. What every
// reader of a user's file checks before it reads (ReadWholeFile, and the KV dump reader, which reads a file
// piece by piece).
Result<uint64_t> RegularFileSize(const std::string& path, uint64_t max_bytes);

// Reads a whole regular file; fails with NotFound/IoError naming it, InvalidArgument for a device, pipe or
// folder (their size is not known ahead, and /dev/zero has no end), or ResourceExhausted above `max_bytes`.
Result<std::vector<uint8_t>> ReadWholeFile(const std::string& path, uint64_t max_bytes = uint64_t{16} << 30);

// The same for a text (a prompt, a calibration text, a JSON file), as a string.
inline constexpr uint64_t kMaxTextBytes = uint64_t{256} << 20;
Result<std::string> ReadTextFile(const std::string& path, uint64_t max_bytes = kMaxTextBytes);

// Writes `size` bytes to `path` (created or truncated); IoError naming the file.
Status WriteWholeFile(const std::string& path, const void* data, size_t size);

}  // namespace kvstream
