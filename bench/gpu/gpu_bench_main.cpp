// kvstream_gpu_bench --chunks DIR [--json] [--batch N] [--repetitions N]: `kvstream bench gpu --chunks`
// for builds without the `kvstream` command (KVSTREAM_ONLY=codec: the GPU machines).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/gpu/gpu_bench.h"

int main(int argc, char** argv) {
  kvstream::bench::GpuBenchOptions options;
  std::string command = "kvstream_gpu_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    command += " " + a;
    const bool has_value = i + 1 < argc;
    if (a == "--json") {
      options.json = true;
    } else if (a == "--chunks" && has_value) {
      options.chunks_dir = argv[++i];
      command += std::string(" ") + argv[i];
    } else if ((a == "--batch" || a == "--repetitions") && has_value) {
      const int v = std::atoi(argv[++i]);
      command += std::string(" ") + argv[i];
      if (v < 1 || v > 1024) {
        std::fprintf(stderr, "%s = %s outside 1..1024\n", a.c_str(), argv[i]);
        return 2;
      }
      (a == "--batch" ? options.batch : options.repetitions) = v;
    } else {
      std::fprintf(stderr, "usage: kvstream_gpu_bench --chunks DIR [--json] [--batch N] [--repetitions N]\n");
      return 2;
    }
  }
  if (options.chunks_dir.empty()) {
    std::fprintf(stderr, "kvstream_gpu_bench: --chunks DIR is required\n");
    return 2;
  }
  const kvstream::Status s = kvstream::bench::RunGpuBench(options, command);
  if (!s.ok()) {
    std::fprintf(stderr, "kvstream_gpu_bench: %s\n", s.ToString().c_str());
    return s.code() == kvstream::StatusCode::kUnsupported ? 77 : 1;
  }
  return 0;
}
