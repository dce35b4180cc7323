// `kvstream bench codec`: kvstream's levels against fp16, int8, zstd and cachegen-ref on the real KV of a
// model, measured in one run (bench/codec_bench.h). JSON lines with --json, a table otherwise.
#include <algorithm>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/codec_bench.h"
#include "bench/domain_suite.h"
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

// Reads each flag into its int, whose value is the default; each must be in [1, 1048576].
Status ReadCountFlags(const Args& args, std::initializer_list<std::pair<const char*, int*>> flags) {
  for (const auto& [name, value] : flags) {
    KVSTREAM_ASSIGN_OR_RETURN(int64_t v, args.GetInt(name, *value));
    if (v < 1 || v > (1 << 20)) {
      return Status::InvalidArgument(std::string("--") + name + " = " + std::to_string(v) + " outside [1, 1048576]");
    }
    *value = static_cast<int>(v);
  }
  return Status::Ok();
}

nlohmann::json RowJson(const bench::DomainRow& r, const bench::DomainSuiteOptions& o) {
  nlohmann::json j;
  j["domain"] = r.domain;
  j["method"] = r.method;
  j["level"] = LevelName(r.level);
  j["scheme"] = r.scheme.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.scheme);
  j["profile"] = r.profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.profile);
  j["bits_per_value"] = r.quality.bits_per_value;
  j["ratio_vs_int8"] = r.ratio_vs_int8;
  j["ppl_delta_pct"] = r.quality.ppl_delta_pct;
  j["ppl_delta_stderr"] = r.quality.ppl_delta_stderr;
  j["kl_mean"] = r.quality.kl_mean;
  j["top1_agreement"] = r.quality.top1_agreement;
  j["top1_stderr"] = r.quality.top1_stderr;
  j["negligible"] = IsNegligible(r.quality);
  j["context_tokens"] = o.context_tokens;
  j["eval_tokens"] = o.eval_tokens;
  j["windows"] = r.quality.windows;
  return j;
}

void PrintDomainRow(const bench::DomainRow& r) {
  const std::string method = r.method + (r.profile.empty() ? "" : "-" + r.scheme + " (" + r.profile + ")");
  std::printf("%-10s %-28s %-5s %8.3f %7.2f %+8.3f ±%-6.3f %7.4f ±%-6.4f%s\n", r.domain.c_str(), method.c_str(),
              LevelName(r.level).c_str(), r.quality.bits_per_value, r.ratio_vs_int8, r.quality.ppl_delta_pct,
              r.quality.ppl_delta_stderr, r.quality.top1_agreement, r.quality.top1_stderr,
              IsNegligible(r.quality) ? "  negligible" : "");
}

// `--domains`: the domain suite (bench/domain_suite.h).
Status RunDomains(const Args& args) {
  bench::DomainSuiteOptions o;
  o.model = args.GetString("model", o.model);
  o.manifest = args.GetString("manifest", "");
  KVSTREAM_RETURN_IF_ERROR(ReadCountFlags(args, {{"context-tokens", &o.context_tokens}, {"eval-tokens", &o.eval_tokens},
                                                 {"windows", &o.windows}, {"chunk-tokens", &o.chunk_tokens},
                                                 {"profile-contexts", &o.profile_contexts_per_domain},
                                                 {"profile-context-tokens", &o.profile_context_tokens}}));
  if (args.Has("levels")) {
    o.levels.clear();
    for (const std::string& name : SplitList(args.GetString("levels", ""))) {
      Level level = 0;
      if (!ParseLevel(name, &level) || !IsLossyLevel(level)) {
        return Status::InvalidArgument("--levels: '" + name + "' is not a lossy level (L1..L15)");
      }
      o.levels.push_back(level);
    }
  }
  KVSTREAM_ASSIGN_OR_RETURN(o.fine_fraction, args.GetDouble("fine-fraction", o.fine_fraction));
  if (!(o.fine_fraction >= 0.0 && o.fine_fraction <= 1.0)) {
    return Status::InvalidArgument("--fine-fraction = " + std::to_string(o.fine_fraction) + " outside [0, 1]");
  }
  const bool json = args.Has("json");
  const bench::Machine machine = bench::ThisMachine();
  if (json) {
    nlohmann::json h;
    h["header"] = true;
    h["date"] = bench::UtcNow();
    h["suite"] = "domains";
    h["machine"] = bench::MachineJson(machine);
    h["model"] = o.model;
    h["manifest"] = o.manifest.empty() ? "bench/domains/manifest.json" : o.manifest.string();
    h["context_tokens"] = o.context_tokens;
    h["eval_tokens"] = o.eval_tokens;
    h["windows"] = o.windows;
    h["profile"] = {{"scheme", "predicted"}, {"byte_predictors", true}, {"contexts_per_domain", o.profile_contexts_per_domain},
                    {"context_tokens", o.profile_context_tokens}, {"fine_fraction", o.fine_fraction}};
    std::printf("%s\n", h.dump().c_str());
  } else {
    std::printf("kvstream bench codec --domains — %s; %d windows of %d context + %d scored tokens per domain\n"
                "machine: %s\nprofiles: mix = learned from every domain, others = from all domains but the scored one\n\n",
                o.model.c_str(), o.windows, o.context_tokens, o.eval_tokens, bench::DescribeMachine(machine).c_str());
  }
  std::fflush(stdout);
  bool header_printed = false;
  // Per profile: the domains' smallest negligible ratios, for the mean over domains.
  std::map<std::string, std::vector<double>> negligible_ratios;
  std::map<std::string, int> domains_without;
  auto on_progress = [&](const std::string& what) {
    std::fprintf(stderr, "[%s] %s\n", bench::UtcNow().c_str(), what.c_str());
  };
  auto on_row = [&](const bench::DomainRow& r) {
    if (json) {
      std::printf("%s\n", RowJson(r, o).dump().c_str());
    } else {
      if (!header_printed) {
        std::printf("%-10s %-28s %-5s %8s %7s %16s %14s\n", "domain", "method (profile)", "level", "bits/val", "x int8",
                    "ppl +% ± se", "top-1 ± se");
        header_printed = true;
      }
      PrintDomainRow(r);
    }
    std::fflush(stdout);
  };
  auto on_summary = [&](const bench::DomainSummary& s) {
    if (s.smallest_negligible) {
      negligible_ratios[s.profile].push_back(s.smallest_negligible->ratio_vs_int8);
    } else {
      ++domains_without[s.profile];
    }
    if (json) {
      nlohmann::json j;
      j["summary"] = "domain";
      j["domain"] = s.domain;
      j["profile"] = s.profile;
      j["smallest_negligible"] = s.smallest_negligible ? RowJson(*s.smallest_negligible, o) : nlohmann::json(nullptr);
      j["cachegen_smallest_negligible"] = s.cachegen_negligible ? RowJson(*s.cachegen_negligible, o) : nlohmann::json(nullptr);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("  %s, %s profile: smallest negligible %s", s.domain.c_str(), s.profile.c_str(),
                  s.smallest_negligible ? (LevelName(s.smallest_negligible->level) + " at " +
                                           ShortNumber(s.smallest_negligible->quality.bits_per_value) + " bits/value, " +
                                           ShortNumber(s.smallest_negligible->ratio_vs_int8) + "x below int8").c_str()
                                        : "none of the levels scored");
      std::printf("; cachegen-ref %s\n", s.cachegen_negligible ? (LevelName(s.cachegen_negligible->level) + " at " +
                                                                   ShortNumber(s.cachegen_negligible->quality.bits_per_value) +
                                                                   " bits/value").c_str()
                                                                : "none negligible");
    }
    std::fflush(stdout);
  };
  KVSTREAM_RETURN_IF_ERROR(bench::RunDomainSuite(o, on_progress, on_row, on_summary));
  for (const char* profile : {"mix", "others"}) {
    const std::vector<double>& ratios = negligible_ratios[profile];
    double mean = 0, lowest = 0;
    for (double r : ratios) mean += r / static_cast<double>(ratios.size());
    if (!ratios.empty()) lowest = *std::min_element(ratios.begin(), ratios.end());
    if (json) {
      nlohmann::json j;
      j["summary"] = "all";
      j["profile"] = profile;
      j["domains_negligible"] = ratios.size();
      j["domains_without_negligible_level"] = domains_without[profile];
      j["mean_ratio_vs_int8"] = ratios.empty() ? nlohmann::json(nullptr) : nlohmann::json(mean);
      j["lowest_ratio_vs_int8"] = ratios.empty() ? nlohmann::json(nullptr) : nlohmann::json(lowest);
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("%s profile: smallest negligible level %.2fx below int8 on the mean over %zu domains, %.2fx on the "
                  "lowest; %d domain(s) with none\n",
                  profile, mean, ratios.size(), lowest, domains_without[profile]);
    }
  }
  return Status::Ok();
}

Status Run(const Args& args) {
  if (args.Has("domains")) return RunDomains(args);
  bench::CodecBenchOptions o;
  o.model = args.GetString("model", o.model);
  o.text = args.GetString("text", o.text);
  KVSTREAM_RETURN_IF_ERROR(ReadCountFlags(args, {{"context-tokens", &o.context_tokens}, {"eval-tokens", &o.eval_tokens},
                                                 {"chunk-tokens", &o.chunk_tokens}, {"threads", &o.threads},
                                                 {"repetitions", &o.repetitions}, {"windows", &o.windows}}));
  if (o.windows > 64) return Status::InvalidArgument("--windows = " + std::to_string(o.windows) + " outside 1..64");
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
    "  --json                   one JSON object per line (a header, then one per method and level)\n\n"
    "usage: kvstream bench codec --domains [--manifest FILE] [flags]\n"
    "The codec on several kinds of text (bench/domains/manifest.json: license prose, reStructuredText docs,\n"
    "C++, shell, Python, a SmolLM2 chat transcript). Each domain's first W windows of context + eval tokens\n"
    "are scored; profiles learn from the tokens after them, as scripts/demo.sh learns its profile\n"
    "(predicted, byte predictors, fine rows): 'mix' from every domain, 'others' from all but the scored one\n"
    "(out of domain). int8 and cachegen-ref run on the same windows. Rows: domain, method, level, scheme,\n"
    "profile, bits_per_value, ratio_vs_int8, ppl_delta_pct (± ppl_delta_stderr), kl_mean, top1_agreement\n"
    "(± top1_stderr), negligible, context_tokens, eval_tokens, windows; then per domain and profile the\n"
    "smallest negligible level (summary: domain) and over all domains (summary: all). Progress on stderr.\n"
    "  --manifest FILE          the domains (default: the bench data folder's domains/manifest.json)\n"
    "  --levels LIST            predicted levels scored under each profile (default L3,L4,L5,L6)\n"
    "  --profile-contexts N     sample windows each learning domain gives a profile (default 2)\n"
    "  --profile-context-tokens T  tokens per sample window (default 512)\n"
    "  --fine-fraction F        the predicted levels' fine rows (default 0.12, as the demo)\n"
    "  --model, --context-tokens, --eval-tokens, --windows, --chunk-tokens, --json as above",
    {"model", "text", "context-tokens", "eval-tokens", "windows", "chunk-tokens", "threads", "repetitions", "calibration-text",
     "calibration-offset", "profile", "fine-fraction", "fine-level", "manifest", "levels", "profile-contexts",
     "profile-context-tokens"},
    {"json", "transform", "predict", "domains"},
    &Run,
});

}  // namespace kvstream::cli
