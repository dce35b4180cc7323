// File plumbing of the codec commands (encode, decode, inspect, profile, serve): files (read and written
// through common/whole_file.h, profiles loaded by Profile::Load), the fine-rows flags, and hashes as text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvstream/level.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "tools/command.h"

namespace kvstream::cli {

// --fine-fraction and --fine-level, for EncodeOptions / SenderOptions.
Status ParseFineRows(const Args& args, double* fraction, Level* level);

// Help lines of --fine-fraction and --fine-level, their text starting at column `indent`.
std::string FineRowsHelp(int indent);

}  // namespace kvstream::cli
