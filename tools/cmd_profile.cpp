// `kvstream profile`: learns a model's codec profile from sample contexts of a text, reports each
// level's size on a held-out context and, with --measure, its quality (recorded in the profile).
#include <algorithm>
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
#include "measure/codec_quality.h"
#include "measure/kvstream_codec.h"
#include "measure/slice_sensitivity.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

// The sample windows and the held-out window (a context and its continuation, + 1 token for the last
// target) from one text or several (--text A,B,...): sample window i comes from text i mod n, each text's
// windows one after the other from its start, so that the profile learns from every kind of text alike;
// the held-out window follows the first text's sample windows (with no sample windows, when the samples are
// KV dumps, it is the first text's first window).
struct SampleWindows {
  std::vector<std::vector<int>> contexts;
  std::vector<int> held_out;
};

Result<SampleWindows> CutSampleWindows(const Model& model, const std::string& text_list, int64_t contexts,
                                       int64_t context_tokens, int64_t eval_tokens) {
  const std::vector<std::string> paths = SplitList(text_list);
  for (const std::string& path : paths) {
    if (path.empty()) return Status::InvalidArgument("--text: an empty file name in '" + text_list + "'");
  }
  if (paths.empty()) return Status::InvalidArgument("--text: no file given");
  const int64_t n = static_cast<int64_t>(paths.size());
  if (contexts > 0 && n > contexts) {
    return Status::InvalidArgument("--text: " + std::to_string(n) + " files for " + std::to_string(contexts) +
                                   " contexts (each file gives at least one)");
  }
  SampleWindows out;
  out.contexts.resize(static_cast<size_t>(contexts));
  for (int64_t f = 0; f < n; ++f) {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> ids, TokenizeFile(model, paths[static_cast<size_t>(f)]));
    const int64_t own = (contexts - f + n - 1) / n;  // sample windows f, f + n, ...
    const int64_t needed = own * context_tokens + (f == 0 ? context_tokens + eval_tokens + 1 : 0);
    if (static_cast<int64_t>(ids.size()) < needed) {
      return Status::InvalidArgument("--text " + paths[static_cast<size_t>(f)] + " has " + std::to_string(ids.size()) +
                                     " tokens; its " + std::to_string(own) + " contexts of " +
                                     std::to_string(context_tokens) +
                                     (f == 0 ? " plus the held-out one and its " + std::to_string(eval_tokens) + " scored tokens"
                                             : std::string()) +
                                     " need " + std::to_string(needed));
    }
    for (int64_t k = 0; k < own; ++k) {
      out.contexts[static_cast<size_t>(f + k * n)].assign(ids.begin() + k * context_tokens, ids.begin() + (k + 1) * context_tokens);
    }
    if (f == 0) out.held_out.assign(ids.begin() + own * context_tokens, ids.begin() + needed);
  }
  return out;
}

// --ladder: increasing step multipliers, one per level.
Result<std::vector<float>> ParseLadder(const std::string& list) {
  std::vector<float> steps;
  const std::vector<std::string> items = SplitList(list);
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& item = items[i];
    char* end = nullptr;
    const float m = std::strtof(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(m > 0.0f && m <= 16.0f)) {
      return Status::InvalidArgument("--ladder: '" + item + "' is not a step multiplier in (0, 16]");
    }
    if (!steps.empty() && !(m > steps.back())) {
      return Status::InvalidArgument("--ladder: the multipliers must increase (level 1 the finest), " + item +
                                     " follows " + items[i - 1]);
    }
    steps.push_back(m);
  }
  if (steps.empty() || steps.size() > static_cast<size_t>(kMaxLossyLevel)) {
    return Status::InvalidArgument("--ladder: 1 to " + std::to_string(kMaxLossyLevel) + " multipliers, got " +
                                   std::to_string(steps.size()));
  }
  return steps;
}

Status RunProfile(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string out_path, args.Require("out"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t contexts, args.GetInt("contexts", 4));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t context_tokens, args.GetInt("context-tokens", 512));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t max_tables, args.GetInt("max-tables", 16));
  KVSTREAM_ASSIGN_OR_RETURN(double exponent, args.GetDouble("channel-exponent", 0.0));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t chunk_tokens, args.GetInt("chunk-tokens", 256));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval_tokens, args.GetInt("eval-tokens", 128));
  if (contexts < 1 || contexts > 1024) return Status::InvalidArgument("--contexts = " + std::to_string(contexts) + ", expected 1..1024");
  if (context_tokens < 16 || context_tokens > 65536) {
    return Status::InvalidArgument("--context-tokens = " + std::to_string(context_tokens) + ", expected 16..65536");
  }
  if (max_tables < 1 || max_tables > 255) return Status::InvalidArgument("--max-tables = " + std::to_string(max_tables) + ", expected 1..255");
  if (!(exponent >= 0.0 && exponent <= 1.0)) return Status::InvalidArgument("--channel-exponent must be in [0, 1]");
  if (chunk_tokens < 1 || chunk_tokens > 65536) return Status::InvalidArgument("--chunk-tokens must be in 1..65536");
  if (eval_tokens < 1 || eval_tokens > 65536) return Status::InvalidArgument("--eval-tokens must be in 1..65536");
  const bool measure = args.Has("measure");
  double fine_fraction = 0;
  Level fine_level = 0;
  KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &fine_fraction, &fine_level));

  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  // The samples: KV dumps (another engine's KV of the model), or windows of the text prefilled here.
  std::vector<std::shared_ptr<const KvDump>> dumps;
  const std::vector<std::string> dump_paths = SplitList(args.GetString("kv-dump"));
  if (args.Has("kv-dump")) {
    if (args.Has("contexts")) {
      return Status::InvalidArgument("--contexts counts text windows to learn from; with --kv-dump the dumps are the samples");
    }
    KVSTREAM_ASSIGN_OR_RETURN(dumps, ReadKvDumpArgs(dump_paths));
    KVSTREAM_RETURN_IF_ERROR(CheckDumpsFit(dumps, dump_paths, model->config(), "the model " + model->config().name));
    contexts = static_cast<int64_t>(dumps.size());
  }
  const int64_t text_windows = dumps.empty() ? contexts : 0;
  KVSTREAM_ASSIGN_OR_RETURN(SampleWindows windows, CutSampleWindows(*model, args.GetString("text", kDefaultText),
                                                                     text_windows, context_tokens, eval_tokens));
  ProfileOptions options;
  options.model = model->config().name.substr(0, 255);
  options.max_tables = static_cast<int>(max_tables);
  options.channel_exponent = static_cast<float>(exponent);
  options.predict = args.Has("predict");
  options.transform = args.Has("transform") || options.predict;
  options.byte_predictors = args.Has("byte-predictors");
  if (options.byte_predictors && !options.predict) return Status::InvalidArgument("--byte-predictors needs --predict");
  options.rope = model->config().rope();
  if (const std::string ladder = args.GetString("ladder", ""); !ladder.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<float> steps, ParseLadder(ladder));
    options.ladder = LadderOfSteps(model->config().n_layers, steps);
  }
  ProfileBuilder builder(options);
  for (const auto& dump : dumps) KVSTREAM_RETURN_IF_ERROR(builder.AddSample(dump->keys_view(), dump->values_view()));
  for (const std::vector<int>& window : windows.contexts) {
    KvCache cache = KvCache::Allocate(model->config(), static_cast<int>(context_tokens));
    KVSTREAM_RETURN_IF_ERROR(model->Forward(window, cache, nullptr));
    KVSTREAM_RETURN_IF_ERROR(builder.AddSample(cache.keys(), cache.values()));
  }
  KVSTREAM_ASSIGN_OR_RETURN(Profile profile, builder.Build());

  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(windows.held_out),
                                                                     QualityOptions{static_cast<int>(context_tokens), static_cast<int>(eval_tokens)}));
  int64_t dump_tokens = 0;
  for (const auto& dump : dumps) dump_tokens += dump->tokens;
  const std::string samples =
      dumps.empty() ? std::to_string(contexts) + " contexts of " + std::to_string(context_tokens) + " tokens"
                    : std::to_string(dumps.size()) + " KV dumps of " + std::to_string(dump_tokens) + " tokens";
  std::printf("profile of %s: %d layers x %d channels, %s, %lld tables per level\n", options.model.c_str(), profile.layers(),
              profile.channels(), samples.c_str(), static_cast<long long>(max_tables));
  if (args.Has("weigh-slices")) {
    // Measured with the scheme the profile serves best, at its most aggressive level but one.
    const QuantScheme scheme = options.predict ? QuantScheme::kPredicted
                               : options.transform ? QuantScheme::kTransform
                                                   : QuantScheme::kChannelUniform;
    const Level level = std::max<Level>(1, static_cast<Level>(profile.ladder().size()) - 1);
    FineRowsOption fine;
    if (scheme != QuantScheme::kChannelUniform) fine = {fine_fraction, fine_level};
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<double> sensitivity,
                              MeasureSliceSensitivity(meter, std::make_shared<const Profile>(profile), scheme, level,
                                                      fine, static_cast<int>(chunk_tokens)));
    const std::vector<float> scales = SliceStepScales(sensitivity);
    std::printf("slice weights (%s %s on the held-out context): layer, then KL and step scale of keys and values\n",
                SchemeName(scheme), LevelName(level).c_str());
    for (int l = 0; l < profile.layers(); ++l) {
      const size_t k = static_cast<size_t>(l) * 2;
      std::printf("  %3d  K %.2e x%.2f  V %.2e x%.2f\n", l, sensitivity[k], scales[k], sensitivity[k + 1], scales[k + 1]);
    }
    builder.SetSliceSensitivity(std::move(sensitivity));
    KVSTREAM_ASSIGN_OR_RETURN(profile, builder.Build());
  }
  std::printf("held-out context of %lld tokens in chunks of %lld:\n", static_cast<long long>(context_tokens), static_cast<long long>(chunk_tokens));
  std::printf("  level  bits/value(profile)  bits/value(in-chunk)%s\n", measure ? "  top1     ppl-delta%  kl-mean" : "");
  if (measure) {
    // Baselines on the same held-out window, so the levels' quality reads against them.
    for (Level level : {kLevelFp16, kLevelInt8}) {
      const std::unique_ptr<KvCodec> baseline = MakeKvstreamLevelCodec(nullptr, level);
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, MeasureCodec(meter, *baseline, static_cast<int>(chunk_tokens)));
      std::printf("  %-6s %-20.4f %-20s  %-8.4f %-+11.3f %.5f\n", baseline->name().c_str(), r.bits_per_value, "", r.top1_agreement,
                  r.ppl_delta_pct, r.kl_mean);
    }
  }
  // `profile` gains each level's quality (and a new hash) as we go; chunks are coded with the learned one.
  // Chunks with in-chunk tables quantise with the default ladder, so they compare only with it ("-").
  const auto learned = std::make_shared<const Profile>(profile);
  for (const LevelSpec& spec : learned->ladder()) {
    const std::unique_ptr<KvCodec> with = MakeKvstreamLevelCodec(learned, spec.level);
    KvCache a = meter.context_cache();
    KVSTREAM_ASSIGN_OR_RETURN(double bits, ApplyCodec(*with, static_cast<int>(chunk_tokens), a));
    std::string own_bits = "-";
    if (options.ladder.empty()) {
      const std::unique_ptr<KvCodec> without = MakeKvstreamLevelCodec(nullptr, spec.level);
      KvCache b = meter.context_cache();
      KVSTREAM_ASSIGN_OR_RETURN(double own, ApplyCodec(*without, static_cast<int>(chunk_tokens), b));
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f", own);
      own_bits = buf;
    }
    LevelQuality q;
    q.bits_per_value = bits;
    if (measure) {
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(with->name(), a, bits));
      q.top1_agreement = r.top1_agreement;
      q.ppl_delta_pct = r.ppl_delta_pct;
      q.kl_mean = r.kl_mean;
      std::printf("  L%-5d %-20.4f %-20s  %-8.4f %-+11.3f %.5f\n", spec.level, bits, own_bits.c_str(), r.top1_agreement,
                  r.ppl_delta_pct, r.kl_mean);
    } else {
      std::printf("  L%-5d %-20.4f %s\n", spec.level, bits, own_bits.c_str());
    }
    KVSTREAM_ASSIGN_OR_RETURN(profile, profile.WithQuality(spec.level, q));
  }
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    if (!learned->Supports(scheme)) continue;
    std::printf("%s scheme (kvstream encode --scheme %s --fine-fraction %g), same held-out context:\n",
                SchemeName(scheme), SchemeName(scheme), fine_fraction);
    std::printf("  level  bits/value%s\n", measure ? "           top1     ppl-delta%  kl-mean" : "");
    for (const LevelSpec& spec : learned->ladder()) {
      // Coded as a sender with the same fine rows serves them, so that what it advertises is what it sends.
      const std::unique_ptr<KvCodec> codec = MakeKvstreamLevelCodec(learned, spec.level, scheme, {fine_fraction, fine_level});
      KvCache cache = meter.context_cache();
      LevelQuality q;
      KVSTREAM_ASSIGN_OR_RETURN(q.bits_per_value, ApplyCodec(*codec, static_cast<int>(chunk_tokens), cache));
      if (measure) {
        KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(codec->name(), cache, q.bits_per_value));
        q.top1_agreement = r.top1_agreement;
        q.ppl_delta_pct = r.ppl_delta_pct;
        q.kl_mean = r.kl_mean;
        std::printf("  L%-5d %-20.4f %-8.4f %-+11.3f %.5f\n", spec.level, q.bits_per_value, r.top1_agreement, r.ppl_delta_pct,
                    r.kl_mean);
      } else {
        std::printf("  L%-5d %.4f\n", spec.level, q.bits_per_value);
      }
      KVSTREAM_ASSIGN_OR_RETURN(profile, profile.WithQuality(spec.level, q, scheme));
    }
  }
  if (learned->Supports(QuantScheme::kTransform)) {  // so that a sender can check its fine rows are these
    KVSTREAM_ASSIGN_OR_RETURN(profile, profile.WithMeasuredFineRows({fine_fraction, fine_fraction > 0 ? fine_level : 0}));
  }
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
