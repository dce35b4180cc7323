// `kvstream fetch`: a decode node. Fetches one context from `kvstream serve` into a local KV cache, prints
// per-chunk telemetry, and with --verify measures what the fetched KV costs the model.
#include <cmath>
#include <cstdio>
#include <optional>

#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"
#include "kvstream/quality.h"
#include "kvstream/scheduler.h"
#include "tools/codec_files.h"
#include "tools/kv_dump_args.h"
#include "tools/model_args.h"
#include "tools/stream_cli.h"

namespace kvstream::cli {
namespace {

// --device: "cpu" (-1) or "cuda[:N]" (N, default 0).
Result<int> ParseFetchDevice(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) == 0 && device.size() > 5 && device.size() <= 8 &&
      device.find_first_not_of("0123456789", 5) == std::string::npos) {
    return std::stoi(device.substr(5));
  }
  return Status::InvalidArgument("--device = '" + device + "': expected cpu, cuda or cuda:N");
}

// Copies the device KV into the host cache (fp32), for --out and --verify.
Status CopyToHostCache(const DeviceKv& kv, KvCache& cache) {
  std::vector<uint16_t> host(static_cast<size_t>(2 * kv.keys.numel()));
  KVSTREAM_RETURN_IF_ERROR(CopyDeviceToHost(host.data(), kv.memory.get(), host.size() * sizeof(uint16_t)));
  const TensorView k = TensorView::Dense(host.data(), DType::kF16, kv.keys.layers(), kv.keys.tokens(), kv.keys.channels());
  const TensorView v = TensorView::Dense(host.data() + host.size() / 2, DType::kF16, kv.keys.layers(), kv.keys.tokens(),
                                         kv.keys.channels());
  KVSTREAM_RETURN_IF_ERROR(CopyView(k, cache.keys()));
  return CopyView(v, cache.values());
}

Status RunFetch(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string connect, args.Require("connect"));
  KVSTREAM_ASSIGN_OR_RETURN(auto host_port, ParseHostPort("connect", connect));
  KVSTREAM_ASSIGN_OR_RETURN(std::string context, args.Require("context"));
  KVSTREAM_ASSIGN_OR_RETURN(double deadline_ms, args.GetDouble("deadline-ms", 1000));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t inflight, args.GetInt("inflight", 2));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t decode_threads, args.GetInt("decode-threads", 1));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t eval_tokens, args.GetInt("eval-tokens", 128));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t repeat, args.GetInt("repeat", 1));
  if (repeat < 1 || repeat > 1000) return Status::InvalidArgument("--repeat = " + std::to_string(repeat) + ", expected 1..1000");
  const bool json = args.Has("json");
  const std::string device_name = args.GetString("device", "cpu");
  KVSTREAM_ASSIGN_OR_RETURN(const int gpu, ParseFetchDevice(device_name));
  if (gpu >= 0) {
    std::string why;
    if (!GpuAvailable(&why)) return Status::Unsupported("fetch --device " + device_name + ": " + why);
  }
  if (!(deadline_ms > 0)) return Status::InvalidArgument("--deadline-ms must be positive");
  if (inflight < 1 || inflight > 64) return Status::InvalidArgument("--inflight = " + std::to_string(inflight) + ", expected 1..64");
  if (decode_threads < 1 || decode_threads > 64) {
    return Status::InvalidArgument("--decode-threads = " + std::to_string(decode_threads) + ", expected 1..64");
  }

  std::unique_ptr<LevelPolicy> policy;
  if (args.Has("level")) {
    Level level;
    if (!ParseLevel(args.GetString("level"), &level)) {
      return Status::InvalidArgument("--level = '" + args.GetString("level") + "': expected fp16, int8, text, L<n> or <n>");
    }
    policy = std::make_unique<FixedLevelPolicy>(level);
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(policy, MakeLevelPolicy(args.GetString("policy", "kvstream")));
  }

  const bool verify = args.Has("verify");
  const std::string out_path = args.GetString("out");
  std::unique_ptr<Model> model;
  if (verify || args.Has("model")) {
    KVSTREAM_ASSIGN_OR_RETURN(model, LoadModelFromArgs(args));
  }
  if (!out_path.empty() && !model) {
    return Status::InvalidArgument("--out needs --model: a dump states the model's heads and RoPE");
  }
  ReceiverOptions options;
  options.max_inflight_chunks = static_cast<int>(inflight);
  options.decode_threads = static_cast<int>(decode_threads);
  if (model) {
    options.control.model_hash = ModelHash(model->config());
    options.text_recomputer = MakeTextRecomputer(*model);
  }
  if (args.Has("secret-file")) {
    KVSTREAM_ASSIGN_OR_RETURN(options.control.secret, ReadSecretFile(args.GetString("secret-file")));
  }
  if (args.Has("profile")) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile profile, Profile::Load(args.GetString("profile")));
    options.profile = std::make_shared<const Profile>(std::move(profile));
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Receiver> receiver, Receiver::Connect(host_port.first, host_port.second, options));
  KVSTREAM_ASSIGN_OR_RETURN(ManifestReply manifest, receiver->GetManifest(context));

  KvCache fetched;
  fetched.layers = manifest.layers;
  fetched.kv_dim = manifest.channels;
  fetched.tokens = fetched.capacity = manifest.manifest.total_tokens;
  const size_t values = static_cast<size_t>(fetched.layers) * fetched.capacity * fetched.kv_dim;
  if (values > (size_t{1} << 32)) return Status::ResourceExhausted("context of " + std::to_string(values) + " values per K/V exceeds 2^32");
  fetched.k.resize(values);
  fetched.v.resize(values);
  std::optional<DeviceKv> on_gpu;
  if (gpu >= 0) {
    KVSTREAM_ASSIGN_OR_RETURN(DeviceKv kv, DeviceKv::Allocate(fetched.layers, fetched.tokens, fetched.kv_dim, gpu));
    on_gpu = std::move(kv);
  }
  FetchResult result;
  for (int64_t i = 0; i < repeat; ++i) {
    if (on_gpu) {
      KVSTREAM_ASSIGN_OR_RETURN(result, receiver->Fetch(context, on_gpu->destination, deadline_ms / 1000.0, *policy));
    } else {
      KVSTREAM_ASSIGN_OR_RETURN(result, receiver->Fetch(context, fetched.keys(), fetched.values(), deadline_ms / 1000.0, *policy));
    }
    if (json) {
      std::printf("{\"context\": \"%s\", \"policy\": \"%s\", \"bytes\": %llu, \"kv_ready_ms\": %.3f, \"inflight\": %lld, "
                  "\"retries\": %d, \"deadline_met\": %s, \"last_byte_ms\": %.3f, \"decode_ms\": %.3f, \"path\": \"%s\", "
                  "\"device\": \"%s\"}\n",
                  context.c_str(), policy->name().c_str(), static_cast<unsigned long long>(result.bytes), 1000 * result.kv_ready_s,
                  static_cast<long long>(inflight), result.retries, result.deadline_met ? "true" : "false",
                  1000 * result.last_byte_s, 1000 * result.decode_s, result.path.c_str(), result.device.c_str());
      std::fflush(stdout);
    }
  }
  if (on_gpu && (verify || !out_path.empty())) KVSTREAM_RETURN_IF_ERROR(CopyToHostCache(*on_gpu, fetched));
  if (!json) {
    std::printf("fetched context '%s' from %s: %d tokens, %d chunks, %llu bytes, KV ready in %.2f ms (deadline %.0f ms %s), "
                "policy %s, %d retr%s\n",
                context.c_str(), connect.c_str(), manifest.manifest.total_tokens, manifest.manifest.num_chunks,
                static_cast<unsigned long long>(result.bytes), 1000 * result.kv_ready_s, deadline_ms,
                result.deadline_met ? "met" : "missed", policy->name().c_str(), result.retries, result.retries == 1 ? "y" : "ies");
    std::printf("%6s %6s %12s %12s %12s %12s\n", "chunk", "level", "bytes", "transfer_ms", "decode_ms", "ready_ms");
    for (const ChunkTelemetry& t : result.chunks) {
      std::printf("%6d %6s %12llu %12.3f %12.3f %12.3f\n", t.chunk, LevelName(t.level).c_str(),
                  static_cast<unsigned long long>(t.bytes), 1000 * t.transfer_s, 1000 * t.decode_s, 1000 * t.decoded_at_s);
    }
    std::printf("the last byte arrived at %.2f ms and the KV was ready %.2f ms later; the chunks took %.2f ms to decode in all,\n"
                "on %s (ready soon after the last byte: the link set the time; long after: the decoders)\n",
                1000 * result.last_byte_s, 1000 * (result.kv_ready_s - result.last_byte_s), 1000 * result.decode_s,
                on_gpu ? (result.device + ", payloads through pinned staging").c_str()
                       : (std::to_string(decode_threads) + " decode thread(s)").c_str());
  }
  if (!out_path.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(KvDump dump, KvDumpOf(model->config(), fetched));
    KVSTREAM_RETURN_IF_ERROR(WriteKvDump(dump, out_path).WithContext("--out"));
    if (!json) std::printf("wrote the fetched KV to %s (docs/kv-dump-format.md)\n", out_path.c_str());
  }
  if (!verify) return Status::Ok();

  // The server's context i is window i of the same text (or the window --window names, for a served KV
  // dump): score its continuation with the fetched KV.
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, args.GetString("text", kDefaultText)));
  int64_t index = 0;
  if (!args.GetString("window").empty()) {  // Has() reads "0" as unset
    KVSTREAM_ASSIGN_OR_RETURN(index, args.GetInt("window", 0));
    if (index < 0 || index > (1 << 20)) {
      return Status::InvalidArgument("--window = " + std::to_string(index) + ", expected 0..1048576");
    }
  } else if (context.empty() || context.size() > 6 || context.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument(
        "--verify needs a context id served by kvstream serve (a window number), or --window, got '" + context + "'");
  } else {
    index = std::stoi(context);
  }
  const int window = manifest.manifest.total_tokens;
  const size_t begin = static_cast<size_t>(index) * window;
  if (begin + window + eval_tokens + 1 > tokens.size()) {
    return Status::InvalidArgument("--verify: the text has too few tokens after context " + context + " for --eval-tokens");
  }
  std::vector<int> slice(tokens.begin() + static_cast<long>(begin), tokens.begin() + static_cast<long>(begin + window + eval_tokens + 1));
  QualityOptions qo;
  qo.context_tokens = window;
  qo.eval_tokens = static_cast<int>(eval_tokens);
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, std::move(slice), qo));
  KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure("fetched", fetched, WireBitsPerValue(fetched, result.bytes)));
  std::printf("verify: %.3f bits/value, ppl %.4f (reference %.4f, %+.3f%%), KL %.3e, top-1 agreement %.4f\n", r.bits_per_value,
              r.ppl, r.ppl_reference, r.ppl_delta_pct, r.kl_mean, r.top1_agreement);
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(fetch, {
    "fetch",
    "decode node: fetch a context's KV from kvstream serve, optionally measuring its quality",
    "usage: kvstream fetch --connect HOST:PORT --context ID [--level L | --policy P] [--deadline-ms D]\n"
    "                      [--inflight N] [--decode-threads T] [--device cpu|cuda[:N]] [--secret-file F]\n"
    "                      [--profile P]\n"
    "                      [--verify --model M [--text FILE] [--window W]] [--out FILE --model M]\n\n"
    "  --connect HOST:PORT   the server's control-plane address (required)\n"
    "  --context ID          context id (kvstream serve numbers its windows 0..N-1) (required)\n"
    "  --level L             every chunk at one level: fp16, int8, text, L<n> (default: --policy)\n"
    "  --policy P            level policy when --level is absent: kvstream, cachegen-rule, fixed-<level>\n"
    "                        (default kvstream)\n"
    "  --deadline-ms D       deadline handed to the policy (default 1000)\n"
    "  --inflight N          chunks requested ahead of decoding; 1 disables pipelining (default 2)\n"
    "  --decode-threads T    decode threads: several chunks at once, or one chunk's parts when fewer\n"
    "                        chunks are waiting (default 1)\n"
    "  --device D            where the KV goes: cpu (host memory, CPU decode threads; default) or cuda[:N]\n"
    "                        (GPU N's memory, fp16, decoded there through the device pipeline; fails in one\n"
    "                        line where there is no GPU)\n"
    "  --secret-file F       shared secret, when the server requires one\n"
    "  --profile P           the codec profile the server encodes with (its --profile; the handshake refuses\n"
    "                        a different one)\n"
    "  --model M             model for text recompute and --verify (default none)\n"
    "  --verify              score the continuation of the context with the fetched KV (needs --model, and\n"
    "                        the server's --text)\n"
    "  --text FILE           the server's text (default /usr/share/common-licenses/GPL-3)\n"
    "  --window W            the window of --text the context holds, for --verify (default: the context id;\n"
    "                        a dump of kvstream kv dump --tokens T holds window 0 of T-token windows)\n"
    "  --eval-tokens M       tokens scored by --verify (default 128)\n"
    "  --out FILE            write the fetched KV as a KV dump (.npz, float32; numpy.load reads it:\n"
    "                        docs/kv-dump-format.md), for an engine that takes KV from files; needs --model\n"
    "  --repeat N            fetch N times on one connection; the last one is reported/verified (default 1)\n"
    "  --json                one JSON object per fetch: context, policy, bytes, kv_ready_ms, inflight, retries,\n"
    "                        deadline_met, last_byte_ms (when the last payload byte arrived), decode_ms (all\n"
    "                        chunks' decode time together), path (host or staging), device (instead of the\n"
    "                        table)\n"
    "  --tokenizer PATH, --threads N   as for the other model commands",
    {"connect", "context", "level", "policy", "deadline-ms", "inflight", "decode-threads", "device", "secret-file", "model", "text",
     "eval-tokens", "repeat", "tokenizer", "threads", "profile", "window", "out"},
    {"verify", "json"},
    RunFetch,
});

}  // namespace kvstream::cli
