// `kvstream bench gpu`: the GPU decoder's throughput on real chunks against a device-to-device copy of the
// same output, every decode checked bit for bit against the CPU decoder (bench/gpu/gpu_bench.h). With
// --model it first encodes a context of the model into a chunk folder (bench/gpu/gpu_chunk_set.h), which
// --write-chunks keeps for a GPU machine (scripts/gpu_check.sh carries it there).
#include <cstdio>
#include <filesystem>
#include <string>

#include "bench/gpu/gpu_chunk_set.h"
#include "kvstream/cuda.h"
#include "kvstream/model.h"
#include "tools/codec_files.h"
#include "tools/command.h"
#include "tools/model_args.h"
#if KVSTREAM_HAS_CUDA
#include "bench/gpu/gpu_bench.h"
#endif

namespace kvstream::cli {
namespace {

Status WriteFolderFromModel(const Args& args, const std::string& dir) {
  const std::string profile_path = args.GetString("profile", "");
  if (profile_path.empty()) return Status::InvalidArgument("bench gpu: --model needs --profile P (the chunks' profile)");
  KVSTREAM_ASSIGN_OR_RETURN(Profile profile, Profile::Load(profile_path));
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args, "smollm2"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("context-tokens", 512));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t chunk, args.GetInt("chunk-tokens", 256));
  if (tokens < 1 || tokens > 65536 || chunk < 1 || chunk > 65536) {
    return Status::InvalidArgument("bench gpu: --context-tokens and --chunk-tokens must lie in 1..65536");
  }
  const ModelConfig config = model->config();
  KVSTREAM_RETURN_IF_ERROR(profile.CheckShape(config.n_layers, config.kv_dim(), "the model").WithContext("--profile"));
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> ids, TokenizeFile(*model, args.GetString("text", kDefaultText)));
  if (static_cast<int64_t>(ids.size()) < tokens) {
    return Status::InvalidArgument("bench gpu: --text has " + std::to_string(ids.size()) + " tokens, fewer than " +
                                   std::to_string(tokens));
  }
  ids.resize(static_cast<size_t>(tokens));
  KvCache cache = KvCache::Allocate(config, static_cast<int>(tokens));
  KVSTREAM_RETURN_IF_ERROR(model->Forward(ids, cache, nullptr));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t passthrough, args.GetInt("passthrough-tokens", 128));
  if (passthrough < 1 || passthrough > tokens) {
    return Status::InvalidArgument("bench gpu: --passthrough-tokens must lie in 1..--context-tokens");
  }
  bench::GpuChunkFolderOptions options;
  options.chunk_tokens = chunk;
  options.passthrough_tokens = passthrough;
  KVSTREAM_ASSIGN_OR_RETURN(bench::GpuChunkFolder folder,
                            bench::MakeGpuChunkFolder(cache.keys(), cache.values(), cache.Importance(), profile, options));
  KVSTREAM_RETURN_IF_ERROR(bench::WriteGpuChunkFolder(dir, folder));
  uint64_t bytes = folder.profile_bytes.size();
  for (const auto& set : folder.sets) {
    for (const auto& c : set.chunks) bytes += c.size();
  }
  std::printf("bench gpu: wrote %zu chunk sets of %s (%lld tokens) and the profile to %s: %.1f MiB\n", folder.sets.size(),
              config.name.c_str(), static_cast<long long>(tokens), dir.c_str(), static_cast<double>(bytes) / (1 << 20));
  return Status::Ok();
}

Status Run(const Args& args) {
  std::string dir = args.GetString("chunks", "");
  const std::string write = args.GetString("write-chunks", "");
  if (dir.empty() == !args.Has("model")) return Status::InvalidArgument("bench gpu: give --chunks DIR or --model M");
  if (args.Has("model")) {
    dir = write.empty() ? (std::filesystem::temp_directory_path() / "kvstream-bench-gpu").string() : write;
    KVSTREAM_RETURN_IF_ERROR(WriteFolderFromModel(args, dir));
  }
  std::string why;
  if (!GpuAvailable(&why)) {
    if (!write.empty()) {
      std::printf("bench gpu: no GPU to measure on here (%s); run kvstream_gpu_bench --chunks %s on one\n", why.c_str(),
                  dir.c_str());
      return Status::Ok();
    }
    return Status::Unsupported("bench gpu: " + why);
  }
#if KVSTREAM_HAS_CUDA
  bench::GpuBenchOptions options;
  options.chunks_dir = dir;
  options.json = args.Has("json");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t batch, args.GetInt("batch", 0));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t reps, args.GetInt("repetitions", options.repetitions));
  if (batch < 0 || batch > 1024 || reps < 1 || reps > 1024) {
    return Status::InvalidArgument("bench gpu: --batch in 0..1024 and --repetitions in 1..1024");
  }
  options.batch = static_cast<int>(batch);
  options.repetitions = static_cast<int>(reps);
  return bench::RunGpuBench(options, "kvstream bench gpu --chunks " + dir + (options.json ? " --json" : ""));
#else
  return Status::Unsupported("bench gpu: this build has no CUDA");
#endif
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(bench_gpu, {
    "bench gpu",
    "GPU decode throughput on real chunks beside a device-to-device copy, checked against the CPU decoder",
    "usage: kvstream bench gpu --chunks DIR | --model NAME --profile P [flags]\n"
    "  --chunks DIR             a chunk folder (MANIFEST, chunk files, profile; bench/gpu/gpu_chunk_set.h)\n"
    "  --model NAME|PATH        encode a context of this model first (every scheme and level kind the\n"
    "                           profile supports, fp16 and int8)\n"
    "  --profile P              the profile the lossy chunks use (with --model)\n"
    "  --text FILE              the context's text (default /usr/share/common-licenses/GPL-3)\n"
    "  --context-tokens N       tokens of the lossy sets (default 512)\n"
    "  --passthrough-tokens N   tokens of the fp16 and int8 sets (default 128: a small folder to carry)\n"
    "  --chunk-tokens N         tokens per chunk (default 256)\n"
    "  --write-chunks DIR       keep the folder there (without a GPU: write it and stop)\n"
    "  --batch N                contexts decoded at once into distinct destinations (default: about 1 GiB\n"
    "                           of output, at most 64)\n"
    "  --repetitions N          timed runs per figure, median reported (default 5)\n"
    "  --json                   JSON lines: scheme, level, chunks, tokens, single_context_gbps,\n"
    "                           batch_contexts, decode_gbps, memcpy_gbps, ratio_to_memcpy, bit_identical\n"
    "Needs a CUDA device to measure; KVSTREAM_ONLY=codec builds kvstream_gpu_bench --chunks for GPU machines.",
    {"chunks", "model", "tokenizer", "threads", "profile", "text", "context-tokens", "passthrough-tokens", "chunk-tokens",
     "write-chunks",
     "batch", "repetitions"},
    {"json"},
    Run,
});

}  // namespace kvstream::cli
