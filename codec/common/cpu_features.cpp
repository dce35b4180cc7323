#include "codec/common/cpu_features.h"

#include <cstdlib>
#include <cstring>

namespace kvstream::codec {

bool Avx2Enabled() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool cpu_has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (!cpu_has_avx2) return false;
  const char* disable = std::getenv("KVSTREAM_DISABLE_AVX2");
  return disable == nullptr || disable[0] == '\0' || std::strcmp(disable, "0") == 0;
#else
  return false;
#endif
}

}  // namespace kvstream::codec
