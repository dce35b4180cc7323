// `kvstream eval`: what each KV transformation costs the model, measured by the quality meter.
#include <cstdio>

#include "tools/kv_methods.h"

namespace kvstream::cli {
namespace {

Status RunEval(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(int64_t context, args.GetInt("context-tokens", 1024));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval, args.GetInt("eval-tokens", 256));
  if (context < 1 || context > (1 << 20) || eval < 1 || eval > (1 << 20)) {
    return Status::InvalidArgument("--context-tokens and --eval-tokens must be in 1..1048576");
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<const KvMethod*> methods, SelectKvMethods(args.GetString("methods", "all")));
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  const std::string text = args.GetString("text", kDefaultText);
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  QualityOptions options;
  options.context_tokens = static_cast<int>(context);
  options.eval_tokens = static_cast<int>(eval);
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(tokens), options));
  const bool json = args.Has("json");
  if (!json) {
    std::printf("model %s, text %s, context %d tokens, %d evaluated\n\n", model->config().name.c_str(), text.c_str(),
                options.context_tokens, options.eval_tokens);
    std::printf("%-16s %8s %12s %12s %12s %10s\n", "method", "bits", "ppl", "ppl_delta_%", "kl_mean", "top1_agree");
  }
  for (const KvMethod* m : methods) {
    KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<KvTransform> transform, m->make(*model));
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(*transform));
    if (json) {
      std::printf("{\"method\": \"%s\", \"ppl\": %.6f, \"ppl_reference\": %.6f, \"ppl_delta_pct\": %.6f, \"kl_mean\": %.8g, "
                  "\"top1_agreement\": %.6f, \"bits_per_value\": %.6f, \"context_tokens\": %d, \"eval_tokens\": %d}\n",
                  r.method.c_str(), r.ppl, r.ppl_reference, r.ppl_delta_pct, r.kl_mean, r.top1_agreement, r.bits_per_value,
                  options.context_tokens, options.eval_tokens);
    } else {
      std::printf("%-16s %8.3f %12.4f %12.4f %12.3e %10.4f\n", r.method.c_str(), r.bits_per_value, r.ppl, r.ppl_delta_pct,
                  r.kl_mean, r.top1_agreement);
    }
    std::fflush(stdout);
  }
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(eval, {
    "eval",
    "measure what KV transformations (int8, codec levels) cost in model quality",
    "usage: kvstream eval --model M [--text FILE] [--context-tokens T] [--eval-tokens M] [--methods LIST]\n"
    "                     [--json] [--tokenizer PATH] [--threads N]\n\n"
    "Prefills the first T tokens of the text, passes the KV cache through each method, then scores the next\n"
    "M tokens teacher-forced against the same run with the original fp32 cache: perplexity, its change in\n"
    "percent, mean KL(original || transformed) of the next-token distributions, top-1 agreement.\n\n"
    "  --model M             model short name (stories260K, tinystories656k, smollm2) or a path (required)\n"
    "  --text FILE           text to evaluate on (default /usr/share/common-licenses/GPL-3)\n"
    "  --context-tokens T    tokens prefilled into the KV cache (default 1024)\n"
    "  --eval-tokens M       tokens scored after the context (default 256); the text needs T + M + 1 tokens\n"
    "  --methods LIST        comma-separated methods, or all (default all):\n" +
        KvMethodsHelp() +
        "  --json                one JSON object per line per method, keys: method, ppl, ppl_reference,\n"
        "                        ppl_delta_pct, kl_mean, top1_agreement, bits_per_value, context_tokens, eval_tokens\n"
        "  --tokenizer PATH      tokenizer overriding the one beside the model (default: found with the model)\n"
        "  --threads N           OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "context-tokens", "eval-tokens", "methods", "tokenizer", "threads"},
    {"json"},
    RunEval,
});

}  // namespace kvstream::cli
