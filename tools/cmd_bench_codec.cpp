// `kvstream bench codec`: kvstream's levels against fp16, int8, zstd and cachegen-ref on the real KV of a
// model, measured in one run (bench/codec_bench.h). JSON lines with --json, a table otherwise.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/codec_bench.h"
#include "bench/kvstream_levels.h"
#include "tools/command.h"
#include "bench/machine.h"

namespace kvstream::cli {
namespace {

std::string ShortNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

nlohmann::json Nullable(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

Status Run(const Args& args) {
  bench::CodecBenchOptions o;
  o.model = args.GetString("model", o.model);
  o.text = args.GetString("text", o.text);
  KVSTREAM_ASSIGN_OR_RETURN(int64_t context, args.GetInt("context-tokens", o.context_tokens));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval, args.GetInt("eval-tokens", o.eval_tokens));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t chunk, args.GetInt("chunk-tokens", o.chunk_tokens));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", o.threads));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t reps, args.GetInt("repetitions", o.repetitions));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t windows, args.GetInt("windows", o.windows));
  if (windows < 1 || windows > 64) return Status::InvalidArgument("--windows = " + std::to_string(windows) + " outside 1..64");
  for (auto [name, v] : {std::pair{"context-tokens", context}, {"eval-tokens", eval}, {"chunk-tokens", chunk},
                         {"threads", threads}, {"repetitions", reps}}) {
    if (v < 1 || v > (1 << 20)) {
      return Status::InvalidArgument(std::string("--") + name + " = " + std::to_string(v) + " outside [1, 1048576]");
    }
  }
  o.context_tokens = static_cast<int>(context);
  o.eval_tokens = static_cast<int>(eval);
  o.chunk_tokens = static_cast<int>(chunk);
  o.threads = static_cast<int>(threads);
  o.repetitions = static_cast<int>(reps);
  o.windows = static_cast<int>(windows);
  const bool json = args.Has("json");
  o.transform = args.Has("transform");
  o.predict = args.Has("predict");
  KVSTREAM_ASSIGN_OR_RETURN(o.fine_fraction, args.GetDouble("fine-fraction", o.fine_fraction));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t fine_level, args.GetInt("fine-level", o.fine_level));
  if (!(o.fine_fraction >= 0.0 && o.fine_fraction <= 1.0)) {
    return Status::InvalidArgument("--fine-fraction = " + std::to_string(o.fine_fraction) + " outside [0, 1]");
  }
  if (fine_level < 1 || fine_level > 15) {
    return Status::InvalidArgument("--fine-level = " + std::to_string(fine_level) + " outside 1..15");
  }
  o.fine_level = static_cast<Level>(fine_level);
  const std::string profile_path = args.GetString("profile", "");
  const std::string command = "kvstream bench codec --model " + o.model + " --text " + o.text + " --context-tokens " +
                              std::to_string(o.context_tokens) + " --eval-tokens " + std::to_string(o.eval_tokens) +
                              (o.windows > 1 ? " --windows " + std::to_string(o.windows) : "") +
                              " --chunk-tokens " + std::to_string(o.chunk_tokens) + " --threads " +
                              std::to_string(o.threads) + " --repetitions " + std::to_string(o.repetitions) +
                              (profile_path.empty() ? "" : " --profile " + profile_path) +
                              (o.transform ? " --transform" : "") + (o.predict ? " --predict" : "") +
                              (o.fine_fraction > 0 ? " --fine-fraction " + ShortNumber(o.fine_fraction) +
                                                         " --fine-level " + std::to_string(o.fine_level)
                                                   : "") +
                              (json ? " --json" : "");
  const std::string calibration_text = args.GetString("calibration-text", o.text);
  KVSTREAM_ASSIGN_OR_RETURN(int64_t cal_offset, args.GetInt("calibration-offset", -1));

  bench::CalibrationSlice calibration;
  const bench::Machine machine = bench::ThisMachine();
  auto on_context = [&](const bench::CodecBenchContext& c) {
    nlohmann::json h;
    h["header"] = true;
    h["date"] = bench::UtcNow();
    h["command"] = command;
    h["machine"] = bench::MachineJson(machine);
    h["model"] = c.model_name;
    h["layers"] = c.layers;
    h["kv_dim"] = c.kv_dim;
    h["context_tokens"] = c.context_tokens;
    h["eval_tokens"] = o.eval_tokens;
    h["windows"] = c.windows;
    h["chunks"] = c.chunks;
    h["ppl_reference"] = c.ppl_reference;
    if (calibration.tokens > 0) {
      h["calibration"] = {{"text", calibration.text}, {"first_token", calibration.first_token}, {"tokens", calibration.tokens}};
    }
    if (json) {
      std::printf("%s\n", h.dump().c_str());
    } else {
      std::printf("kvstream bench codec — %s (%d layers x %d channels), %d context tokens in %d chunks, eval %d\n"
                  "machine: %s; reference ppl %.4f\n",
                  c.model_name.c_str(), c.layers, c.kv_dim, c.context_tokens, c.chunks, o.eval_tokens,
                  bench::DescribeMachine(machine).c_str(), c.ppl_reference);
      if (c.windows > 1) {
        std::printf("sizes and quality over %d windows (quality: their mean, top-1 min the lowest); speeds from the "
                    "first\n",
                    c.windows);
      }
      if (calibration.tokens > 0) {
        std::printf("kvstream profile learned from tokens [%lld, %lld) of %s\n", static_cast<long long>(calibration.first_token),
                    static_cast<long long>(calibration.first_token + calibration.tokens), calibration.text.c_str());
      }
      std::printf("\n");
      std::printf("%-18s %-5s %8s %7s %7s %8s %8s %8s %8s %16s %9s %14s%s\n", "method", "level", "bits/val", "x fp16",
                  "x int8", "entr+%", "enc GB/s", "dec GB/s", "decN GB/s", "ppl +% ± se", "KL", "top-1 ± se",
                  c.windows > 1 ? "  min" : "");
    }
    std::fflush(stdout);
  };
  auto on_row = [&](const bench::CodecBenchRow& r) {
    if (json) {
      nlohmann::json j;
      j["method"] = r.method;
      j["level"] = LevelName(r.level);
      j["bits_per_value"] = r.bits_per_value;
      j["ratio_vs_fp16"] = r.ratio_vs_fp16;
      j["ratio_vs_int8"] = r.ratio_vs_int8;
      j["entropy_overhead_pct"] = Nullable(r.entropy_overhead_pct);
      j["encode_gbps_per_core"] = r.encode_gbps_per_core;
      j["decode_gbps_per_core"] = r.decode_gbps_per_core;
      j["decode_gbps"] = r.decode_gbps;
      j["ppl_delta_pct"] = r.ppl_delta_pct;
      j["ppl_delta_stderr"] = r.ppl_delta_stderr;
      j["kl_mean"] = r.kl_mean;
      j["top1_agreement"] = r.top1_agreement;
      j["top1_stderr"] = r.top1_stderr;
      j["negligible"] = r.negligible;
      if (r.top1_agreement_min) j["top1_agreement_min"] = *r.top1_agreement_min;
      if (r.rans_vs_ac16_pct) {
        j["rans_vs_ac16_pct"] = *r.rans_vs_ac16_pct;
        j["rans_vs_ac16_within_1pct"] = std::abs(*r.rans_vs_ac16_pct) <= 1.0;
      }
      if (!r.breakdown.empty()) {
        nlohmann::json b;
        for (const auto& [name, bytes] : r.breakdown) b[name] = bytes;
        j["bytes"] = b;
      }
      std::printf("%s\n", j.dump().c_str());
    } else {
      char entropy[32] = "-";
      if (r.entropy_overhead_pct) std::snprintf(entropy, sizeof entropy, "%.3f", *r.entropy_overhead_pct);
      std::printf("%-18s %-5s %8.3f %7.2f %7.2f %8s %8.3f %8.3f %8.3f %+8.3f ±%-6.3f %9.2e %7.4f ±%-6.4f", r.method.c_str(),
                  LevelName(r.level).c_str(), r.bits_per_value, r.ratio_vs_fp16, r.ratio_vs_int8, entropy,
                  r.encode_gbps_per_core, r.decode_gbps_per_core, r.decode_gbps, r.ppl_delta_pct, r.ppl_delta_stderr,
                  r.kl_mean, r.top1_agreement, r.top1_stderr);
      if (r.top1_agreement_min) std::printf(" %7.4f", *r.top1_agreement_min);
      std::printf("%s\n", r.negligible ? "  negligible" : "");
      if (r.rans_vs_ac16_pct) {
        std::printf("  cachegen-ref check: rANS payload vs ideal 16-bit arithmetic coding %+.3f%% (%s 1%%)\n",
                    *r.rans_vs_ac16_pct, std::abs(*r.rans_vs_ac16_pct) <= 1.0 ? "within" : "NOT within");
      }
    }
    std::fflush(stdout);
  };
  return bench::RunCodecBench(o, bench::KvstreamCodecFactory(calibration_text, cal_offset, profile_path, o, &calibration), on_context, on_row);
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(bench_codec, {
    "bench codec",
    "compare kvstream's levels with fp16, int8, zstd and cachegen-ref on real KV",
    "usage: kvstream bench codec [flags]\n"
    "  --model NAME|PATH        model whose KV is measured (default smollm2)\n"
    "  --text FILE              text of the context (default /usr/share/common-licenses/GPL-3)\n"
    "  --context-tokens N       tokens of context compressed (default 2048)\n"
    "  --eval-tokens M          continuation tokens scored by the quality meter (default 1024)\n"
    "  --windows W              score W windows of context + eval tokens, one after the other through the\n"
    "                           text (as kvstream eval --windows): sizes over all, quality their mean and\n"
    "                           the lowest top-1 (top1_agreement_min), standard errors of the mean over\n"
    "                           all scored tokens, negligible when ppl <= +1 % and top-1 >= 98 %; speeds\n"
    "                           from the first (default 2)\n"
    "  --chunk-tokens N         tokens per chunk (default 256)\n"
    "  --threads N              threads for the decode_gbps column (default 1)\n"
    "  --repetitions R          timing repetitions, best taken (default 3)\n"
    "  --calibration-text FILE  text the kvstream profile is learned from (default: --text)\n"
    "  --calibration-offset T   first token of the calibration slice (default: after the windows)\n"
    "  --profile FILE           use this kvstream profile (kvstream profile) instead of learning one; a\n"
    "                           profile with a transform (prediction) adds the kvstream-transform\n"
    "                           (kvstream-predicted) rows\n"
    "  --transform              learn the transform scheme too and add its rows (method kvstream-transform)\n"
    "  --predict                learn the transform and predicted schemes and add both's rows (method\n"
    "                           kvstream-predicted); the profile then learns from 4096 tokens, not 2048\n"
    "  --fine-fraction F        also measure the transform and predicted levels coarser than --fine-level\n"
    "                           with the fraction F of the context's tokens, those that received the most\n"
    "                           attention in the prefill, coded at --fine-level (methods\n"
    "                           kvstream-transform+fine, kvstream-predicted+fine; default 0: not)\n"
    "  --fine-level L           the fine rows' level (default 2)\n"
    "  --json                   one JSON object per line (a header, then one per method and level)",
    {"model", "text", "context-tokens", "eval-tokens", "windows", "chunk-tokens", "threads", "repetitions", "calibration-text",
     "calibration-offset", "profile", "fine-fraction", "fine-level"},
    {"json", "transform", "predict"},
    &Run,
});

}  // namespace kvstream::cli
