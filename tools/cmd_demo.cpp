// `kvstream demo`: the main job for now — real KV from SmolLM2 and what each KV method costs in quality.
#include <cstdio>

#include "tools/kv_methods.h"

namespace kvstream::cli {
namespace {

Status RunDemo(const Args& args) {
  const std::string text = args.GetString("text", kDefaultText);
  std::printf("loading %s ...\n", args.GetString("model", "smollm2").c_str());
  std::fflush(stdout);
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args, "smollm2"));
  const ModelConfig& c = model->config();
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  QualityOptions options;  // 1024 context tokens, 256 evaluated
  std::printf("model %s: %d layers, %d KV heads x %d, RoPE theta %g; text %s (%zu tokens)\n", c.name.c_str(), c.n_layers,
              c.n_kv_heads, c.head_dim, c.rope_theta, text.c_str(), tokens.size());
  std::printf("prefilling %d context tokens, scoring the next %d ...\n\n", options.context_tokens, options.eval_tokens);
  std::fflush(stdout);
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(tokens), options));
  const double values = 2.0 * c.n_layers * options.context_tokens * c.kv_dim();
  std::printf("%-16s %8s %12s %10s %12s %12s %11s\n", "method", "bits", "KV bytes", "ppl", "ppl_delta_%", "kl_mean", "top1_agree");
  double ppl_reference = 0;
  for (const KvMethod& m : KvMethods()) {
    KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<KvTransform> transform, m.make(*model));
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(*transform));
    std::printf("%-16s %8.3f %12.0f %10.4f %12.4f %12.3e %11.4f\n", r.method.c_str(), r.bits_per_value,
                values * r.bits_per_value / 8.0, r.ppl, r.ppl_delta_pct, r.kl_mean, r.top1_agreement);
    std::fflush(stdout);
    ppl_reference = r.ppl_reference;
  }
  std::printf("\nppl with the original fp32 cache: %.4f. KV bytes: K and V of all layers for the %d context tokens.\n",
              ppl_reference, options.context_tokens);
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(demo, {
    "demo",
    "real KV cache of SmolLM2 on real text, and what each KV method costs in quality",
    "usage: kvstream demo [--model M] [--text FILE] [--threads N]\n\n"
    "Loads the model (fetching SmolLM2-135M-Instruct into ~/.cache/kvstream/models if needed), prefills\n"
    "1024 tokens of the text, and for every registered KV method prints its size and quality cost on the\n"
    "next 256 tokens (perplexity change, KL divergence, top-1 agreement; see kvstream eval).\n\n"
    "  --model M      model short name or path (default smollm2)\n"
    "  --text FILE    text (default /usr/share/common-licenses/GPL-3)\n"
    "  --threads N    OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "threads"},
    {},
    RunDemo,
});

}  // namespace kvstream::cli
