// `kvstream encode`: prefills a text with a model (or reads a KV dump) and writes its KV cache as codec
// chunks.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "tools/codec_files.h"
#include "tools/kv_dump_args.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

Result<DType> ParseDType(const std::string& s) {
  if (s == "f16" || s == "fp16") return DType::kF16;
  if (s == "bf16") return DType::kBF16;
  if (s == "f32" || s == "fp32") return DType::kF32;
  return Status::InvalidArgument("--dtype = " + s + ", expected f16, bf16 or f32");
}

Status RunEncode(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string out_dir, args.Require("out"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("tokens", 1024));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t chunk_tokens, args.GetInt("chunk-tokens", 256));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t codec_threads, args.GetInt("codec-threads", 1));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t repetitions, args.GetInt("repetitions", 1));
  if (repetitions < 1 || repetitions > 1000) return Status::InvalidArgument("--repetitions = " + std::to_string(repetitions) + ", expected 1..1000");
  if (tokens < 1 || tokens > (1 << 20)) return Status::InvalidArgument("--tokens = " + std::to_string(tokens) + ", expected 1..1048576");
  if (chunk_tokens < 1 || chunk_tokens > 65536) {
    return Status::InvalidArgument("--chunk-tokens = " + std::to_string(chunk_tokens) + ", expected 1..65536");
  }
  if (codec_threads < 1 || codec_threads > 256) return Status::InvalidArgument("--codec-threads = " + std::to_string(codec_threads) + ", expected 1..256");
  Level level = 1;
  if (!ParseLevel(args.GetString("level", "1"), &level)) {
    return Status::InvalidArgument("--level = " + args.GetString("level") + ", expected 1..15, fp16, int8 or text");
  }
  KVSTREAM_ASSIGN_OR_RETURN(DType dtype, ParseDType(args.GetString("dtype", "f16")));
  KVSTREAM_ASSIGN_OR_RETURN(QuantScheme scheme, ParseQuantScheme(args.GetString("scheme", "channel-uniform")));
  double fine_fraction = 0;
  Level fine_level = 0;
  KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &fine_fraction, &fine_level));
  std::optional<Profile> profile;
  if (args.Has("profile")) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile p, Profile::Load(args.GetString("profile")));
    profile = std::move(p);
  }
  // The KV encoded: a dump's (from any engine), or the first T tokens of a text prefilled with the model.
  std::shared_ptr<const KvDump> dump;
  const std::vector<std::string> dump_paths = SplitList(args.GetString("kv-dump"));
  if (args.Has("kv-dump")) {
    for (const char* flag : {"text", "tokens"}) {
      if (args.Has(flag)) {
        return Status::InvalidArgument(std::string("--") + flag + " chooses text to prefill; --kv-dump encodes a dump instead");
      }
    }
    if (dump_paths.size() != 1) return Status::InvalidArgument("--kv-dump: encode takes one file");
    KVSTREAM_ASSIGN_OR_RETURN(auto dumps, ReadKvDumpArgs(dump_paths));
    dump = dumps.front();
    tokens = dump->tokens;
  }
  std::unique_ptr<Model> model;
  if (!dump || args.Has("model")) {
    KVSTREAM_ASSIGN_OR_RETURN(model, LoadModelFromArgs(args));
  }
  const ModelConfig config = model ? model->config() : ConfigOfDump(*dump);
  if (dump && model) KVSTREAM_RETURN_IF_ERROR(CheckDumpsFit({dump}, dump_paths, config, "the model " + config.name));
  const std::string kv_name = model ? "the model" : "the dump";
  if (profile) {
    KVSTREAM_RETURN_IF_ERROR(profile->CheckShape(config.n_layers, config.kv_dim(), kv_name).WithContext("--profile"));
    KVSTREAM_RETURN_IF_ERROR(profile->CheckRope(config.rope(), kv_name).WithContext("--profile"));
  }
  KvCache cache;
  TensorView keys, values;
  std::vector<int32_t> ids32;
  std::vector<float> importance;
  if (dump) {
    keys = dump->keys_view();
    values = dump->values_view();
    ids32 = dump->token_ids;
    importance = dump->importance;
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> ids, TokenizeFile(*model, args.GetString("text", kDefaultText)));
    if (static_cast<int64_t>(ids.size()) < tokens) {
      return Status::InvalidArgument("--text has " + std::to_string(ids.size()) + " tokens, fewer than --tokens " +
                                     std::to_string(tokens));
    }
    ids.resize(static_cast<size_t>(tokens));
    cache = KvCache::Allocate(config, static_cast<int>(tokens));
    KVSTREAM_RETURN_IF_ERROR(model->Forward(ids, cache, nullptr));
    keys = cache.keys();
    values = cache.values();
    ids32.assign(ids.begin(), ids.end());
    importance = cache.Importance();
  }
  if (level == kLevelText && ids32.empty()) {
    return Status::InvalidArgument("--level text: the dump has no token ids (tokens.npy) to send");
  }
  if (fine_fraction > 0 && importance.empty()) {
    std::printf("the dump has no importance (importance.npy): no fine rows\n");
    fine_fraction = 0;
  }
  const float fine_min_importance =
      importance.empty() ? std::numeric_limits<float>::infinity() : FineRowsThreshold(importance.data(), tokens, fine_fraction);
  // Engines keep KV in 16 bits: encode from the dtype a serving engine would hand over.
  const int64_t L = keys.layers(), C = keys.channels();
  std::vector<uint16_t> k16, v16;
  if (dtype != DType::kF32) {
    k16.resize(static_cast<size_t>(L * tokens * C));
    v16.resize(k16.size());
    TensorView k = TensorView::Dense(k16.data(), dtype, L, tokens, C), v = TensorView::Dense(v16.data(), dtype, L, tokens, C);
    KVSTREAM_RETURN_IF_ERROR(CopyView(keys, k));
    KVSTREAM_RETURN_IF_ERROR(CopyView(values, v));
    keys = k;
    values = v;
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) return Status::IoError("--out " + out_dir + ": " + ec.message());
  uint64_t total = 0;
  double encode_s = 0;
  std::printf("%s %s, %lld tokens, %lld layers x %lld channels, level %s, scheme %s, tables %s\n", dump ? "dump" : "model",
              dump ? dump_paths.front().c_str() : config.name.c_str(), static_cast<long long>(tokens),
              static_cast<long long>(L), static_cast<long long>(C),
              LevelName(level).c_str(), SchemeName(scheme), profile ? HashHex(profile->hash()).c_str() : "in-chunk");
  for (int64_t t0 = 0, i = 0; t0 < tokens; t0 += chunk_tokens, ++i) {
    const int64_t n = std::min(chunk_tokens, tokens - t0);
    ChunkInput in;
    in.keys = keys;
    in.values = values;
    for (TensorView* v : {&in.keys, &in.values}) {
      v->data = static_cast<uint8_t*>(v->data) + t0 * v->strides[1] * static_cast<int64_t>(DTypeSize(v->dtype));
      v->shape[1] = n;
    }
    in.token_begin = t0;
    in.token_ids = ids32.empty() ? nullptr : ids32.data() + t0;
    in.importance = importance.empty() ? nullptr : importance.data() + t0;
    EncodeOptions eo;
    eo.level = level;
    eo.scheme = scheme;
    eo.profile = profile ? &*profile : nullptr;
    eo.threads = static_cast<int>(codec_threads);
    eo.fine_min_importance = fine_min_importance;
    eo.fine_level = fine_level;
    std::vector<uint8_t> bytes;
    double fastest = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < repetitions; ++r) {
      const auto start = std::chrono::steady_clock::now();
      KVSTREAM_ASSIGN_OR_RETURN(bytes, EncodeChunk(in, eo));
      fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    encode_s += fastest;
    char name[32];
    std::snprintf(name, sizeof name, "chunk_%05lld.kvc", static_cast<long long>(i));
    const std::string path = (std::filesystem::path(out_dir) / name).string();
    KVSTREAM_RETURN_IF_ERROR(WriteWholeFile(path, bytes.data(), bytes.size()));
    total += bytes.size();
    std::printf("  %s  tokens [%lld, %lld)  %zu bytes\n", path.c_str(), static_cast<long long>(t0), static_cast<long long>(t0 + n),
                bytes.size());
  }
  const double values_n = 2.0 * static_cast<double>(L * tokens * C);
  std::printf("total %llu bytes, %.4f bits/value (%.2fx smaller than fp16), encode %.3f ms = %.3f GB/s of fp16 KV\n",
              static_cast<unsigned long long>(total), 8.0 * static_cast<double>(total) / values_n,
              16.0 * values_n / 8.0 / static_cast<double>(total), 1000 * encode_s, 2.0 * values_n / encode_s / 1e9);
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(encode, {
    "encode",
    "prefill a text with a model (or read a KV dump) and write its KV cache as codec chunks",
    "usage: kvstream encode --model M --out DIR [--text FILE] [--tokens T] [--chunk-tokens N] [--level L]\n"
    "                       [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L] [--dtype D]\n"
    "                       [--codec-threads N] [--repetitions R] [--tokenizer PATH] [--threads N]\n"
    "       kvstream encode --kv-dump FILE --out DIR [--model M] [flags as above but --text, --tokens]\n\n"
    "Runs the first T tokens of the text through the model (or takes a KV dump's KV) and encodes the KV\n"
    "cache in chunks of N tokens (the last may be shorter) as DIR/chunk_00000.kvc, chunk_00001.kvc, ...\n"
    "(format: docs/format.md). Prints each chunk's size and the total bits per value.\n\n"
    "  --model M          model short name (stories260K, tinystories656k, smollm2) or path (required\n"
    "                     without --kv-dump; with it, the dump must match its shape, heads and RoPE)\n"
    "  --kv-dump FILE     encode this .npz KV dump (kvstream kv dump, or numpy.savez from any engine:\n"
    "                     docs/kv-dump-format.md) instead of prefilling --text; level text needs its token\n"
    "                     ids, fine rows its importance\n"
    "  --out DIR          output folder, created if missing (required)\n"
    "  --text FILE        text to prefill (default /usr/share/common-licenses/GPL-3)\n"
    "  --tokens T         tokens to prefill (default 1024)\n"
    "  --chunk-tokens N   tokens per chunk (default 256)\n"
    "  --level L          1..15 (lossy, 1 = finest; the ladder of the profile or the default ladder), fp16,\n"
    "                     int8 or text (default 1)\n"
    "  --profile P        profile file from `kvstream profile` (default: none, chunks carry their own tables)\n"
    "  --scheme S         lossy quantiser: channel-uniform (default), transform (PCA of de-rotated keys and\n"
    "                     of values; needs a profile made with --transform), predicted (the transform on the\n"
    "                     residual of a prediction from the previous layer; needs a profile made with\n"
    "                     --predict)\n" +
        FineRowsHelp(21) +
    "  --dtype D          dtype the KV is handed over in: f16 (default), bf16 or f32\n"
    "  --codec-threads N  threads encoding a chunk's segments (default 1)\n"
    "  --repetitions R    encode each chunk R times in a row and count the fastest in the encode time\n"
    "                     (default 1)\n"
    "  --tokenizer PATH   tokenizer overriding the one found with the model\n"
    "  --threads N        OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "out", "kv-dump", "text", "tokens", "chunk-tokens", "level", "profile", "scheme", "fine-fraction", "fine-level",
     "dtype", "codec-threads", "repetitions", "tokenizer", "threads"},
    {},
    RunEncode,
});

}  // namespace kvstream::cli
