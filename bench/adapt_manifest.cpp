// The manifest of a real context (see the header).
#include "bench/adapt_manifest.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/model.h"
#include "kvstream/profile.h"
#include "kvstream/quality.h"

namespace kvstream::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

Result<Profile> LoadProfile(const std::string& path) {
  const ProfileLimits limits;
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, limits.max_bytes));
  auto profile = Profile::Parse(bytes.data(), bytes.size(), limits);
  if (!profile.ok()) return profile.status().WithContext(path);
  return profile;
}

}  // namespace

Result<ManifestFile> ManifestFromModel(const ManifestFromModelOptions& o) {
  const int64_t context_tokens = o.context_tokens, chunk_tokens = o.chunk_tokens, eval_tokens = o.eval_tokens;
  if (context_tokens < 16 || context_tokens > 65536) return Status::InvalidArgument("--context-tokens must be in 16..65536");
  if (chunk_tokens < 1 || chunk_tokens > context_tokens) return Status::InvalidArgument("--chunk-tokens must be in 1..--context-tokens");
  if (eval_tokens < 1 || eval_tokens > 65536) return Status::InvalidArgument("--eval-tokens must be in 1..65536");
  if (o.model.empty()) return Status::InvalidArgument("missing required flag --model");
  if (o.threads < 0 || o.threads > 1024) return Status::InvalidArgument("--threads = " + std::to_string(o.threads) + ", expected 0..1024");
  LoadOptions load;
  load.tokenizer_path = o.tokenizer;
  load.threads = static_cast<int>(o.threads);
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(o.model, load));
  const std::string& text = o.text;
  auto text_bytes = ReadTextFile(text);
  if (!text_bytes.ok()) return text_bytes.status().WithContext("--text");
  std::vector<int> ids = model->tokenizer().Encode(*text_bytes, model->tokenizer().adds_bos());
  if (static_cast<int64_t>(ids.size()) < context_tokens + eval_tokens + 1) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(ids.size()) + " tokens, needs " +
                                   std::to_string(context_tokens + eval_tokens + 1));
  }
  ids.resize(static_cast<size_t>(context_tokens + eval_tokens + 1));
  std::optional<Profile> profile;
  if (!o.profile.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(Profile p, LoadProfile(o.profile));
    profile = std::move(p);
  }
  const ModelConfig& config = model->config();

  // Recompute cost: a chunk's prefill on a fresh cache (attention over earlier chunks, which text
  // recompute also pays, makes later chunks somewhat dearer).
  KvCache probe = KvCache::Allocate(config, static_cast<int>(chunk_tokens));
  const auto prefill_start = std::chrono::steady_clock::now();
  KVSTREAM_RETURN_IF_ERROR(model->Forward(std::vector<int>(ids.begin(), ids.begin() + chunk_tokens), probe, nullptr));
  const double recompute_s_per_token = Seconds(prefill_start) / static_cast<double>(chunk_tokens);

  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, ids, QualityOptions{static_cast<int>(context_tokens), static_cast<int>(eval_tokens)}));
  const KvCache& context = meter.context_cache();
  const int64_t L = context.layers, C = context.kv_dim;

  std::vector<Level> levels = {kLevelFp16, kLevelInt8};
  const size_t ladder = profile ? profile->ladder().size() : DefaultLadder(static_cast<int>(L)).size();
  for (size_t l = 1; l <= ladder && static_cast<int>(l) <= kMaxLossyLevel; ++l) levels.push_back(static_cast<Level>(l));
  levels.push_back(kLevelText);

  ManifestFile f;
  f.model = config.name + " (" + std::to_string(L) + " layers, kv_dim " + std::to_string(C) + "), " +
            std::to_string(context_tokens) + "-token context of " + text + " in chunks of " + std::to_string(chunk_tokens);
  f.source = "kvstream bench adapt --manifest-from-model: real chunk sizes from the codec" +
             std::string(profile ? " with profile " + o.profile : " with in-chunk tables") +
             ", top-1 agreement over " + std::to_string(eval_tokens) +
             " continuation tokens from the quality meter, decode seconds per token measured on one thread, "
             "text = measured prefill seconds per token";
  FetchManifest& m = f.manifest;
  for (int64_t t0 = 0; t0 < context_tokens; t0 += chunk_tokens) {
    m.chunk_tokens.push_back(static_cast<int>(std::min(chunk_tokens, context_tokens - t0)));
  }
  m.num_chunks = static_cast<int>(m.chunk_tokens.size());
  m.total_tokens = static_cast<int>(context_tokens);
  m.bytes.assign(m.num_chunks, std::vector<uint64_t>(levels.size()));
  std::vector<int32_t> token_ids(ids.begin(), ids.begin() + context_tokens);

  for (size_t li = 0; li < levels.size(); ++li) {
    const Level level = levels[li];
    KvCache decoded = context;
    double decode_s = 0;
    uint64_t total_bytes = 0;
    for (int c = 0; c < m.num_chunks; ++c) {
      const int64_t t0 = static_cast<int64_t>(c) * chunk_tokens, n = m.chunk_tokens[c];
      // The engine hands over fp16, as a prefill node would.
      std::vector<uint16_t> k16(static_cast<size_t>(L * n * C)), v16(k16.size());
      const TensorView k = TensorView::Dense(k16.data(), DType::kF16, L, n, C);
      const TensorView v = TensorView::Dense(v16.data(), DType::kF16, L, n, C);
      KVSTREAM_RETURN_IF_ERROR(CopyView(SliceTokens(context.keys(), t0, n), k));
      KVSTREAM_RETURN_IF_ERROR(CopyView(SliceTokens(context.values(), t0, n), v));
      ChunkInput in;
      in.keys = k;
      in.values = v;
      in.token_begin = t0;
      in.token_ids = token_ids.data() + t0;
      EncodeOptions eo;
      eo.level = level;
      eo.profile = profile ? &*profile : nullptr;
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> chunk, EncodeChunk(in, eo));
      m.bytes[c][li] = chunk.size();
      total_bytes += chunk.size();
      if (level == kLevelText) continue;
      DecodeOptions dopt;
      dopt.profile = eo.profile;
      // The faster of two decodes: the first also pays for first-touch page faults of the destination.
      double best = std::numeric_limits<double>::infinity();
      for (int attempt = 0; attempt < 2; ++attempt) {
        const auto start = std::chrono::steady_clock::now();
        KVSTREAM_RETURN_IF_ERROR(DecodeChunk(chunk.data(), chunk.size(), dopt, SliceTokens(decoded.keys(), t0, n), SliceTokens(decoded.values(), t0, n)));
        best = std::min(best, Seconds(start));
      }
      decode_s += best;
    }
    double quality = 1.0;  // text: recomputed exactly
    double s_per_token = recompute_s_per_token;
    if (level != kLevelText) {
      const double bits = 8.0 * static_cast<double>(total_bytes) / (2.0 * static_cast<double>(L * context_tokens * C));
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(LevelName(level), decoded, bits));
      quality = r.top1_agreement;
      s_per_token = decode_s / static_cast<double>(context_tokens);
    }
    m.levels.push_back({level, quality});
    f.costs.s_per_token[level] = s_per_token;
    std::fprintf(stderr, "manifest: %-5s %12llu bytes  quality %.4f  %.3g s/token\n", LevelName(level).c_str(),
                 static_cast<unsigned long long>(total_bytes), quality, s_per_token);
  }
  return f;
}

}  // namespace kvstream::bench
