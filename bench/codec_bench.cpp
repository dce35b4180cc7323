// `bench codec`: sizes, speeds and quality of every method on one real context (see the header).
#include "bench/codec_bench.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "bench/cachegen_ref.h"
#include "bench/codec_transform.h"
#include "kvstream/quality.h"

namespace kvstream::bench {
namespace {

using Clock = std::chrono::steady_clock;

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open text file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Best-of-`reps` seconds of one pass of `pass`, each timing repeated until min_seconds elapse.
double BestSeconds(const CodecBenchOptions& o, const std::function<Status()>& pass, Status* status) {
  double best = 1e300;
  for (int r = 0; r < std::max(1, o.repetitions); ++r) {
    int passes = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
      Status s = pass();
      if (!s.ok()) {
        *status = s;
        return 0;
      }
      ++passes;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < o.min_seconds);
    best = std::min(best, elapsed / passes);
  }
  return best;
}

struct Encoded {
  std::vector<std::vector<uint8_t>> bytes;
  double charged_bits = 0;
  double entropy_coded_bits = 0, entropy_ideal_bits = 0;
};

// With `with_stats` the codecs also report their charged size and entropy figures, which can cost a pass
// of their own (kvstream's ideal-entropy sum over every symbol); the timed encodes run without, as a
// serving node does, and the sizes come from one more untimed pass with.
Status EncodeAll(const BaselineCodec& codec, const std::vector<KvChunk16>& chunks, bool with_stats, Encoded* out) {
  out->bytes.assign(chunks.size(), {});
  out->charged_bits = out->entropy_coded_bits = out->entropy_ideal_bits = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EncodeStats stats;
    KVSTREAM_RETURN_IF_ERROR(codec.Encode(chunks[i], &out->bytes[i], with_stats ? &stats : nullptr));
    out->charged_bits += stats.charged_bits > 0 ? stats.charged_bits : 8.0 * static_cast<double>(out->bytes[i].size());
    out->entropy_coded_bits += stats.entropy_coded_bits;
    out->entropy_ideal_bits += stats.entropy_ideal_bits;
  }
  return Status::Ok();
}

// Decodes chunks [begin, end) with a stride of `step` (thread t of n takes t, t+n, ...).
Status DecodeRange(const BaselineCodec& codec, const Encoded& enc, std::vector<KvChunk16>& dst, size_t begin,
                   size_t step) {
  for (size_t i = begin; i < dst.size(); i += step) {
    KVSTREAM_RETURN_IF_ERROR(codec.Decode(enc.bytes[i].data(), enc.bytes[i].size(), &dst[i]));
  }
  return Status::Ok();
}

}  // namespace

Status RunCodecBench(const CodecBenchOptions& o, const CodecFactory& extra_codecs,
                     const std::function<void(const CodecBenchContext&)>& on_context,
                     const std::function<void(const CodecBenchRow&)>& on_row) {
  if (o.context_tokens < 1 || o.eval_tokens < 1 || o.chunk_tokens < 1 || o.threads < 1) {
    return Status::InvalidArgument("bench codec: context/eval/chunk tokens and threads must be >= 1");
  }
  LoadOptions load;
  load.threads = 0;
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(o.model, load));
  const ModelConfig& config = model->config();
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadFile(o.text));
  std::vector<int> tokens = model->tokenizer().Encode(text, true);
  const size_t need = static_cast<size_t>(o.context_tokens) + o.eval_tokens + 1;  // + the last target
  if (tokens.size() < need) {
    return Status::InvalidArgument("bench codec: " + o.text + " has " + std::to_string(tokens.size()) +
                                   " tokens, need context + eval = " + std::to_string(need));
  }
  tokens.resize(need);
  QualityOptions qo;
  qo.context_tokens = o.context_tokens;
  qo.eval_tokens = o.eval_tokens;
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, tokens, qo));
  const KvCache& context = meter.context_cache();
  const std::vector<KvChunk16> chunks = SplitIntoChunks(context, o.context_tokens, o.chunk_tokens);
  double fp16_bytes = 0;
  for (const KvChunk16& c : chunks) fp16_bytes += 2.0 * static_cast<double>(c.values());
  const double values = fp16_bytes / 2;

  // The methods, baselines first (their rows give the ratios' denominators).
  std::vector<std::unique_ptr<BaselineCodec>> codecs;
  codecs.push_back(MakeFp16Codec());
  codecs.push_back(MakeInt8Codec());
  codecs.push_back(MakeZstdCodec(3));
  codecs.push_back(MakeZstdCodec(19));
  for (int level = 1; level <= kCacheGenRefLevels; ++level) {
    KVSTREAM_ASSIGN_OR_RETURN(auto cg, CacheGenRefCodec::Create(level, config.n_layers));
    codecs.push_back(std::move(cg));
  }
  if (extra_codecs) {
    KVSTREAM_ASSIGN_OR_RETURN(auto extra, extra_codecs(*model));
    for (auto& c : extra) codecs.push_back(std::move(c));
  }

  CodecBenchContext ctx;
  ctx.model_name = config.name;
  ctx.layers = config.n_layers;
  ctx.kv_dim = config.kv_dim();
  ctx.context_tokens = o.context_tokens;
  ctx.chunks = static_cast<int>(chunks.size());
  {
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport ref, meter.Measure(*MakeFp16Transform()));
    ctx.ppl_reference = ref.ppl_reference;
  }
  if (on_context) on_context(ctx);

  // The ratios' denominators: fp16 and int8 sizes of this context.
  double fp16_bpv = 0, int8_bpv = 0;
  for (size_t i = 0; i < 2; ++i) {
    Encoded enc;
    KVSTREAM_RETURN_IF_ERROR(EncodeAll(*codecs[i], chunks, /*with_stats=*/true, &enc));
    (i == 0 ? fp16_bpv : int8_bpv) = enc.charged_bits / values;
  }
  for (const auto& codec : codecs) {
    CodecBenchRow row;
    row.method = codec->method();
    row.level = codec->level();
    Encoded enc;
    Status status;
    const double enc_s = BestSeconds(o, [&] { return EncodeAll(*codec, chunks, /*with_stats=*/false, &enc); }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    KVSTREAM_RETURN_IF_ERROR(EncodeAll(*codec, chunks, /*with_stats=*/true, &enc));
    row.bits_per_value = enc.charged_bits / values;
    if (enc.entropy_ideal_bits > 0) row.entropy_overhead_pct = 100.0 * (enc.entropy_coded_bits / enc.entropy_ideal_bits - 1.0);
    row.encode_gbps_per_core = fp16_bytes / enc_s / 1e9;

    std::vector<KvChunk16> dst = chunks;  // shapes; contents are overwritten
    const double dec_s = BestSeconds(o, [&] { return DecodeRange(*codec, enc, dst, 0, 1); }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    row.decode_gbps_per_core = fp16_bytes / dec_s / 1e9;
    const double par_s = BestSeconds(o, [&] {
      std::vector<Status> statuses(static_cast<size_t>(o.threads));
      std::vector<std::thread> pool;
      for (int t = 0; t < o.threads; ++t) {
        pool.emplace_back([&, t] { statuses[t] = DecodeRange(*codec, enc, dst, static_cast<size_t>(t), static_cast<size_t>(o.threads)); });
      }
      for (auto& th : pool) th.join();
      for (auto& s : statuses) KVSTREAM_RETURN_IF_ERROR(s);
      return Status::Ok();
    }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    row.decode_gbps = fp16_bytes / par_s / 1e9;

    auto* cg = dynamic_cast<const CacheGenRefCodec*>(codec.get());
    if (cg) {
      CacheGenRefSize total;
      std::vector<uint8_t> scratch;
      for (const KvChunk16& c : chunks) {
        scratch.clear();
        KVSTREAM_ASSIGN_OR_RETURN(CacheGenRefSize s, cg->EncodeWithSize(c, &scratch));
        total.header_bytes += s.header_bytes;
        total.scale_bytes += s.scale_bytes;
        total.cdf_bytes += s.cdf_bytes;
        total.length_bytes += s.length_bytes;
        total.payload_bytes += s.payload_bytes;
        total.ac16_ideal_bits += s.ac16_ideal_bits;
      }
      row.rans_vs_ac16_pct = 100.0 * (8.0 * static_cast<double>(total.payload_bytes) / total.ac16_ideal_bits - 1.0);
      row.breakdown = {{"header", double(total.header_bytes)}, {"scales", double(total.scale_bytes)},
                       {"cdf_tables", double(total.cdf_bytes)}, {"stream_lengths", double(total.length_bytes)},
                       {"payload", double(total.payload_bytes)}, {"ac16_ideal_payload", total.ac16_ideal_bits / 8}};
    }

    auto transform = MakeCodecTransform(*codec, o.chunk_tokens);
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, meter.Measure(*transform));
    row.ppl_delta_pct = q.ppl_delta_pct;
    row.kl_mean = q.kl_mean;
    row.top1_agreement = q.top1_agreement;

    row.ratio_vs_fp16 = fp16_bpv / row.bits_per_value;
    row.ratio_vs_int8 = int8_bpv / row.bits_per_value;
    on_row(row);
  }
  return Status::Ok();
}

}  // namespace kvstream::bench
