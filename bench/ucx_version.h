// The version of the UCX library this process runs, for benchmark reports.
#pragma once

#include <string>

namespace kvstream::bench {

std::string UcxVersion();  // ucp_get_version_string(), e.g. "1.13.1"

}  // namespace kvstream::bench
