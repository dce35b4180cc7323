#include "codec/common/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace kvstream::codec {
namespace {

bool DisabledByEnvironment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

}  // namespace

bool Avx2Enabled() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool cpu_has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu_has_avx2 && !DisabledByEnvironment("KVSTREAM_DISABLE_AVX2");
#else
  return false;
#endif
}

bool Avx512Enabled() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool cpu_has_avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
  return cpu_has_avx512 && Avx2Enabled() && !DisabledByEnvironment("KVSTREAM_DISABLE_AVX512");
#else
  return false;
#endif
}

bool Avx512VnniEnabled() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool cpu_has_vnni = __builtin_cpu_supports("avx512vnni");
  return cpu_has_vnni && Avx512Enabled();
#else
  return false;
#endif
}

bool AmxEnabled() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool granted = [] {
    // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8 (read directly: clang 14's
    // __builtin_cpu_supports does not know them).
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if ((edx >> 24 & 1) == 0 || (edx >> 25 & 1) == 0) return false;
    constexpr long kArchReqXcompPerm = 0x1023;  // asm/prctl.h
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted && Avx512Enabled() && !DisabledByEnvironment("KVSTREAM_DISABLE_AMX");
#else
  return false;
#endif
}

const char* SimdKernels() {
  if (AmxEnabled()) return "amx";
  if (Avx512VnniEnabled()) return "avx512-vnni";
  if (Avx512Enabled()) return "avx512";
  if (Avx2Enabled()) return "avx2";
  return "portable";
}

}  // namespace kvstream::codec
