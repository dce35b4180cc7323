// `kvstream eval`: what each KV transformation costs the model, measured by the quality meter.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/quality.h"
#include "measure/kv_methods.h"
#include "tools/codec_files.h"
#include "measure/codec_quality.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

void PrintRow(bool json, const std::string& method, const std::string& window, const QualityReport& r,
              const QualityOptions& options) {
  if (json) {
    std::printf("{\"method\": \"%s\", \"window\": \"%s\", \"ppl\": %.6f, \"ppl_reference\": %.6f, "
                "\"ppl_delta_pct\": %.6f, \"ppl_delta_stderr\": %.6f, \"kl_mean\": %.8g, \"top1_agreement\": %.6f, "
                "\"top1_stderr\": %.6f, \"negligible\": %s, \"bits_per_value\": %.6f, \"context_tokens\": %d, "
                "\"eval_tokens\": %d, \"windows\": %d}\n",
                method.c_str(), window.c_str(), r.ppl, r.ppl_reference, r.ppl_delta_pct, r.ppl_delta_stderr, r.kl_mean,
                r.top1_agreement, r.top1_stderr, IsNegligible(r) ? "true" : "false", r.bits_per_value, options.context_tokens,
                options.eval_tokens, r.windows);
  } else {
    std::printf("%-16s %6s %8.3f %12.4f %+9.3f ±%-6.3f %12.3e %8.4f ±%-6.4f %s\n", method.c_str(), window.c_str(),
                r.bits_per_value, r.ppl, r.ppl_delta_pct, r.ppl_delta_stderr, r.kl_mean, r.top1_agreement, r.top1_stderr,
                IsNegligible(r) ? "negligible" : "");
  }
  std::fflush(stdout);
}

Status RunEval(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(int64_t windows, args.GetInt("windows", 2));
  if (windows < 1 || windows > 64) return Status::InvalidArgument("--windows = " + std::to_string(windows) + ", expected 1..64");
  Result<std::vector<const KvMethod*>> selected = SelectKvMethods(SplitList(args.GetString("methods", "all")));
  if (!selected.ok()) return selected.status().WithContext("--methods");
  const std::vector<const KvMethod*> methods = *selected;
  KvCodecChoice codec;
  if (args.Has("profile")) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile profile, Profile::Load(args.GetString("profile")));
    codec.profile = std::make_shared<const Profile>(std::move(profile));
  }
  KVSTREAM_ASSIGN_OR_RETURN(codec.scheme, ParseQuantScheme(args.GetString("scheme", "channel-uniform")));
  if (codec.scheme != QuantScheme::kChannelUniform && !codec.profile) {
    return Status::InvalidArgument("--scheme " + args.GetString("scheme") + " needs a --profile that serves it");
  }
  if (codec.scheme == QuantScheme::kTransform || codec.scheme == QuantScheme::kPredicted) {
    KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &codec.fine.fraction, &codec.fine.level));
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  // Headline quality wants >= 2 windows x 1024 scored tokens after 2048-token contexts; a model that holds
  // fewer positions gets half of them as context and a quarter scored.
  const int positions = model->config().max_seq_len;
  KVSTREAM_ASSIGN_OR_RETURN(int64_t context, args.GetInt("context-tokens", std::min(2048, positions / 2)));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval, args.GetInt("eval-tokens", std::min(1024, positions / 4)));
  if (context < 1 || context > (1 << 20) || eval < 1 || eval > (1 << 20)) {
    return Status::InvalidArgument("--context-tokens and --eval-tokens must be in 1..1048576");
  }
  const std::string text = args.GetString("text", kDefaultText);
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  QualityOptions options;
  options.context_tokens = static_cast<int>(context);
  options.eval_tokens = static_cast<int>(eval);
  if (tokens.size() < QualityWindowsTokens(options, windows)) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(tokens.size()) + " tokens; " +
                                   std::to_string(windows) + " windows of " + std::to_string(context + eval) + " need " +
                                   std::to_string(QualityWindowsTokens(options, windows)));
  }
  const bool json = args.Has("json");
  if (!json) {
    std::printf("model %s, text %s, context %d tokens, %d evaluated, %lld window(s)\n\n", model->config().name.c_str(),
                text.c_str(), options.context_tokens, options.eval_tokens, static_cast<long long>(windows));
    std::printf("%-16s %6s %8s %12s %17s %12s %15s\n", "method", "window", "bits", "ppl", "ppl_delta_% ± se", "kl_mean",
                "top1 ± se");
  }
  // Windows follow each other through the text (QualityWindow).
  std::vector<std::vector<QualityReport>> reports(methods.size());
  for (int64_t w = 0; w < windows; ++w) {
    KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, QualityWindow(tokens, options, w), options));
    for (size_t i = 0; i < methods.size(); ++i) {
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, MeasureCodec(meter, *methods[i]->make(codec), kMethodChunkTokens));
      PrintRow(json, methods[i]->name, std::to_string(w), r, options);
      reports[i].push_back(r);
    }
  }
  if (windows == 1) return Status::Ok();
  // Every window scores the same number of positions, so the means are those over all of them.
  for (size_t i = 0; i < methods.size(); ++i) PrintRow(json, methods[i]->name, "mean", MeanOfWindows(reports[i]), options);
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(eval, {
    "eval",
    "measure what KV transformations (int8, codec levels) cost in model quality",
    "usage: kvstream eval --model M [--text FILE] [--context-tokens T] [--eval-tokens M] [--windows W]\n"
    "                     [--methods LIST] [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L]\n"
    "                     [--json] [--tokenizer PATH] [--threads N]\n\n"
    "Prefills the first T tokens of the text, passes the KV cache through each method, then scores the next\n"
    "M tokens teacher-forced against the same run with the original fp32 cache: perplexity, its change in\n"
    "percent, mean KL(original || transformed) of the next-token distributions, top-1 agreement. With\n"
    "W windows of T + M tokens one after the other through the text are scored alike, then their means. Each\n"
    "figure has its standard error over the scored tokens (of the mean: over all windows' tokens); a method\n"
    "is marked negligible when its ppl change is at most +1 % and its top-1 agreement at least 98 %.\n\n"
    "  --model M             model short name (stories260K, tinystories656k, smollm2) or a path (required)\n"
    "  --text FILE           text to evaluate on (default /usr/share/common-licenses/GPL-3)\n"
    "  --context-tokens T    tokens prefilled into the KV cache (default 2048, or half the positions the\n"
    "                        model holds when fewer: 256 for the tiny models)\n"
    "  --eval-tokens M       tokens scored after the context (default 1024, or a quarter of the model's\n"
    "                        positions); the text needs W x (T + M) + 1 tokens\n"
    "  --windows W           windows scored, each of T + M tokens after the previous one (default 2)\n"
    "  --methods LIST        comma-separated methods, or all (default all):\n" +
        KvMethodsHelp() +
        "  --profile P           code the kvstream levels against this profile (kvstream profile) instead of\n"
        "                        in-chunk tables\n"
        "  --scheme S            their quantiser: channel-uniform (default), transform or predicted (these two\n"
        "                        need a --profile made with --transform or --predict)\n" +
        FineRowsHelp(24) +
        "  --json                one JSON object per line per method and window, keys: method, window (its\n"
        "                        number, or mean), ppl, ppl_reference, ppl_delta_pct, ppl_delta_stderr,\n"
        "                        kl_mean, top1_agreement, top1_stderr, negligible, bits_per_value,\n"
        "                        context_tokens, eval_tokens, windows\n"
        "  --tokenizer PATH      tokenizer overriding the one beside the model (default: found with the model)\n"
        "  --threads N           OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "context-tokens", "eval-tokens", "windows", "methods", "profile", "scheme", "fine-fraction",
     "fine-level", "tokenizer", "threads"},
    {"json"},
    RunEval,
});

}  // namespace kvstream::cli
