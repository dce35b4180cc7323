// `kvstream demo`: the main job (the README's first command). A prefill node (Sender) and a decode node
// (Receiver) on this machine stream a real SmolLM2 context's KV over the UCX data plane at each method
// (fp16, int8, every kvstream level, the adaptive policy) and print bytes, KV-ready and last-byte times and
// what the fetched KV costs the model. Per-method quality of the codec alone, without streaming: `kvstream eval`.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kvstream/quality.h"
#include "kvstream/scheduler.h"
#include "tools/codec_files.h"
#include "tools/model_args.h"
#include "tools/stream_cli.h"

namespace kvstream::cli {
namespace {

// "fp16 L3 L2 L2": the level each chunk of a fetch arrived at.
std::string ChunkLevels(const FetchResult& r) {
  std::string levels;
  for (const ChunkTelemetry& c : r.chunks) {
    if (!levels.empty()) levels += ' ';
    levels += LevelName(c.level);
  }
  return levels;
}

Status RunDemo(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(int64_t windows, args.GetInt("windows", 2));
  KVSTREAM_ASSIGN_OR_RETURN(double deadline_ms, args.GetDouble("deadline-ms", 200));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t decode_threads, args.GetInt("decode-threads", 1));
  if (decode_threads < 1 || decode_threads > 64) {
    return Status::InvalidArgument("--decode-threads = " + std::to_string(decode_threads) + ", expected 1..64");
  }
  if (windows < 1 || windows > 16) return Status::InvalidArgument("--windows = " + std::to_string(windows) + ", expected 1..16");
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args, "smollm2"));
  // The quality harness's size (kvstream eval): 2048-token contexts and 1024 scored tokens, or half and a
  // quarter of the positions of a model that holds fewer.
  const int positions = model->config().max_seq_len;
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("tokens", std::min(2048, positions / 2)));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval_tokens, args.GetInt("eval-tokens", std::min(1024, positions / 4)));
  if (tokens < 16 || tokens > 65536 || eval_tokens < 1 || eval_tokens > 65536) {
    return Status::InvalidArgument("--tokens must be in 16..65536 and --eval-tokens in 1..65536");
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> text, TokenizeFile(*model, args.GetString("text", kDefaultText)));
  QualityOptions qo;
  qo.context_tokens = static_cast<int>(tokens);
  qo.eval_tokens = static_cast<int>(eval_tokens);
  if (text.size() < QualityWindowsTokens(qo, windows)) {
    return Status::InvalidArgument("the text has " + std::to_string(text.size()) + " tokens, the demo's " +
                                   std::to_string(windows) + " windows need " + std::to_string(QualityWindowsTokens(qo, windows)));
  }

  // Prefill node: serves each window's context, the meter's own context cache.
  SenderOptions so;
  so.control.model_hash = ModelHash(model->config());
  KVSTREAM_RETURN_IF_ERROR(SetSenderCodec(args, model->config(), &so));
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Sender> sender, Sender::Start(so));
  std::vector<QualityMeter> meters;
  meters.reserve(static_cast<size_t>(windows));  // the registered contexts view their caches
  for (int64_t w = 0; w < windows; ++w) {
    std::printf("prefilling window %lld of %lld: %lld tokens of %s with %s, then the %lld after them ...\n",
                static_cast<long long>(w + 1), static_cast<long long>(windows), static_cast<long long>(tokens),
                args.GetString("text", kDefaultText).c_str(), model->config().name.c_str(), static_cast<long long>(eval_tokens));
    std::fflush(stdout);
    std::vector<int> window = QualityWindow(text, qo, w);
    std::vector<int> context(window.begin(), window.begin() + tokens);
    KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(window), qo));
    ContextSpec spec;
    spec.keys = meter.context_cache().keys();
    spec.values = meter.context_cache().values();
    spec.token_ids = std::move(context);
    spec.importance = meter.context_cache().Importance();
    KVSTREAM_RETURN_IF_ERROR(sender->Register("demo-" + std::to_string(w), std::move(spec)));
    meters.push_back(std::move(meter));
  }

  // Decode node.
  ReceiverOptions ro;
  ro.control.model_hash = so.control.model_hash;
  ro.text_recomputer = MakeTextRecomputer(*model);
  ro.profile = so.profile;
  ro.decode_threads = static_cast<int>(decode_threads);
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Receiver> receiver, Receiver::Connect("127.0.0.1", sender->port(), ro));
  KVSTREAM_ASSIGN_OR_RETURN(ManifestReply manifest, receiver->GetManifest("demo-0"));

  struct Method {
    std::string name;
    std::unique_ptr<LevelPolicy> policy;
  };
  std::vector<Method> methods;
  for (const LevelInfo& l : manifest.manifest.levels) {
    if (l.level == kLevelText) continue;
    const std::string lossy =
        so.scheme == QuantScheme::kChannelUniform ? "kvstream-" : std::string("kvstream-") + SchemeName(so.scheme) + "-";
    const std::string name = l.level == kLevelFp16 ? "fp16" : l.level == kLevelInt8 ? "int8" : lossy + LevelName(l.level);
    methods.push_back({name, std::make_unique<FixedLevelPolicy>(l.level)});
  }
  const KvstreamPolicyOptions adaptive_options;
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<LevelPolicy> adaptive, MakeLevelPolicy("kvstream", adaptive_options));
  methods.push_back({"kvstream-adaptive", std::move(adaptive)});

  std::printf("streaming over UCX on 127.0.0.1: %lld context(s) of %d chunks of up to %d tokens, model %s; each row\n"
              "fetches every context and scores the %lld tokens after it with the model (a row at a time)\n\n",
              static_cast<long long>(windows), manifest.manifest.num_chunks, manifest.manifest.chunk_tokens.front(),
              model->config().name.c_str(), static_cast<long long>(eval_tokens));
  std::printf("%-24s %12s %9s %13s %13s %17s %10s %16s\n", "method", "bytes", "vs_int8", "kv_ready_ms", "last_byte_ms",
              "ppl_delta_% ± se", "kl_mean", "top1_agree ± se");
  double int8_bytes = 0;
  std::string adaptive_levels;
  KvCache fetched;
  fetched.layers = manifest.layers;
  fetched.kv_dim = manifest.channels;
  fetched.tokens = fetched.capacity = manifest.manifest.total_tokens;
  fetched.k.assign(static_cast<size_t>(fetched.layers) * fetched.capacity * fetched.kv_dim, 0.0f);
  fetched.v.assign(fetched.k.size(), 0.0f);
  for (Method& m : methods) {
    // Per context: bytes and times averaged, quality the mean of the windows with its standard error.
    double bytes = 0, kv_ready_s = 0, last_byte_s = 0;
    std::vector<QualityReport> reports;
    for (int64_t w = 0; w < windows; ++w) {
      KVSTREAM_ASSIGN_OR_RETURN(FetchResult r, receiver->Fetch("demo-" + std::to_string(w), fetched.keys(), fetched.values(),
                                                              deadline_ms / 1000, *m.policy));
      bytes += static_cast<double>(r.bytes) / static_cast<double>(windows);
      kv_ready_s += r.kv_ready_s / static_cast<double>(windows);
      last_byte_s += r.last_byte_s / static_cast<double>(windows);
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, meters[static_cast<size_t>(w)].Measure(m.name, fetched, WireBitsPerValue(fetched, r.bytes)));
      reports.push_back(std::move(q));
      if (w == 0 && m.policy.get() == methods.back().policy.get()) adaptive_levels = ChunkLevels(r);
    }
    const QualityReport q = MeanOfWindows(reports);
    if (m.name == "int8") int8_bytes = bytes;
    char ratio[32] = "";
    if (int8_bytes > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", int8_bytes / bytes);
    std::printf("%-24s %12.0f %9s %13.2f %13.2f %+9.3f ±%-6.3f %10.2e %8.4f ±%-6.4f%s\n", m.name.c_str(), bytes, ratio,
                1000 * kv_ready_s, 1000 * last_byte_s, q.ppl_delta_pct, q.ppl_delta_stderr, q.kl_mean, q.top1_agreement,
                q.top1_stderr, IsNegligible(q) ? " negligible" : "");
    std::fflush(stdout);
  }
  std::printf("\nbytes, kv_ready_ms, last_byte_ms: per context, the mean over the %lld. vs_int8: how many times fewer\n"
              "bytes than per-token int8. last_byte_ms: when the last payload byte arrived (KV ready soon after it: the\n"
              "link set the time; long after it: the decoders did). Quality: the %lld tokens after each context,\n"
              "scored with the fetched KV against the original fp32 KV (the same model, teacher-forced), the mean\n"
              "over the windows ± its standard error; negligible: ppl at most +1 %% and top-1 at least 98 %%.\n",
              static_cast<long long>(windows), static_cast<long long>(eval_tokens));
  std::printf("kvstream-adaptive chose per chunk: %s (first context). Per chunk, it buys the best quality that\n"
              "would still meet the %.0f ms deadline if the link fell to 1/%g of its estimate, an upgrade only when its gain in\n"
              "quality is worth its time on the link. Until the first chunks are measured the estimate is a %g Mbit/s\n"
              "prior, so the first chunks may go smaller than the rest.%s\n",
              adaptive_levels.c_str(), deadline_ms, adaptive_options.drop_factor, adaptive_options.prior_bandwidth_bps / 1e6,
              so.profile ? ""
                         : "\nWithout --profile the levels' qualities are unknown: it assumes each halving of a level's bytes\n"
                           "costs the same step of quality (docs/scheduler.md, \"Levels of unknown quality\").\n"
                           "A profile makes every level smaller, and its transform and predicted schemes smaller still (what\n"
                           "they cost on several kinds of text: bench/RESULTS.md, \"Domains\"; docs/codec.md, \"Slice\n"
                           "weights\" and \"What the profile learns from\"):\n"
                           "kvstream profile --model smollm2 --predict --byte-predictors --weigh-slices --eval-tokens 512\n"
                           "--contexts 8 --fine-fraction 0.12 --measure [--text A,B] --out P, then\n"
                           "kvstream demo --profile P --scheme predicted --fine-fraction 0.12 --decode-threads 2.");
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(demo, {
    "demo",
    "prefill and decode nodes stream a real SmolLM2 context's KV: bytes, KV-ready time, quality per method",
    "usage: kvstream demo [--model M] [--text FILE] [--tokens T] [--eval-tokens E] [--windows W] [--deadline-ms D]\n"
    "                     [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L] [--decode-threads T]\n\n"
    "Loads the model (fetching SmolLM2-135M-Instruct into ~/.cache/kvstream/models if needed) and prefills\n"
    "W windows of T tokens of the text on the prefill node, which serves their KV in chunks of 256 tokens at\n"
    "fp16, int8 and every kvstream level. The decode node, in the same process, fetches it over UCX\n"
    "(loopback: shared memory or tcp, as UCX_TLS allows) once per method, pipelining transfer and decode\n"
    "(the table gives when the KV was ready and when its last byte arrived), then scores the E tokens after\n"
    "each context with the fetched KV against the original: the mean over the windows ± its standard error.\n"
    "Methods: fixed levels and the adaptive kvstream policy with a deadline of D ms, whose per-chunk levels\n"
    "(for the first window) are printed below the table.\n\n"
    "  --model M          model (default smollm2)\n"
    "  --text FILE        text (default /usr/share/common-licenses/GPL-3)\n"
    "  --tokens T         context tokens streamed per window (default 2048, or half the model's positions\n"
    "                     when it holds fewer: 256 for the tiny models)\n"
    "  --eval-tokens E    tokens scored after each context (default 1024, or a quarter of the positions)\n"
    "  --windows W        contexts streamed and scored, one after the other through the text (default 2)\n"
    "  --deadline-ms D    deadline for the adaptive policy (default 200)\n"
    "  --profile P        codec profile (kvstream profile --model M [--transform|--predict] --measure):\n"
    "                     smaller lossy chunks, and measured qualities for the adaptive policy (default\n"
    "                     none: in-chunk tables, qualities unknown)\n"
    "  --scheme S         lossy quantiser: channel-uniform (default), transform (needs a --profile made\n"
    "                     with --transform) or predicted (needs one made with --predict)\n" +
        FineRowsHelp(21) +
    "  --decode-threads T the decode node's decode threads, several chunks at once or one chunk's parts\n"
    "                     (default 1; the transform and predicted schemes' decode is slower than\n"
    "                     channel-uniform's, and both gain most from 2)\n"
    "  --tokenizer PATH, --threads N   as for the other model commands",
    {"model", "text", "tokens", "eval-tokens", "windows", "deadline-ms", "profile", "scheme", "fine-fraction", "fine-level",
     "decode-threads", "tokenizer", "threads"},
    {},
    RunDemo,
});

}  // namespace kvstream::cli
