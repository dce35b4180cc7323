// `bench codec`: sizes, speeds and quality of every method on one real context (see the header).
#include "bench/codec_bench.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "bench/baselines.h"
#include "bench/cachegen_ref.h"
#include "measure/codec_quality.h"
#include "common/whole_file.h"
#include "kvstream/quality.h"

namespace kvstream::bench {
namespace {

using Clock = std::chrono::steady_clock;

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
Status EncodeAll(const KvCodec& codec, const std::vector<KvChunk16>& chunks, bool with_stats, Encoded* out) {
  out->bytes.assign(chunks.size(), {});
  out->charged_bits = out->entropy_coded_bits = out->entropy_ideal_bits = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EncodeCost stats;
    KVSTREAM_RETURN_IF_ERROR(codec.Encode(chunks[i], &out->bytes[i], with_stats ? &stats : nullptr));
    out->charged_bits += stats.charged_bits > 0 ? stats.charged_bits : 8.0 * static_cast<double>(out->bytes[i].size());
    out->entropy_coded_bits += stats.entropy_coded_bits;
    out->entropy_ideal_bits += stats.entropy_ideal_bits;
  }
  return Status::Ok();
}

// Decodes chunks [begin, end) with a stride of `step` (thread t of n takes t, t+n, ...).
Status DecodeRange(const KvCodec& codec, const Encoded& enc, std::vector<KvChunk16>& dst, size_t begin,
                   size_t step) {
  for (size_t i = begin; i < dst.size(); i += step) {
    KVSTREAM_RETURN_IF_ERROR(codec.Decode(enc.bytes[i].data(), enc.bytes[i].size(), &dst[i]));
  }
  return Status::Ok();
}

// What a method gives on one window's chunks: sizes summed over them and the quality of the decoded KV.
struct WindowSums {
  double charged_bits = 0, entropy_coded_bits = 0, entropy_ideal_bits = 0;
  std::vector<QualityReport> quality;  // one per window
};

Status MeasureWindow(const KvCodec& codec, const std::vector<KvChunk16>& chunks, const QualityMeter& meter,
                     int chunk_tokens, WindowSums* sums) {
  Encoded enc;
  KVSTREAM_RETURN_IF_ERROR(EncodeAll(codec, chunks, /*with_stats=*/true, &enc));
  sums->charged_bits += enc.charged_bits;
  sums->entropy_coded_bits += enc.entropy_coded_bits;
  sums->entropy_ideal_bits += enc.entropy_ideal_bits;
  KVSTREAM_ASSIGN_OR_RETURN(QualityReport q, MeasureCodec(meter, codec, chunk_tokens));
  sums->quality.push_back(std::move(q));
  return Status::Ok();
}

// The row's sizes and quality from its sums; `values` per window; fp16 and int8 the ratios' sums.
void FinishRow(const WindowSums& sums, double values, const WindowSums& fp16, const WindowSums& int8, CodecBenchRow* row) {
  const double n = static_cast<double>(sums.quality.size());
  row->bits_per_value = sums.charged_bits / (values * n);
  if (sums.entropy_ideal_bits > 0) row->entropy_overhead_pct = 100.0 * (sums.entropy_coded_bits / sums.entropy_ideal_bits - 1.0);
  const QualityReport mean = MeanOfWindows(sums.quality);
  row->ppl_delta_pct = mean.ppl_delta_pct;
  row->ppl_delta_stderr = mean.ppl_delta_stderr;
  row->kl_mean = mean.kl_mean;
  row->top1_agreement = mean.top1_agreement;
  row->top1_stderr = mean.top1_stderr;
  row->negligible = IsNegligible(mean);
  if (sums.quality.size() > 1) {
    row->top1_agreement_min = std::min_element(sums.quality.begin(), sums.quality.end(), [](const QualityReport& a, const QualityReport& b) {
                                return a.top1_agreement < b.top1_agreement;
                              })->top1_agreement;
  }
  row->ratio_vs_fp16 = fp16.charged_bits / sums.charged_bits;
  row->ratio_vs_int8 = int8.charged_bits / sums.charged_bits;
}

}  // namespace

Status RunCodecBench(const CodecBenchOptions& o, const CodecFactory& extra_codecs,
                     const std::function<void(const CodecBenchContext&)>& on_context,
                     const std::function<void(const CodecBenchRow&)>& on_row) {
  if (o.context_tokens < 1 || o.eval_tokens < 1 || o.chunk_tokens < 1 || o.threads < 1 || o.windows < 1) {
    return Status::InvalidArgument("bench codec: context/eval/chunk tokens, threads and windows must be >= 1");
  }
  LoadOptions load;
  load.threads = 0;
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(o.model, load));
  const ModelConfig& config = model->config();
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(o.text));
  const std::vector<int> tokens = model->tokenizer().Encode(text, true);
  // Windows follow each other through the text (QualityWindow).
  QualityOptions qo;
  qo.context_tokens = o.context_tokens;
  qo.eval_tokens = o.eval_tokens;
  const size_t need = QualityWindowsTokens(qo, o.windows);
  if (tokens.size() < need) {
    return Status::InvalidArgument("bench codec: " + o.text + " has " + std::to_string(tokens.size()) + " tokens, need " +
                                   std::to_string(o.windows) + " x (context + eval) + 1 = " + std::to_string(need));
  }
  auto window_meter = [&](int w) { return QualityMeter::Create(*model, QualityWindow(tokens, qo, w), qo); };
  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, window_meter(0));
  const std::vector<KvChunk16> chunks = SplitIntoChunks(meter.context_cache(), o.context_tokens, o.chunk_tokens);
  double fp16_bytes = 0;
  for (const KvChunk16& c : chunks) fp16_bytes += 2.0 * static_cast<double>(c.values());
  const double values = fp16_bytes / 2;

  // The methods, baselines first (their rows give the ratios' denominators).
  std::vector<std::unique_ptr<KvCodec>> codecs;
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
  ctx.windows = o.windows;
  ctx.ppl_reference = meter.ppl_reference();
  if (on_context) on_context(ctx);

  // The first window times every method; fp16 and int8 come first, so with one window each row after
  // them is finished (its ratios too) as soon as its method is.
  std::vector<CodecBenchRow> rows(codecs.size());
  std::vector<WindowSums> sums(codecs.size());
  for (size_t i = 0; i < codecs.size(); ++i) {
    const KvCodec& codec = *codecs[i];
    CodecBenchRow& row = rows[i];
    row.method = codec.method();
    row.level = codec.level();
    Encoded enc;
    Status status;
    const double enc_s = BestSeconds(o, [&] { return EncodeAll(codec, chunks, /*with_stats=*/false, &enc); }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    row.encode_gbps_per_core = fp16_bytes / enc_s / 1e9;

    std::vector<KvChunk16> dst = chunks;  // shapes; contents are overwritten
    const double dec_s = BestSeconds(o, [&] { return DecodeRange(codec, enc, dst, 0, 1); }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    row.decode_gbps_per_core = fp16_bytes / dec_s / 1e9;
    const double par_s = BestSeconds(o, [&] {
      std::vector<Status> statuses(static_cast<size_t>(o.threads));
      std::vector<std::thread> pool;
      for (int t = 0; t < o.threads; ++t) {
        pool.emplace_back([&, t] { statuses[t] = DecodeRange(codec, enc, dst, static_cast<size_t>(t), static_cast<size_t>(o.threads)); });
      }
      for (auto& th : pool) th.join();
      for (auto& s : statuses) KVSTREAM_RETURN_IF_ERROR(s);
      return Status::Ok();
    }, &status);
    KVSTREAM_RETURN_IF_ERROR(status);
    row.decode_gbps = fp16_bytes / par_s / 1e9;

    auto* cg = dynamic_cast<const CacheGenRefCodec*>(&codec);
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
    KVSTREAM_RETURN_IF_ERROR(MeasureWindow(codec, chunks, meter, o.chunk_tokens, &sums[i]));
    if (o.windows == 1 && i >= 1) {  // fp16's row waits for int8's size
      for (size_t k = i == 1 ? 0 : i; k <= i; ++k) {
        FinishRow(sums[k], values, sums[0], sums[1], &rows[k]);
        on_row(rows[k]);
      }
    }
  }
  if (o.windows == 1) return Status::Ok();
  for (int w = 1; w < o.windows; ++w) {
    KVSTREAM_ASSIGN_OR_RETURN(QualityMeter window, window_meter(w));
    const std::vector<KvChunk16> window_chunks = SplitIntoChunks(window.context_cache(), o.context_tokens, o.chunk_tokens);
    for (size_t i = 0; i < codecs.size(); ++i) {
      KVSTREAM_RETURN_IF_ERROR(MeasureWindow(*codecs[i], window_chunks, window, o.chunk_tokens, &sums[i]));
    }
  }
  for (size_t i = 0; i < codecs.size(); ++i) {
    FinishRow(sums[i], values, sums[0], sums[1], &rows[i]);
    on_row(rows[i]);
  }
  return Status::Ok();
}

}  // namespace kvstream::bench
