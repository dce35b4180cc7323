#include "bench/ucx_version.h"

#include <ucp/api/ucp.h>

namespace kvstream::bench {

std::string UcxVersion() { return ucp_get_version_string(); }

}  // namespace kvstream::bench
