// `kvstream profile`: learns a model's codec profile from sample contexts of a text, reports each
// level's size on a held-out context and, with --measure, its quality (recorded in the profile).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "kvstream/quality.h"
#include "tools/codec_files.h"
#include "tools/kv_dump_args.h"
#include "measure/profile_learning.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

// --ladder: the levels' step multipliers (LearnProfile checks them).
Result<std::vector<float>> ParseLadder(const std::string& list) {
  std::vector<float> steps;
  for (const std::string& item : SplitList(list)) {
    char* end = nullptr;
    const float m = std::strtof(item.c_str(), &end);
    if (item.empty() || *end != '\0') return Status::InvalidArgument("--ladder: '" + item + "' is not a number");
    steps.push_back(m);
  }
  return steps;
}

void PrintQuality(const QualityReport& r) {
  std::printf("  %-8.4f %-+11.3f %.5f\n", r.top1_agreement, r.ppl_delta_pct, r.kl_mean);
}

void PrintReport(const LearnedProfile& learned, const ProfileLearningOptions& options, const std::string& samples) {
  const Profile& profile = learned.profile;
  std::printf("profile of %s: %d layers x %d channels, %s, %d tables per level\n", profile.model().c_str(), profile.layers(),
              profile.channels(), samples.c_str(), options.profile.max_tables);
  if (!learned.slice_sensitivity.empty()) {
    const std::vector<float> scales = SliceStepScales(learned.slice_sensitivity);
    std::printf("slice weights (%s %s on the held-out context): layer, then KL and step scale of keys and values\n",
                SchemeName(learned.weighed_scheme), LevelName(learned.weighed_level).c_str());
    for (int l = 0; l < profile.layers(); ++l) {
      const size_t k = static_cast<size_t>(l) * 2;
      std::printf("  %3d  K %.2e x%.2f  V %.2e x%.2f\n", l, learned.slice_sensitivity[k], scales[k], learned.slice_sensitivity[k + 1],
                  scales[k + 1]);
    }
  }
  std::printf("held-out context of %d tokens in chunks of %d:\n", options.context_tokens, options.chunk_tokens);
  std::printf("  level  bits/value(profile)  bits/value(in-chunk)%s\n", options.measure ? "  top1     ppl-delta%  kl-mean" : "");
  for (const QualityReport& r : learned.baselines) {
    std::printf("  %-6s %-20.4f %-20s", r.method.c_str(), r.bits_per_value, "");
    PrintQuality(r);
  }
  QuantScheme scheme = QuantScheme::kChannelUniform;
  for (const LearnedLevel& row : learned.levels) {
    if (row.scheme != scheme) {
      scheme = row.scheme;
      std::printf("%s scheme (kvstream encode --scheme %s --fine-fraction %g), same held-out context:\n", SchemeName(scheme),
                  SchemeName(scheme), options.fine.fraction);
      std::printf("  level  bits/value%s\n", options.measure ? "           top1     ppl-delta%  kl-mean" : "");
    }
    if (scheme == QuantScheme::kChannelUniform) {
      char own[32] = "-";
      if (!std::isnan(row.in_chunk_bits_per_value)) std::snprintf(own, sizeof own, "%.4f", row.in_chunk_bits_per_value);
      std::printf("  L%-5d %-20.4f %-20s", row.level, row.bits_per_value, own);
    } else {
      std::printf("  L%-5d %-19.4f", row.level, row.bits_per_value);
    }
    if (options.measure) {
      PrintQuality(row.quality);
    } else {
      std::printf("\n");
    }
  }
}

Status RunProfile(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string out_path, args.Require("out"));
  ProfileLearningOptions options;
  const auto get_int = [&](const char* flag, int64_t fallback, int* out) -> Status {
    KVSTREAM_ASSIGN_OR_RETURN(int64_t v, args.GetInt(flag, fallback));
    if (v < 0 || v > (int64_t{1} << 30)) return Status::InvalidArgument(std::string("--") + flag + " = " + std::to_string(v) + " is out of range");
    *out = static_cast<int>(v);
    return Status::Ok();
  };
  KVSTREAM_RETURN_IF_ERROR(get_int("contexts", 4, &options.contexts));
  KVSTREAM_RETURN_IF_ERROR(get_int("context-tokens", 512, &options.context_tokens));
  KVSTREAM_RETURN_IF_ERROR(get_int("max-tables", 16, &options.profile.max_tables));
  KVSTREAM_RETURN_IF_ERROR(get_int("chunk-tokens", 256, &options.chunk_tokens));
  KVSTREAM_RETURN_IF_ERROR(get_int("eval-tokens", 128, &options.eval_tokens));
  KVSTREAM_ASSIGN_OR_RETURN(double exponent, args.GetDouble("channel-exponent", 0.0));
  options.profile.channel_exponent = static_cast<float>(exponent);
  options.measure = args.Has("measure");
  options.weigh_slices = args.Has("weigh-slices");
  KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &options.fine.fraction, &options.fine.level));
  options.profile.predict = args.Has("predict");
  options.profile.transform = args.Has("transform");
  options.profile.byte_predictors = args.Has("byte-predictors");
  options.texts = SplitList(args.GetString("text", kDefaultText));
  if (const std::string ladder = args.GetString("ladder", ""); !ladder.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(options.ladder_steps, ParseLadder(ladder));
  }

  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  // The samples: KV dumps (another engine's KV of the model), or windows of the text prefilled here.
  std::vector<std::shared_ptr<const KvDump>> dumps;
  std::vector<KvSample> samples;
  if (args.Has("kv-dump")) {
    if (args.Has("contexts")) {
      return Status::InvalidArgument("--contexts counts text windows to learn from; with --kv-dump the dumps are the samples");
    }
    const std::vector<std::string> dump_paths = SplitList(args.GetString("kv-dump"));
    KVSTREAM_ASSIGN_OR_RETURN(dumps, ReadKvDumpArgs(dump_paths));
    KVSTREAM_RETURN_IF_ERROR(CheckDumpsFit(dumps, dump_paths, model->config(), "the model " + model->config().name));
    for (const auto& dump : dumps) samples.push_back({dump->keys_view(), dump->values_view()});
    options.contexts = 0;
  }
  KVSTREAM_ASSIGN_OR_RETURN(LearnedProfile learned, LearnProfile(*model, options, samples));
  int64_t dump_tokens = 0;
  for (const auto& dump : dumps) dump_tokens += dump->tokens;
  PrintReport(learned, options,
              dumps.empty() ? std::to_string(options.contexts) + " contexts of " + std::to_string(options.context_tokens) + " tokens"
                            : std::to_string(dumps.size()) + " KV dumps of " + std::to_string(dump_tokens) + " tokens");
  const Profile& profile = learned.profile;
  KVSTREAM_RETURN_IF_ERROR(WriteWholeFile(out_path, profile.bytes().data(), profile.bytes().size()));
  std::printf("wrote %s: %zu bytes, hash %s\n", out_path.c_str(), profile.bytes().size(), HashHex(profile.hash()).c_str());
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(profile, {
    "profile",
    "learn a model's codec profile (level ladder, quantisation parameters, entropy tables)",
    "usage: kvstream profile --model M --out PROFILE [--text FILE[,FILE...]] [--contexts N | --kv-dump FILES]\n"
    "                        [--context-tokens T]\n"
    "                        [--max-tables K] [--channel-exponent A] [--chunk-tokens C] [--eval-tokens E]\n"
    "                        [--transform] [--predict [--byte-predictors]] [--fine-fraction F]\n"
    "                        [--fine-level L] [--weigh-slices] [--ladder M1,M2,...] [--measure]\n"
    "                        [--tokenizer PATH] [--threads N]\n\n"
    "Prefills N windows of T tokens of the text, learns per (layer, K/V, channel) means and steps and a bank\n"
    "of K rANS tables per level from their KV, then encodes the next window (held out) at every level, with\n"
    "the profile and with in-chunk tables, and prints the bits per value. --measure also scores the E tokens\n"
    "after the held-out window with the decoded cache (quality meter) and records each level's quality in\n"
    "the profile. Writes the profile (format: docs/format.md) and prints its hash.\n\n"
    "  --model M              model short name (stories260K, tinystories656k, smollm2) or path (required)\n"
    "  --out PROFILE          output file (required)\n"
    "  --text FILE[,FILE...]  sample text (default /usr/share/common-licenses/GPL-3); with several files the\n"
    "                         windows alternate between them (window i from file i mod n, each file's in\n"
    "                         order) and the held-out one follows the first file's: a profile learned from\n"
    "                         several kinds of text serves unlike text better (docs/codec.md, \"What the\n"
    "                         profile learns from\")\n"
    "  --contexts N           sample windows (default 4)\n"
    "  --kv-dump FILES        learn from these .npz KV dumps instead of text windows (another engine's KV of\n"
    "                         the model, numpy.savez: docs/kv-dump-format.md); the held-out window is then\n"
    "                         --text's first, so name a text the dumps do not hold\n"
    "  --context-tokens T     tokens per window (default 512)\n"
    "  --max-tables K         rANS tables per level shared by all channels, 1..255 (default 16; more give\n"
    "                         slightly smaller chunks that decode slower)\n"
    "  --channel-exponent A   base step of a channel = S * (std_c / S)^A, S the RMS std of its (layer, K/V);\n"
    "                         0 = one step per (layer, K/V) (default 0), 1 = proportional to the channel std\n"
    "  --chunk-tokens C       chunk size of the held-out measurement (default 256)\n"
    "  --eval-tokens E        continuation tokens scored by --measure (default 128)\n"
    "  --transform            also learn the transform scheme (kvstream encode --scheme transform): a PCA\n"
    "                         basis per (layer, K/V) of the keys with RoPE undone and of the values; adds\n"
    "                         2 x layers x channels^2 int16 to the profile and the transform's sizes (and,\n"
    "                         with --measure, qualities, recorded for it) to the report\n"
    "  --predict              also learn the predicted scheme (implies --transform; kvstream encode --scheme\n"
    "                         predicted): per (layer, K/V) a linear prediction from the previous layer's\n"
    "                         keys and values (values also from this layer's keys) and a basis of the\n"
    "                         residual; adds about 7 x layers x channels^2 int16 (15 MB for SmolLM2) and\n"
    "                         wants several thousand sample tokens (e.g. --contexts 8 --context-tokens 512)\n"
    "  --byte-predictors      keep the predictors' weights and inputs within int8: on CPUs with AMX or\n"
    "                         AVX-512 VNNI the predicted scheme decodes about 1.3x faster, for 0.2-0.5 %\n"
    "                         more bits\n" +
        FineRowsHelp(25) +
    "                         (the transform and predicted levels are sized and measured so, as a sender\n"
    "                         with the same fine rows serves them; the profile records F and L, and a\n"
    "                         sender with other fine rows does not advertise those qualities)\n"
    "  --weigh-slices         weigh each (layer, K/V)'s step by what its errors cost the model: decode the\n"
    "                         held-out context with a first profile (best scheme, top level but one) one\n"
    "                         slice at a time, measure each slice's KL over the E tokens, scale its step\n"
    "                         by sqrt(mean KL / its KL) within [0.35, 2], learn again; on SmolLM2 about\n"
    "                         1.3x smaller at equal quality. Costs 2 x layers more scorings of the E\n"
    "                         tokens; E = 512 weighs better than the default 128\n"
    "  --ladder M1,M2,...     the levels' step multipliers, increasing (level 1 first; 1 to 15 of them;\n"
    "                         default 0.1,0.15,0.25,0.35,0.5,1), each times the (layer, K/V)'s base step\n"
    "  --measure              measure and record each level's quality (top-1 agreement, ppl, KL)\n"
    "  --tokenizer PATH       tokenizer overriding the one found with the model\n"
    "  --threads N            OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "out", "text", "contexts", "kv-dump", "context-tokens", "max-tables", "channel-exponent", "chunk-tokens",
     "eval-tokens", "tokenizer", "threads", "fine-fraction", "fine-level", "ladder"},
    {"measure", "transform", "predict", "byte-predictors", "weigh-slices"},
    RunProfile,
});

}  // namespace kvstream::cli
