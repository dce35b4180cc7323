// `kvstream` — entry point: finds the subcommand, parses its flags, prints errors.
#include <cstdio>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/transport.h"
#include "tools/command.h"

namespace {

void PrintUsage() {
  std::printf(
      "kvstream — compress, stream and measure LLM KV caches\n\n"
      "usage: kvstream COMMAND [flags]    (kvstream COMMAND --help for its flags)\n\n"
      "commands:\n");
  for (const auto& [name, cmd] : kvstream::cli::Commands()) {
    std::printf("  %-16s %s\n", name.c_str(), cmd.summary.c_str());
  }
  std::printf(
      "\nEvery flag --name can also be set by the environment variable KVSTREAM_NAME\n"
      "(upper case, '-' -> '_'); a flag on the command line wins.\n\n"
      "Other environment variables:\n"
      "  KVSTREAM_MODEL_CACHE    where named models are cached (default ~/.cache/kvstream/models)\n"
      "  KVSTREAM_SHARED_MODELS  folder holding stories260K and TinyStories-656K (default ../shared/models)\n"
      "  KVSTREAM_BENCH_DATA     folder of the benchmarks' traces/ and plot_adapt.py (default: share/kvstream/bench\n"
      "                          beside an installed kvstream, else the source tree's bench/ for build/bin/kvstream)\n"
      "  KVSTREAM_DISABLE_AVX2   1: run the portable scalar kernels instead of AVX2 and AVX-512\n"
      "  KVSTREAM_DISABLE_AVX512 1: run the AVX2 kernels on a CPU with AVX-512 (and AVX-512 VNNI)\n"
      "  KVSTREAM_DISABLE_AMX    1: run the AVX-512 kernels on a CPU with AMX (the transform's sums)\n"
      "  OPENBLAS_CORETYPE       OpenBLAS's kernels for the model, e.g. SkylakeX where the installed OpenBLAS\n"
      "                          does not know the CPU and picks Prescott's (docs/model.md, \"Forward pass\")\n"
      "  UCX_TLS, UCX_NET_DEVICES, ...  UCX's own settings select the data plane's transports\n"
      "                          (ucx_info -c lists them; see docs/transport.md)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  if (words.empty() || words[0] == "--help" || words[0] == "-h" || words[0] == "help") {
    PrintUsage();
    return words.empty() ? 2 : 0;
  }
  if (words[0] == "--version") {
    std::printf("kvstream %s (chunk format %d, protocol %u)\n", KVSTREAM_VERSION, kvstream::kChunkFormatVersion,
                static_cast<unsigned>(kvstream::kProtocolVersion));
    return 0;
  }
  const auto& commands = kvstream::cli::Commands();
  const kvstream::cli::Command* command = nullptr;
  size_t used = 0;
  if (words.size() >= 2) {
    auto it = commands.find(words[0] + " " + words[1]);
    if (it != commands.end()) {
      command = &it->second;
      used = 2;
    }
  }
  if (!command) {
    auto it = commands.find(words[0]);
    if (it != commands.end()) {
      command = &it->second;
      used = 1;
    }
  }
  if (!command) {
    std::fprintf(stderr, "kvstream: unknown command '%s'\n\n", words[0].c_str());
    PrintUsage();
    return 2;
  }
  std::vector<std::string> rest(words.begin() + static_cast<long>(used), words.end());
  for (const auto& w : rest) {
    if (w == "--help" || w == "-h") {
      std::printf("kvstream %s — %s\n\n%s\n", command->name.c_str(), command->summary.c_str(), command->help.c_str());
      return 0;
    }
  }
  auto args = kvstream::cli::Args::Parse(rest, command->flags, command->switches);
  if (!args.ok()) {
    std::fprintf(stderr, "kvstream %s: %s\n", command->name.c_str(), args.status().ToString().c_str());
    return 2;
  }
  kvstream::Status status = command->run(*args);
  if (status.ok()) return 0;
  std::fprintf(stderr, "kvstream %s: %s\n", command->name.c_str(), status.ToString().c_str());
  return status.code() == kvstream::StatusCode::kInvalidArgument ? 2 : 1;
}
