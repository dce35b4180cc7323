// `kvstream bench pipeline`: the device pipeline fed by a local source pacing a chunk folder's payloads at
// link rates, beside today's CPU decode paced the same way (bench/gpu/pipeline_bench.h).
#include <sstream>
#include <string>

#include "bench/gpu/pipeline_bench.h"
#include "tools/command.h"

namespace kvstream::cli {
namespace {

Status Run(const Args& args) {
  bench::PipelineBenchOptions options;
  options.chunks_dir = args.GetString("chunks", "");
  if (options.chunks_dir.empty()) {
    return Status::InvalidArgument(
        "bench pipeline: --chunks DIR is required (write one with kvstream bench gpu --model smollm2 --profile P "
        "--passthrough-tokens 512 --write-chunks DIR)");
  }
  const std::string device = args.GetString("device", "both");
  if (device == "both") {
    options.devices = {"cuda", "cpu"};
  } else if (device == "cuda" || device == "cpu") {
    options.devices = {device};
  } else {
    return Status::InvalidArgument("bench pipeline: --device " + device + ", expected cuda, cpu or both");
  }
  if (args.Has("rates")) {
    options.link_gbps.clear();
    std::stringstream list(args.GetString("rates"));
    for (std::string item; std::getline(list, item, ',');) {
      char* end = nullptr;
      const double g = std::strtod(item.c_str(), &end);
      if (item.empty() || *end != '\0') return Status::InvalidArgument("bench pipeline: --rates item '" + item + "' is not a number");
      options.link_gbps.push_back(g);
    }
  }
  if (args.Has("orders")) {
    options.orders.clear();
    std::stringstream list(args.GetString("orders"));
    for (std::string item; std::getline(list, item, ',');) options.orders.push_back(item);
  }
  KVSTREAM_ASSIGN_OR_RETURN(int64_t groups, args.GetInt("layer-groups", options.layer_groups));
  if (groups < 1 || groups > 1024) return Status::InvalidArgument("bench pipeline: --layer-groups in 1..1024");
  options.layer_groups = static_cast<int>(groups);
  KVSTREAM_ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", options.cpu_threads));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t slots, args.GetInt("ring-slots", options.ring_slots));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t reps, args.GetInt("repetitions", options.repetitions));
  if (threads < 1 || threads > 256 || slots < 1 || slots > 64 || reps < 1 || reps > 100) {
    return Status::InvalidArgument("bench pipeline: --threads in 1..256, --ring-slots in 1..64, --repetitions in 1..100");
  }
  options.cpu_threads = static_cast<int>(threads);
  options.ring_slots = static_cast<int>(slots);
  options.repetitions = static_cast<int>(reps);
  options.json = args.Has("json");
  return bench::RunPipelineBench(options, "kvstream bench pipeline --chunks " + options.chunks_dir + " --device " + device);
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(bench_pipeline, {
    "bench pipeline",
    "KV-ready time of paced chunk payloads decoded by the device pipeline (GPU) and by CPU threads",
    "usage: kvstream bench pipeline --chunks DIR [flags]\n"
    "  --chunks DIR             a chunk folder (bench/gpu/gpu_chunk_set.h; kvstream bench gpu --model ...\n"
    "                           --passthrough-tokens 512 --write-chunks DIR gives fp16 and int8 the lossy\n"
    "                           sets' context, so that every row compares with int8's)\n"
    "  --device cuda|cpu|both   the device pipeline on the GPU, CPU decode threads, or both (default both;\n"
    "                           cuda without a GPU fails before anything runs)\n"
    "  --rates LIST             link rates in Gbit/s the source paces at (default 1,10,25,100)\n"
    "  --orders LIST            send orders: default (chunks whole) and layer-major (the layers in\n"
    "                           --layer-groups groups, group g of every chunk before group g+1)\n"
    "                           (default default,layer-major)\n"
    "  --layer-groups N         layer groups of the layer-major order (default 8)\n"
    "  --threads N              CPU decode threads of the cpu rows (default 2)\n"
    "  --ring-slots N           the device pipeline's ring (default 4)\n"
    "  --repetitions N          runs per row, median KV-ready reported (default 3)\n"
    "  --json                   JSON lines: method, scheme, level, device, path, order, tokens, bytes,\n"
    "                           link_gbps, kv_ready_ms, first_layer_ms (layer 0 of every chunk decoded),\n"
    "                           decode_ms, last_byte_ms, kv_ready_vs_int8, bit_identical\n"
    "No network: the source delivers each payload when its last byte would have crossed the link.",
    {"chunks", "device", "rates", "orders", "layer-groups", "threads", "ring-slots", "repetitions"},
    {"json"},
    Run,
});

}  // namespace kvstream::cli
