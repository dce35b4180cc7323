// `kvstream eval`: what each KV transformation costs the model, measured by the quality meter.
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
                "\"ppl_delta_pct\": %.6f, \"kl_mean\": %.8g, \"top1_agreement\": %.6f, \"bits_per_value\": %.6f, "
                "\"context_tokens\": %d, \"eval_tokens\": %d}\n",
                method.c_str(), window.c_str(), r.ppl, r.ppl_reference, r.ppl_delta_pct, r.kl_mean, r.top1_agreement,
                r.bits_per_value, options.context_tokens, options.eval_tokens);
  } else {
    std::printf("%-16s %6s %8.3f %12.4f %12.4f %12.3e %10.4f\n", method.c_str(), window.c_str(), r.bits_per_value, r.ppl,
                r.ppl_delta_pct, r.kl_mean, r.top1_agreement);
  }
  std::fflush(stdout);
}

Status RunEval(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(int64_t context, args.GetInt("context-tokens", 1024));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval, args.GetInt("eval-tokens", 256));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t windows, args.GetInt("windows", 1));
  if (context < 1 || context > (1 << 20) || eval < 1 || eval > (1 << 20) || windows < 1 || windows > 64) {
    return Status::InvalidArgument("--context-tokens and --eval-tokens must be in 1..1048576, --windows in 1..64");
  }
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
  const std::string text = args.GetString("text", kDefaultText);
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  QualityOptions options;
  options.context_tokens = static_cast<int>(context);
  options.eval_tokens = static_cast<int>(eval);
  const size_t window_tokens = static_cast<size_t>(context + eval);
  if (tokens.size() < static_cast<size_t>(windows) * window_tokens + 1) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(tokens.size()) + " tokens; " +
                                   std::to_string(windows) + " windows of " + std::to_string(window_tokens) +
                                   " need " + std::to_string(windows * window_tokens + 1));
  }
  const bool json = args.Has("json");
  if (!json) {
    std::printf("model %s, text %s, context %d tokens, %d evaluated, %lld window(s)\n\n", model->config().name.c_str(),
                text.c_str(), options.context_tokens, options.eval_tokens, static_cast<long long>(windows));
    std::printf("%-16s %6s %8s %12s %12s %12s %10s\n", "method", "window", "bits", "ppl", "ppl_delta_%", "kl_mean",
                "top1_agree");
  }
  // Windows follow each other through the text: window w prefills tokens [w (T + M), w (T + M) + T).
  std::vector<std::vector<QualityReport>> reports(methods.size());
  for (int64_t w = 0; w < windows; ++w) {
    const auto first = tokens.begin() + static_cast<long>(static_cast<size_t>(w) * window_tokens);
    std::vector<int> slice(first, first + static_cast<long>(window_tokens + 1));
    KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(slice), options));
    for (size_t i = 0; i < methods.size(); ++i) {
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, MeasureCodec(meter, *methods[i]->make(codec), kMethodChunkTokens));
      PrintRow(json, methods[i]->name, std::to_string(w), r, options);
      reports[i].push_back(r);
    }
  }
  if (windows == 1) return Status::Ok();
  // Every window scores the same number of positions, so the means are those over all of them.
  for (size_t i = 0; i < methods.size(); ++i) {
    QualityReport mean = reports[i][0];
    mean.ppl = mean.ppl_reference = mean.ppl_delta_pct = mean.kl_mean = mean.top1_agreement = mean.bits_per_value = 0;
    for (const QualityReport& r : reports[i]) {
      mean.ppl += r.ppl / static_cast<double>(windows);
      mean.ppl_reference += r.ppl_reference / static_cast<double>(windows);
      mean.ppl_delta_pct += r.ppl_delta_pct / static_cast<double>(windows);
      mean.kl_mean += r.kl_mean / static_cast<double>(windows);
      mean.top1_agreement += r.top1_agreement / static_cast<double>(windows);
      mean.bits_per_value += r.bits_per_value / static_cast<double>(windows);
    }
    PrintRow(json, methods[i]->name, "mean", mean, options);
  }
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
    "--windows W, W windows of T + M tokens one after the other through the text, each scored alike, then\n"
    "their means (top-1 agreement over M positions moves by a few positions from one window to the next).\n\n"
    "  --model M             model short name (stories260K, tinystories656k, smollm2) or a path (required)\n"
    "  --text FILE           text to evaluate on (default /usr/share/common-licenses/GPL-3)\n"
    "  --context-tokens T    tokens prefilled into the KV cache (default 1024)\n"
    "  --eval-tokens M       tokens scored after the context (default 256); the text needs T + M + 1 tokens\n"
    "  --windows W           windows scored, each of T + M tokens after the previous one (default 1)\n"
    "  --methods LIST        comma-separated methods, or all (default all):\n" +
        KvMethodsHelp() +
        "  --profile P           code the kvstream levels against this profile (kvstream profile) instead of\n"
        "                        in-chunk tables\n"
        "  --scheme S            their quantiser: channel-uniform (default), transform or predicted (these two\n"
        "                        need a --profile made with --transform or --predict)\n" +
        FineRowsHelp(24) +
        "  --json                one JSON object per line per method and window, keys: method, window (its\n"
        "                        number, or mean), ppl, ppl_reference, ppl_delta_pct, kl_mean, top1_agreement,\n"
        "                        bits_per_value, context_tokens, eval_tokens\n"
        "  --tokenizer PATH      tokenizer overriding the one beside the model (default: found with the model)\n"
        "  --threads N           OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "context-tokens", "eval-tokens", "windows", "methods", "profile", "scheme", "fine-fraction",
     "fine-level", "tokenizer", "threads"},
    {"json"},
    RunEval,
});

}  // namespace kvstream::cli
