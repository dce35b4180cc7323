// The machine a benchmark ran on, for the header of its report (the standard every benchmark follows:
// what was measured, where, when).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvstream::bench {

struct Machine {
  std::string cpu;           // /proc/cpuinfo's model name
  unsigned cores = 0;        // hardware threads this process may use
  std::string simd_kernels;  // the codec kernels this CPU runs (amx, avx512-vnni, avx512, avx2, portable)
  std::string os;            // kernel name and release
  std::string compiler;
};

Machine ThisMachine();

// {"cpu", "cores", "simd_kernels", "os", "compiler"}.
nlohmann::json MachineJson(const Machine& m);

// "CPU, N cores, K kernels, OS": one line for a table's header.
std::string DescribeMachine(const Machine& m);

// Now, as 2026-12-05T04:19:50Z.
std::string UtcNow();

}  // namespace kvstream::bench
