#include "bench/machine.h"

#include <sys/utsname.h>

#include <ctime>
#include <fstream>
#include <thread>

#include "codec/common/cpu_features.h"

namespace kvstream::bench {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

Machine ThisMachine() {
  Machine m;
  m.cpu = CpuModel();
  m.cores = std::thread::hardware_concurrency();
  m.simd_kernels = codec::SimdKernels();
  utsname u{};
  m.os = ::uname(&u) == 0 ? std::string(u.sysname) + " " + u.release : "unknown";
  m.compiler = std::string("gcc/clang ") + __VERSION__;
  return m;
}

nlohmann::json MachineJson(const Machine& m) {
  return {{"cpu", m.cpu}, {"cores", m.cores}, {"simd_kernels", m.simd_kernels}, {"os", m.os}, {"compiler", m.compiler}};
}

std::string DescribeMachine(const Machine& m) {
  return m.cpu + ", " + std::to_string(m.cores) + " cores, " + m.simd_kernels + " kernels, " + m.os;
}

std::string UtcNow() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

}  // namespace kvstream::bench
