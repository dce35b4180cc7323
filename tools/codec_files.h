// File plumbing of the codec commands (encode, decode, inspect, profile, serve): writes, loading a profile
// file (reads go through common/whole_file.h), the fine-rows flags, and hashes as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvstream/level.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "tools/command.h"

namespace kvstream::cli {

// Writes `size` bytes to `path` (created or truncated); the error names the file.
Status WriteFileBytes(const std::string& path, const void* data, size_t size);

// A profile file (--profile), parsed and checked; the error names the file.
Result<Profile> LoadProfileFile(const std::string& path);

// --fine-fraction's default: measured on SmolLM2 (lab/rate-distortion.md, "Fine rows").
inline constexpr double kDefaultFineFraction = 0.08;

// --fine-fraction and --fine-level, for EncodeOptions / SenderOptions.
Status ParseFineRows(const Args& args, double* fraction, Level* level);

// Help lines of --fine-fraction and --fine-level, their text starting at column `indent`.
std::string FineRowsHelp(int indent);

// A profile or model hash as 16 hex digits, as the commands print and compare them.
std::string HashHex(uint64_t h);

}  // namespace kvstream::cli
