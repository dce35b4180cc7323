// `kvstream bench pipeline`: the device pipeline (kvstream/device_pipeline.h) fed by a local source that
// paces each chunk set's payloads at link rates, with no network, so that it runs on a GPU machine: per
// set, send order and rate, when the KV (and its layer 0) is ready against when the last byte arrived. The CPU rows (today's host
// path: the CPU decoder on decode threads, paced the same way) run in the same invocation as the baseline.
#pragma once

#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::bench {

struct PipelineBenchOptions {
  std::string chunks_dir;                         // a chunk folder (gpu_chunk_set.h)
  std::vector<std::string> devices = {"cuda", "cpu"};  // "cuda": the device pipeline; "cpu": CPU decode
  std::vector<double> link_gbps = {1, 10, 25, 100};
  int cpu_threads = 2;   // decode threads of the cpu rows
  int ring_slots = 4;    // the device pipeline's ring
  int repetitions = 3;   // runs per row, the median KV-ready reported
  // Send orders: "default" (chunks whole, in order) and "layer-major" (the context's layers in
  // `layer_groups` groups, group g of every chunk before group g + 1; the device pipeline then holds a
  // ring slot per chunk).
  std::vector<std::string> orders = {"default", "layer-major"};
  int layer_groups = 8;
  bool json = false;
};

// Prints a header (date, command, CPU, GPU) and one row per device, set and rate. A "cuda" device without
// CUDA fails with kUnsupported before anything runs.
Status RunPipelineBench(const PipelineBenchOptions& options, const std::string& command);

}  // namespace kvstream::bench
