// `kvstream demo`: the main job (the README's first command). A prefill node (Sender) and a decode node
// (Receiver) on this machine stream a real SmolLM2 context's KV over the UCX data plane at each method
// (fp16, int8, every kvstream level, the adaptive policy) and print bytes, KV-ready and last-byte times and
// what the fetched KV costs the model. Per-method quality of the codec alone, without streaming: `kvstream eval`.
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
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("tokens", 1024));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval_tokens, args.GetInt("eval-tokens", 128));
  KVSTREAM_ASSIGN_OR_RETURN(double deadline_ms, args.GetDouble("deadline-ms", 200));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t decode_threads, args.GetInt("decode-threads", 1));
  if (decode_threads < 1 || decode_threads > 64) {
    return Status::InvalidArgument("--decode-threads = " + std::to_string(decode_threads) + ", expected 1..64");
  }
  if (tokens < 16 || tokens > 65536 || eval_tokens < 1 || eval_tokens > 65536) {
    return Status::InvalidArgument("--tokens must be in 16..65536 and --eval-tokens in 1..65536");
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args, "smollm2"));
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> text, TokenizeFile(*model, args.GetString("text", kDefaultText)));
  if (text.size() < static_cast<size_t>(tokens + eval_tokens + 1)) {
    return Status::InvalidArgument("the text has " + std::to_string(text.size()) + " tokens, the demo needs " +
                                   std::to_string(tokens + eval_tokens + 1));
  }
  text.resize(static_cast<size_t>(tokens + eval_tokens + 1));
  std::printf("prefilling %lld tokens of %s with %s ...\n", static_cast<long long>(tokens),
              args.GetString("text", kDefaultText).c_str(), model->config().name.c_str());
  std::fflush(stdout);
  QualityOptions qo;
  qo.context_tokens = static_cast<int>(tokens);
  qo.eval_tokens = static_cast<int>(eval_tokens);
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, text, qo));

  // Prefill node: serves the meter's own context cache.
  SenderOptions so;
  so.control.model_hash = ModelHash(model->config());
  KVSTREAM_RETURN_IF_ERROR(SetSenderCodec(args, model->config(), &so));
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Sender> sender, Sender::Start(so));
  ContextSpec spec;
  spec.keys = meter.context_cache().keys();
  spec.values = meter.context_cache().values();
  spec.token_ids.assign(text.begin(), text.begin() + tokens);
  spec.importance = meter.context_cache().Importance();
  KVSTREAM_RETURN_IF_ERROR(sender->Register("demo", std::move(spec)));

  // Decode node.
  ReceiverOptions ro;
  ro.control.model_hash = so.control.model_hash;
  ro.text_recomputer = MakeTextRecomputer(*model);
  ro.profile = so.profile;
  ro.decode_threads = static_cast<int>(decode_threads);
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Receiver> receiver, Receiver::Connect("127.0.0.1", sender->port(), ro));
  KVSTREAM_ASSIGN_OR_RETURN(ManifestReply manifest, receiver->GetManifest("demo"));

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

  std::printf("streaming over UCX on 127.0.0.1: %d chunks of up to %d tokens, model %s\n\n", manifest.manifest.num_chunks,
              manifest.manifest.chunk_tokens.front(), model->config().name.c_str());
  std::printf("%-24s %12s %9s %13s %13s %12s %10s %10s\n", "method", "bytes", "vs_int8", "kv_ready_ms", "last_byte_ms",
              "ppl_delta_%", "kl_mean", "top1_agree");
  uint64_t int8_bytes = 0;
  std::string adaptive_levels;
  KvCache fetched;
  fetched.layers = manifest.layers;
  fetched.kv_dim = manifest.channels;
  fetched.tokens = fetched.capacity = manifest.manifest.total_tokens;
  fetched.k.assign(static_cast<size_t>(fetched.layers) * fetched.capacity * fetched.kv_dim, 0.0f);
  fetched.v.assign(fetched.k.size(), 0.0f);
  for (Method& m : methods) {
    KVSTREAM_ASSIGN_OR_RETURN(FetchResult r, receiver->Fetch("demo", fetched.keys(), fetched.values(), deadline_ms / 1000, *m.policy));
    if (m.name == "int8") int8_bytes = r.bytes;
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, meter.Measure(m.name, fetched, WireBitsPerValue(fetched, r.bytes)));
    char ratio[32] = "";
    if (int8_bytes > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", static_cast<double>(int8_bytes) / static_cast<double>(r.bytes));
    std::printf("%-24s %12llu %9s %13.2f %13.2f %12.3f %10.2e %10.4f\n", m.name.c_str(), static_cast<unsigned long long>(r.bytes),
                ratio, 1000 * r.kv_ready_s, 1000 * r.last_byte_s, q.ppl_delta_pct, q.kl_mean, q.top1_agreement);
    std::fflush(stdout);
    if (m.policy.get() == methods.back().policy.get()) adaptive_levels = ChunkLevels(r);
  }
  std::printf("\nvs_int8: how many times fewer bytes than per-token int8. last_byte_ms: when the last payload byte\n"
              "arrived (KV ready soon after it: the link set the time; long after it: the decoders did). Quality: the\n"
              "%lld tokens after the context, scored with the fetched KV against the original fp32 KV (the same model,\n"
              "teacher-forced).\n",
              static_cast<long long>(eval_tokens));
  std::printf("kvstream-adaptive chose per chunk: %s. Per chunk, it buys the best quality that would still\n"
              "meet the %.0f ms deadline if the link fell to 1/%g of its estimate, an upgrade only when its gain in\n"
              "quality is worth its time on the link. Until the first chunks are measured the estimate is a %g Mbit/s\n"
              "prior, so the first chunks may go smaller than the rest.%s\n",
              adaptive_levels.c_str(), deadline_ms, adaptive_options.drop_factor, adaptive_options.prior_bandwidth_bps / 1e6,
              so.profile ? ""
                         : "\nWithout --profile the levels' qualities are unknown: it assumes each halving of a level's bytes\n"
                           "costs the same step of quality (docs/scheduler.md, \"Levels of unknown quality\").\n"
                           "A profile makes every level smaller, and its transform and predicted schemes smaller still\n"
                           "(predicted, with fine rows and weighed slices: negligible quality on every scored window at\n"
                           "4.75x fewer bytes than int8, on their mean at 6.1x, on text like the profile's; on other prose\n"
                           "about 20 % more bytes, 6 % with a profile learned from two kinds of text, --text A,B;\n"
                           "docs/codec.md, \"Slice weights\" and \"What the profile learns from\"):\n"
                           "kvstream profile --model smollm2 --predict --byte-predictors --weigh-slices --eval-tokens 512\n"
                           "--contexts 8 --fine-fraction 0.12 --measure [--text A,B] --out P, then\n"
                           "kvstream demo --profile P --scheme predicted --fine-fraction 0.12 --decode-threads 2.");
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(demo, {
    "demo",
    "prefill and decode nodes stream a real SmolLM2 context's KV: bytes, KV-ready time, quality per method",
    "usage: kvstream demo [--model M] [--text FILE] [--tokens T] [--eval-tokens E] [--deadline-ms D]\n"
    "                     [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L] [--decode-threads T]\n\n"
    "Loads the model (fetching SmolLM2-135M-Instruct into ~/.cache/kvstream/models if needed) and prefills\n"
    "T tokens of the text on the prefill node, which serves the KV in chunks of 256 tokens at fp16, int8 and\n"
    "every kvstream level. The decode node, in the same process, fetches it over UCX (loopback: shared\n"
    "memory or tcp, as UCX_TLS allows) once per method, pipelining transfer and decode (the table gives when\n"
    "the KV was ready and when its last byte arrived), then scores the E tokens after the context with the\n"
    "fetched KV against the original. Methods: fixed levels and the adaptive kvstream policy with a deadline\n"
    "of D ms, whose per-chunk levels are printed below the table.\n\n"
    "  --model M          model (default smollm2)\n"
    "  --text FILE        text (default /usr/share/common-licenses/GPL-3)\n"
    "  --tokens T         context tokens streamed (default 1024)\n"
    "  --eval-tokens E    tokens scored after the context (default 128)\n"
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
    {"model", "text", "tokens", "eval-tokens", "deadline-ms", "profile", "scheme", "fine-fraction", "fine-level",
     "decode-threads", "tokenizer", "threads"},
    {},
    RunDemo,
});

}  // namespace kvstream::cli
