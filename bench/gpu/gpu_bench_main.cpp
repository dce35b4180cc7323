// kvstream_gpu_bench: `kvstream bench gpu --chunks` and `kvstream bench pipeline --chunks` for builds
// without the `kvstream` command (KVSTREAM_ONLY=codec: the GPU machines).
//   kvstream_gpu_bench --chunks DIR [--json] [--batch N] [--repetitions N]
//   kvstream_gpu_bench --pipeline --chunks DIR [--json] [--device cuda|cpu|both] [--repetitions N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/gpu/gpu_bench.h"
#include "bench/gpu/pipeline_bench.h"

namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: kvstream_gpu_bench --chunks DIR [--json] [--batch N] [--repetitions N]\n"
               "       kvstream_gpu_bench --pipeline --chunks DIR [--json] [--device cuda|cpu|both] [--repetitions N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  kvstream::bench::GpuBenchOptions decode;
  kvstream::bench::PipelineBenchOptions pipeline;
  bool pipeline_mode = false;
  std::string command = "kvstream_gpu_bench";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    command += " " + a;
    const bool has_value = i + 1 < argc;
    if (a == "--json") {
      decode.json = pipeline.json = true;
    } else if (a == "--pipeline") {
      pipeline_mode = true;
    } else if (a == "--chunks" && has_value) {
      decode.chunks_dir = pipeline.chunks_dir = argv[++i];
      command += std::string(" ") + argv[i];
    } else if (a == "--device" && has_value) {
      const std::string d = argv[++i];
      command += " " + d;
      if (d != "cuda" && d != "cpu" && d != "both") return Usage();
      pipeline.devices = d == "both" ? std::vector<std::string>{"cuda", "cpu"} : std::vector<std::string>{d};
    } else if ((a == "--batch" || a == "--repetitions") && has_value) {
      const int v = std::atoi(argv[++i]);
      command += std::string(" ") + argv[i];
      if (v < 1 || v > 1024) {
        std::fprintf(stderr, "%s = %s outside 1..1024\n", a.c_str(), argv[i]);
        return 2;
      }
      if (a == "--batch") {
        decode.batch = v;
      } else {
        decode.repetitions = pipeline.repetitions = v;
      }
    } else {
      return Usage();
    }
  }
  if (decode.chunks_dir.empty()) {
    std::fprintf(stderr, "kvstream_gpu_bench: --chunks DIR is required\n");
    return 2;
  }
  const kvstream::Status s = pipeline_mode ? kvstream::bench::RunPipelineBench(pipeline, command)
                                           : kvstream::bench::RunGpuBench(decode, command);
  if (!s.ok()) {
    std::fprintf(stderr, "kvstream_gpu_bench: %s\n", s.ToString().c_str());
    return s.code() == kvstream::StatusCode::kUnsupported ? 77 : 1;
  }
  return 0;
}
