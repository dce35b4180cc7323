// Writes the chunk fuzzer's seed corpus: real chunks (stories260K's KV of real text) at every level and
// scheme, with and without the fuzzer's profile, and a real profile, each behind the mode byte that
// chunk_decode_fuzz.cpp expects; with a second folder, the KV dump fuzzer's too (real dumps of the same KV,
// behind kv_dump_fuzz.cpp's mode byte).  usage: chunk_fuzz_seeds OUT_DIR [KV_DUMP_OUT_DIR]
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/kv_dump.h"
#include "kvstream/model.h"
#include "kvstream/profile.h"
#include "tests/fuzz/fuzz_profile.h"

namespace {

int Fail(const kvstream::Status& st) {
  std::fprintf(stderr, "chunk_fuzz_seeds: %s\n", st.ToString().c_str());
  return 1;
}

bool Write(const std::string& path, uint8_t mode, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.put(static_cast<char>(mode));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvstream;
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: chunk_fuzz_seeds OUT_DIR [KV_DUMP_OUT_DIR]\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto model = Model::Load("stories260K");
  if (!model.ok()) return Fail(model.status());
  std::ifstream text_in("/usr/share/common-licenses/GPL-3");
  std::string text((std::istreambuf_iterator<char>(text_in)), std::istreambuf_iterator<char>());
  std::vector<int> ids = (*model)->tokenizer().Encode(text, (*model)->tokenizer().adds_bos());
  // Chunks of 24 tokens keep the seeds small; the profiles learn from 72 (the predictors need 2 x channels
  // positions past the sink rows).
  const int tokens = 24, profile_tokens = 72;
  ids.resize(profile_tokens);
  KvCache cache = KvCache::Allocate((*model)->config(), profile_tokens);
  if (Status st = (*model)->Forward(ids, cache, nullptr); !st.ok()) return Fail(st);
  std::vector<int32_t> ids32(ids.begin(), ids.begin() + tokens);
  ChunkInput in;
  in.keys = SliceTokens(cache.keys(), 0, tokens);
  in.values = SliceTokens(cache.values(), 0, tokens);
  in.token_begin = 4096;
  in.token_ids = ids32.data();
  const Profile* fuzz_profile = fuzz::ProfileFor(static_cast<uint32_t>(cache.layers), static_cast<uint32_t>(cache.kv_dim));
  if (!fuzz_profile) return Fail(Status::Internal("cannot build the fuzz profile"));
  int written = 0;
  const auto emit = [&](const std::string& name, uint8_t mode, const std::vector<uint8_t>& bytes) {
    if (Write(dir + "/" + name, mode, bytes)) ++written;
  };
  for (Level level : {1, 3, 6, kLevelFp16, kLevelInt8, kLevelText}) {
    {  // without a profile: lossy levels carry their tables in the chunk
      EncodeOptions eo;
      eo.level = level;
      auto chunk = EncodeChunk(in, eo);
      if (!chunk.ok()) return Fail(chunk.status());
      const std::string base = "chunk_" + LevelName(level) + "_" + SchemeName(QuantScheme::kChannelUniform);
      emit(base + "_raw", 0x00, *chunk);
      emit(base + "_fixcrc_f16", 0x05, *chunk);
      emit(base + "_fixcrc_f32_strided", 0x09, *chunk);
    }
    if (IsLossyLevel(level)) {
      EncodeOptions eo;
      eo.level = level;
      eo.profile = fuzz_profile;
      auto chunk = EncodeChunk(in, eo);
      if (!chunk.ok()) return Fail(chunk.status());
      emit("chunk_" + LevelName(level) + "_profile", 0x03, *chunk);
      // The fuzz profile's sections are made up: check that its chunks decode before seeding with them.
      const auto decodes = [&](const std::vector<uint8_t>& bytes) {
        std::vector<float> k(static_cast<size_t>(in.keys.numel())), v(k.size());
        DecodeOptions decode;
        decode.profile = fuzz_profile;
        return DecodeChunk(bytes.data(), bytes.size(), decode,
                           TensorView::Dense(k.data(), DType::kF32, in.keys.layers(), tokens, in.keys.channels()),
                           TensorView::Dense(v.data(), DType::kF32, in.keys.layers(), tokens, in.keys.channels()));
      };
      const std::vector<float> importance = cache.Importance();
      for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
        eo.scheme = scheme;
        auto transformed = EncodeChunk(in, eo);
        if (!transformed.ok()) return Fail(transformed.status());
        if (Status st = decodes(*transformed); !st.ok()) return Fail(st);
        emit("chunk_" + LevelName(level) + "_" + SchemeName(scheme), 0x03, *transformed);
        if (level == 1) continue;
        // Half of the rows at level 1 (the fine-row map and the second stream of every segment).
        ChunkInput with_importance = in;
        with_importance.importance = importance.data();
        EncodeOptions fine = eo;
        fine.fine_level = 1;
        fine.fine_min_importance = FineRowsThreshold(importance.data(), tokens, 0.5);
        auto with_fine = EncodeChunk(with_importance, fine);
        if (!with_fine.ok()) return Fail(with_fine.status());
        if (Status st = decodes(*with_fine); !st.ok()) return Fail(st);
        emit("chunk_" + LevelName(level) + "_" + SchemeName(scheme) + "_fine", 0x03, *with_fine);
      }
      // A chunk at the context's start carries sink rows (exact fp16) ahead of its symbols.
      ChunkInput at_start = in;
      at_start.token_begin = 0;
      EncodeOptions sinks;
      sinks.level = level;
      auto with_sinks = EncodeChunk(at_start, sinks);
      if (!with_sinks.ok()) return Fail(with_sinks.status());
      emit("chunk_" + LevelName(level) + "_sinks", 0x05, *with_sinks);
    }
  }
  ProfileOptions options;
  options.model = "stories260K";
  options.max_tables = 8;
  ProfileBuilder builder(options);
  if (Status st = builder.AddSample(cache.keys(), cache.values()); !st.ok()) return Fail(st);
  auto profile = builder.Build();
  if (!profile.ok()) return Fail(profile.status());
  emit("profile_raw", 0x10, profile->bytes());
  emit("profile_fixcrc", 0x11, profile->bytes());
  options.transform = true;
  options.rope = (*model)->config().rope();
  ProfileBuilder transform_builder(options);
  if (Status st = transform_builder.AddSample(cache.keys(), cache.values()); !st.ok()) return Fail(st);
  auto transform_profile = transform_builder.Build();
  if (!transform_profile.ok()) return Fail(transform_profile.status());
  emit("profile_transform_fixcrc", 0x11, transform_profile->bytes());
  options.predict = true;
  ProfileBuilder predicted_builder(options);
  if (Status st = predicted_builder.AddSample(cache.keys(), cache.values()); !st.ok()) return Fail(st);
  auto predicted_profile = predicted_builder.Build();
  if (!predicted_profile.ok()) return Fail(predicted_profile.status());
  emit("profile_predicted_fixcrc", 0x11, predicted_profile->bytes());
  std::printf("chunk_fuzz_seeds: wrote %d seeds to %s\n", written, dir.c_str());
  if (argc == 3) {
    const std::string dump_dir = argv[2];
    KvDump dump;
    dump.layers = cache.layers;
    dump.tokens = tokens;
    dump.kv_dim = cache.kv_dim;
    dump.n_heads = (*model)->config().n_heads;
    dump.n_kv_heads = (*model)->config().n_kv_heads;
    dump.vocab_size = (*model)->config().vocab_size;
    dump.rope = (*model)->config().rope();
    dump.token_ids = ids32;
    const std::vector<float> importance = cache.Importance();
    dump.importance.assign(importance.begin(), importance.begin() + tokens);
    int dumps = 0;
    for (DType dtype : {DType::kF32, DType::kF16}) {
      dump.dtype = dtype;
      dump.keys.resize(static_cast<size_t>(in.keys.numel()) * DTypeSize(dtype));
      dump.values.resize(dump.keys.size());
      if (Status st = CopyView(in.keys, dump.keys_view()); !st.ok()) return Fail(st);
      if (Status st = CopyView(in.values, dump.values_view()); !st.ok()) return Fail(st);
      if (dtype == DType::kF16) {  // as another engine may write it: no token ids, no importance
        dump.token_ids.clear();
        dump.importance.clear();
      }
      const std::string path = dump_dir + "/dump_" + DTypeName(dtype) + ".npz";
      if (Status st = WriteKvDump(dump, path); !st.ok()) return Fail(st);
      std::ifstream archive_in(path, std::ios::binary);
      const std::vector<uint8_t> archive((std::istreambuf_iterator<char>(archive_in)), std::istreambuf_iterator<char>());
      std::remove(path.c_str());
      dumps += Write(path + "_raw", 0x00, archive) + Write(path + "_fixcrc", 0x01, archive);
    }
    std::printf("chunk_fuzz_seeds: wrote %d seeds to %s\n", dumps, dump_dir.c_str());
  }
  return written > 0 ? 0 : 1;
}
