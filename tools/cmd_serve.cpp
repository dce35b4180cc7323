// `kvstream serve`: a prefill node. Prefills windows of a text with a model, or reads KV dumps, and serves
// their KV chunks to `kvstream fetch` (or any Receiver) until interrupted.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

#include "tools/codec_files.h"
#include "tools/kv_dump_args.h"
#include "tools/model_args.h"
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

  // The KV served: dumps (from any engine), or windows of a text prefilled with the model.
  std::vector<std::shared_ptr<const KvDump>> dumps;
  const std::vector<std::string> dump_paths = SplitList(args.GetString("kv-dump"));
  if (args.Has("kv-dump")) {
    for (const char* flag : {"text", "contexts", "tokens"}) {
      if (args.Has(flag)) {
        return Status::InvalidArgument(std::string("--") + flag +
                                       " chooses text windows to prefill; --kv-dump serves dumps instead");
      }
    }
    KVSTREAM_ASSIGN_OR_RETURN(dumps, ReadKvDumpArgs(dump_paths));
  }
  std::unique_ptr<Model> model;
  if (dumps.empty() || args.Has("model")) {
    KVSTREAM_ASSIGN_OR_RETURN(model, LoadModelFromArgs(args));
  }
  const ModelConfig config = model ? model->config() : ConfigOfDump(*dumps.front());
  KVSTREAM_RETURN_IF_ERROR(CheckDumpsFit(dumps, dump_paths, config, model ? "the model " + config.name : "the first dump"));
  std::vector<int> text_tokens;
  if (dumps.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(text_tokens, TokenizeFile(*model, args.GetString("text", kDefaultText)));
  }

  SenderOptions options;
  options.listen_host = host_port.first;
  options.listen_port = host_port.second;
  options.chunk_tokens = static_cast<int>(chunk_tokens);
  options.cache_bytes = static_cast<uint64_t>(cache_mb) << 20;
  // Without a model (dumps alone) the handshake states no model hash, and fetchers of any model are served.
  options.control.model_hash = model ? ModelHash(config) : 0;
  KVSTREAM_RETURN_IF_ERROR(SetSenderCodec(args, config, &options, model ? "the model" : "the dumps"));
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

  for (size_t i = 0; i < dumps.size(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    const KvDump& d = *dumps[i];
    ContextSpec spec;
    spec.keys = d.keys_view();
    spec.values = d.values_view();
    spec.token_ids = d.token_ids;
    spec.importance = d.importance;
    spec.owner = dumps[i];
    KVSTREAM_RETURN_IF_ERROR(sender->Register(std::to_string(i), std::move(spec)));
    std::printf("context %zu: %s, %d tokens (%s%s%s) encoded in %.2f s\n", i, dump_paths[i].c_str(), d.tokens,
                DTypeName(d.dtype), d.token_ids.empty() ? ", no token ids: no text level" : "",
                d.importance.empty() && options.fine_fraction > 0 ? ", no importance: no fine rows" : "",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<std::unique_ptr<TextContext>> prefilled;
  for (int i = 0; dumps.empty() && i < contexts; ++i) {
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
  const size_t served = dumps.empty() ? static_cast<size_t>(contexts) : dumps.size();
  std::printf("serving %zu context(s) of model %s on %s:%d (model hash %016llx)%s\n", served,
              model ? config.name.c_str() : "(not stated)", host_port.first.c_str(), sender->port(),
              static_cast<unsigned long long>(options.control.model_hash),
              options.control.secret.empty() ? "" : ", shared secret required");
  if (options.profile) {
    std::printf("codec profile %s, scheme %s: fetchers need the same file (kvstream fetch --profile)\n",
                HashHex(options.profile->hash()).c_str(), SchemeName(options.scheme));
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
    "prefill node: serve the KV cache of a text's windows, or KV dumps, to kvstream fetch",
    "usage: kvstream serve --listen HOST:PORT --model M [--text FILE] [--contexts N] [--tokens T]\n"
    "                      [--chunk-tokens C] [--secret-file F] [--levels LIST] [--cache-mb MB]\n"
    "                      [--duration-s S] [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L]\n"
    "       kvstream serve --listen HOST:PORT --kv-dump FILE[,FILE...] [--model M] [flags as above]\n\n"
    "Context \"i\" is the KV of tokens [i*T, (i+1)*T) of the tokenized text, or with --kv-dump the i-th\n"
    "dump. Each chunk is offered at fp16, int8, every lossy level of the codec and text (token ids,\n"
    "recomputed by the fetcher's model; a dump without token ids offers no text).\n\n"
    "  --listen HOST:PORT    control-plane address (required; port 0 picks a free one, printed)\n"
    "  --model M             model short name or path (required without --kv-dump; with it, the dumps must\n"
    "                        match its shape, heads, RoPE and vocabulary, and fetchers its hash)\n"
    "  --kv-dump FILES       serve these .npz KV dumps (kvstream kv dump, or numpy.savez from any engine:\n"
    "                        docs/kv-dump-format.md), all of one model, instead of prefilling --text\n"
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
    {"listen", "model", "kv-dump", "text", "contexts", "tokens", "chunk-tokens", "secret-file", "levels", "cache-mb",
     "duration-s", "tokenizer", "threads", "profile", "scheme", "fine-fraction", "fine-level"},
    {},
    RunServe,
});

}  // namespace kvstream::cli
