// `kvstream bench gpu`: GPU decode throughput (GB/s of fp16 output) of each chunk set of a folder
// (gpu_chunk_set.h), on one context and on a batch of contexts decoded into distinct destinations, beside
// a device-to-device copy of the same output size measured in the same run, every decode checked bit for
// bit against the CPU decoder's hash. Needs a CUDA device; built only with CUDA.
#pragma once

#include <string>

#include "kvstream/status.h"

namespace kvstream::bench {

struct GpuBenchOptions {
  std::string chunks_dir;
  int batch = 0;         // contexts decoded at once; 0: as many as make about 1 GiB of output (at most 64)
  int repetitions = 5;   // timed runs of each measurement; the median is reported
  bool json = false;     // JSON lines instead of a table
};

// Prints a header (GPU, CPU, date, command) and one row per chunk set. Fails with kUnsupported when there
// is no CUDA device.
Status RunGpuBench(const GpuBenchOptions& options, const std::string& command);

}  // namespace kvstream::bench
