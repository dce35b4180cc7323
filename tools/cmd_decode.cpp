// `kvstream decode`: decodes codec chunks into dense KV (and optionally writes it out), timing the decode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "tools/codec_files.h"
#include "tools/command.h"

namespace kvstream::cli {
namespace {

Status RunDecode(const Args& args) {
  if (args.positional().empty()) return Status::InvalidArgument("decode: give at least one chunk FILE (see --help)");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t threads, args.GetInt("codec-threads", 1));
  if (threads < 1 || threads > 256) return Status::InvalidArgument("--codec-threads = " + std::to_string(threads) + ", expected 1..256");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t repetitions, args.GetInt("repetitions", 1));
  if (repetitions < 1 || repetitions > 1000) return Status::InvalidArgument("--repetitions = " + std::to_string(repetitions) + ", expected 1..1000");
  const std::string dtype_name = args.GetString("dtype", "f16");
  DType dtype;
  if (dtype_name == "f16") dtype = DType::kF16;
  else if (dtype_name == "bf16") dtype = DType::kBF16;
  else if (dtype_name == "f32") dtype = DType::kF32;
  else return Status::InvalidArgument("--dtype = " + dtype_name + ", expected f16, bf16 or f32");
  std::optional<Profile> profile;
  if (args.Has("profile")) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile p, Profile::Load(args.GetString("profile")));
    profile = std::move(p);
  }
  std::ofstream out;
  if (args.Has("out")) {
    out.open(args.GetString("out"), std::ios::binary | std::ios::trunc);
    if (!out) return Status::IoError("--out " + args.GetString("out") + ": cannot create");
  }
  DecodeOptions options;
  options.profile = profile ? &*profile : nullptr;
  options.threads = static_cast<int>(threads);
  double seconds = 0, out_fp16_bytes = 0;
  for (const std::string& path : args.positional()) {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, options.limits.max_chunk_bytes));
    auto info = InspectChunk(bytes.data(), bytes.size(), options.limits);
    if (!info.ok()) return info.status().WithContext(path);
    if (info->level == kLevelText) {
      auto ids = DecodeChunkTokens(bytes.data(), bytes.size(), options.limits);
      if (!ids.ok()) return ids.status().WithContext(path);
      std::printf("%s: text, tokens [%lld, %lld): %zu token ids (recompute them with the model)\n", path.c_str(),
                  static_cast<long long>(info->token_begin), static_cast<long long>(info->token_begin + info->tokens), ids->size());
      if (out.is_open()) out.write(reinterpret_cast<const char*>(ids->data()), static_cast<std::streamsize>(ids->size() * 4));
      continue;
    }
    const size_t n = static_cast<size_t>(info->layers * info->tokens * info->channels) * DTypeSize(dtype);
    std::vector<uint8_t> k(n), v(n);
    const TensorView kv = TensorView::Dense(k.data(), dtype, info->layers, info->tokens, info->channels);
    const TensorView vv = TensorView::Dense(v.data(), dtype, info->layers, info->tokens, info->channels);
    double s = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < repetitions; ++r) {
      const auto start = std::chrono::steady_clock::now();
      Status st = DecodeChunk(bytes.data(), bytes.size(), options, kv, vv);
      s = std::min(s, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      if (!st.ok()) return st.WithContext(path);
    }
    seconds += s;
    const double fp16 = 4.0 * static_cast<double>(info->layers * info->tokens * info->channels);
    out_fp16_bytes += fp16;
    std::printf("%s: %s, tokens [%lld, %lld), %zu bytes, decoded in %.2f ms (%.3f GB/s of fp16 KV)\n", path.c_str(),
                LevelName(info->level).c_str(), static_cast<long long>(info->token_begin),
                static_cast<long long>(info->token_begin + info->tokens), bytes.size(), 1e3 * s, fp16 / s / 1e9);
    if (out.is_open()) {
      out.write(reinterpret_cast<const char*>(k.data()), static_cast<std::streamsize>(n));
      out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n));
    }
  }
  if (out.is_open() && !out) return Status::IoError("--out: write failed");
  if (seconds > 0) {
    std::printf("total: %.3f GB/s of fp16 KV on %lld codec thread(s)\n", out_fp16_bytes / seconds / 1e9, static_cast<long long>(threads));
  }
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(decode, {
    "decode",
    "decode codec chunks into dense KV and time it",
    "usage: kvstream decode FILE... [--profile P] [--dtype D] [--codec-threads N] [--repetitions R] [--out FILE]\n\n"
    "Validates and decodes each chunk into dense [layers][tokens][channels] keys and values, printing its\n"
    "level, token range, size and decode speed. Text-level chunks give their token ids.\n\n"
    "  --profile P        the profile the chunks were encoded with (required for chunks that reference one;\n"
    "                     a different profile is refused, naming both hashes)\n"
    "  --dtype D          output dtype: f16 (default), bf16 or f32\n"
    "  --codec-threads N  threads decoding a chunk's segments (default 1)\n"
    "  --repetitions R    decode each chunk R times in a row and report the fastest (default 1)\n"
    "  --out FILE         append each chunk's raw keys then values (little-endian, dense) to FILE; token ids\n"
    "                     of text chunks as int32 (default: decode only)",
    {"profile", "dtype", "codec-threads", "repetitions", "out"},
    {},
    RunDecode,
});

}  // namespace kvstream::cli
