// codec_files.cpp — see codec_files.h.
#include "tools/codec_files.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/status.h"
#include "tools/command.h"

namespace kvstream::cli {

Status ParseFineRows(const Args& args, double* fraction, Level* level) {
  KVSTREAM_ASSIGN_OR_RETURN(*fraction, args.GetDouble("fine-fraction", kDefaultFineFraction));
  if (!(*fraction >= 0.0 && *fraction <= 1.0)) {
    return Status::InvalidArgument("--fine-fraction = " + std::to_string(*fraction) + " outside [0, 1]");
  }
  KVSTREAM_ASSIGN_OR_RETURN(int64_t fine_level, args.GetInt("fine-level", 2));
  if (fine_level < 1 || fine_level > 15) {
    return Status::InvalidArgument("--fine-level = " + std::to_string(fine_level) + " outside 1..15");
  }
  *level = static_cast<Level>(fine_level);
  return Status::Ok();
}

std::string FineRowsHelp(int indent) {
  const auto flag = [&](const std::string& name) {
    return "  " + name + std::string(static_cast<size_t>(std::max(1, indent - 2 - static_cast<int>(name.size()))), ' ');
  };
  const std::string pad(static_cast<size_t>(indent), ' ');
  return flag("--fine-fraction F") + "transform and predicted levels coarser than --fine-level code the\n" + pad +
         "fraction F of the context's tokens, those that received the most attention in the\n" + pad +
         "prefill, at --fine-level: smaller at equal quality (default 0.08; 0: none)\n" + flag("--fine-level L") +
         "the fine rows' level (default 2)\n";
}

}  // namespace kvstream::cli
