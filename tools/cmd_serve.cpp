// `kvstream serve`: a prefill node. Prefills windows of a text with a model and serves their KV chunks
// to `kvstream fetch` (or any Receiver) until interrupted.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "tools/codec_files.h"
#include "tools/kv_methods.h"
#include "tools/stream_cli.h"

namespace kvstream::cli {
namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }

Status RunServe(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string listen, args.Require("listen"));
  KVSTREAM_ASSIGN_OR_RETURN(auto host_port, ParseHostPort("listen", listen));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t contexts, args.GetInt("contexts", 1));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("tokens", 1024));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t chunk_tokens, args.GetInt("chunk-tokens", 256));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t cache_mb, args.GetInt("cache-mb", 512));
  KVSTREAM_ASSIGN_OR_RETURN(double duration_s, args.GetDouble("duration-s", 0));
  if (contexts < 1 || contexts > 1024) return Status::InvalidArgument("--contexts = " + std::to_string(contexts) + ", expected 1..1024");
  if (tokens < 1 || tokens > (1 << 20)) return Status::InvalidArgument("--tokens = " + std::to_string(tokens) + ", expected 1..1048576");
  if (chunk_tokens < 1 || chunk_tokens > 65536) return Status::InvalidArgument("--chunk-tokens must be in 1..65536");
  if (cache_mb < 0 || cache_mb > (1 << 20)) return Status::InvalidArgument("--cache-mb must be in 0..1048576");

  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> text_tokens, TokenizeFile(*model, args.GetString("text", kDefaultText)));

  SenderOptions options;
  options.listen_host = host_port.first;
  options.listen_port = host_port.second;
  options.chunk_tokens = static_cast<int>(chunk_tokens);
  options.cache_bytes = static_cast<uint64_t>(cache_mb) << 20;
  options.control.model_hash = ModelHash(model->config());
  KVSTREAM_RETURN_IF_ERROR(SetSenderCodec(args, model->config(), &options));
  if (args.Has("levels")) {
    for (const std::string& item : SplitList(args.GetString("levels"))) {
      Level level;
      if (!ParseLevel(item, &level)) return Status::InvalidArgument("--levels: '" + item + "' is not a level (fp16, int8, text, L<n>)");
      options.levels.push_back(level);
    }
  }
  if (args.Has("secret-file")) {
    KVSTREAM_ASSIGN_OR_RETURN(options.control.secret, ReadSecretFile(args.GetString("secret-file")));
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Sender> sender, Sender::Start(options));

  std::vector<std::unique_ptr<TextContext>> prefilled;
  for (int i = 0; i < contexts; ++i) {
    const auto start = std::chrono::steady_clock::now();
    KVSTREAM_ASSIGN_OR_RETURN(TextContext ctx, PrefillWindow(*model, text_tokens, i, static_cast<int>(tokens)));
    prefilled.push_back(std::make_unique<TextContext>(std::move(ctx)));
    TextContext& c = *prefilled.back();
    ContextSpec spec;
    spec.keys = c.cache.keys();
    spec.values = c.cache.values();
    spec.token_ids.assign(c.tokens.begin(), c.tokens.end());
    spec.importance = c.cache.Importance();
    KVSTREAM_RETURN_IF_ERROR(sender->Register(std::to_string(i), std::move(spec)));
    std::printf("context %d: %lld tokens prefilled and encoded in %.2f s\n", i, static_cast<long long>(tokens),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("serving %lld context(s) of model %s on %s:%d (model hash %016llx)%s\n", static_cast<long long>(contexts),
              model->config().name.c_str(), host_port.first.c_str(), sender->port(),
              static_cast<unsigned long long>(options.control.model_hash),
              options.control.secret.empty() ? "" : ", shared secret required");
  if (options.profile) {
    std::printf("codec profile %s, scheme %s: fetchers need the same file (kvstream fetch --profile)\n",
                HashHex(options.profile->hash()).c_str(), QuantSchemeName(options.scheme));
  }
  std::fflush(stdout);

  g_stop.store(false);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  const auto start = std::chrono::steady_clock::now();
  while (!g_stop.load()) {
    if (duration_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= duration_s) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  const Sender::Stats s = sender->stats();
  std::printf("stopping: %llu chunks (%llu bytes) sent, %llu encodes, %d connection(s) open\n",
              static_cast<unsigned long long>(s.chunks_sent), static_cast<unsigned long long>(s.bytes_sent),
              static_cast<unsigned long long>(s.encodes), s.connections);
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(serve, {
    "serve",
    "prefill node: serve the KV cache of a text's windows to kvstream fetch",
    "usage: kvstream serve --listen HOST:PORT --model M [--text FILE] [--contexts N] [--tokens T]\n"
    "                      [--chunk-tokens C] [--secret-file F] [--levels LIST] [--cache-mb MB]\n"
    "                      [--duration-s S] [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L]\n\n"
    "Context \"i\" is the KV of tokens [i*T, (i+1)*T) of the tokenized text. Each chunk is offered at fp16,\n"
    "int8, every lossy level of the codec and text (token ids, recomputed by the fetcher's model).\n\n"
    "  --listen HOST:PORT    control-plane address (required; port 0 picks a free one, printed)\n"
    "  --model M             model short name or path (required)\n"
    "  --text FILE           text to prefill (default /usr/share/common-licenses/GPL-3)\n"
    "  --contexts N          windows served, ids 0..N-1 (default 1)\n"
    "  --tokens T            tokens per context (default 1024)\n"
    "  --chunk-tokens C      tokens per chunk (default 256)\n"
    "  --secret-file F       shared secret: fetchers must prove they know it (default none)\n"
    "  --levels LIST         levels offered, comma-separated (default: fp16, int8, every lossy level, text)\n"
    "  --cache-mb MB         encoded chunks kept in memory; the rest re-encode on demand (default 512)\n"
    "  --duration-s S        stop after S seconds (default 0 = until SIGINT/SIGTERM)\n"
    "  --profile P           codec profile (kvstream profile) the lossy levels are encoded with; fetchers must\n"
    "                        hold the same one, and its measured qualities are advertised to their policies\n"
    "                        (default none: every chunk carries its own tables, qualities unknown)\n"
    "  --scheme S            quantiser of the lossy levels: channel-uniform (default), transform (about 1.2x\n"
    "                        smaller, several times slower to decode; needs a --profile made with\n"
    "                        kvstream profile --transform) or predicted (about 1.3x smaller than transform,\n"
    "                        about 3x slower again; needs a --profile made with --predict)\n" +
        FineRowsHelp(24) +
    "  --tokenizer PATH      tokenizer overriding the one found with the model\n"
    "  --threads N           forward-pass threads (default 0 = all cores)\n\n"
    "The data plane is UCX: UCX_TLS, UCX_NET_DEVICES, UCX_RNDV_THRESH, ... apply (docs/transport.md).",
    {"listen", "model", "text", "contexts", "tokens", "chunk-tokens", "secret-file", "levels", "cache-mb", "duration-s",
     "tokenizer", "threads", "profile", "scheme", "fine-fraction", "fine-level"},
    {},
    RunServe,
});

}  // namespace kvstream::cli
