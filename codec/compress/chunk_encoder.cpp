// EncodeChunk: quantises a chunk's K and V per (layer, K/V) segment, entropy-codes the symbols and
// writes the container (docs/format.md). Segments are independent and encoded in parallel.
#include <algorithm>
#include <functional>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/common/container_format.h"
#include "codec/common/crc32c.h"
#include "codec/common/key_rotation.h"
#include "codec/common/parallel.h"
#include "codec/common/predicted_rows.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "codec/common/rans.h"
#include "codec/common/transform_sum.h"
#include "codec/compress/coded_symbols.h"
#include "codec/compress/predicted_slice.h"
#include "codec/compress/table_clustering.h"
#include "codec/compress/transform_projection.h"
#include "common/half.h"
#include "common/half_rows.h"
#include "common/int8_row.h"
#include "kvstream/codec.h"

namespace kvstream {
namespace {

using codec::ByteWriter;

// Bank sizes tried for in-chunk tables; the smallest tables + payload wins. (Clustering dominates the
// in-chunk encode time, so only three sizes, with few k-means iterations.)
constexpr int kInChunkBankSizes[] = {1, 4, 16};
constexpr int kInChunkIterations = 3;

// Reads one [token] row of a (layer) of a view into floats, whatever its dtype and strides.
void LoadRow(const TensorView& v, int64_t layer, int64_t token, float* out) {
  const int64_t c_n = v.channels();
  const int64_t base = layer * v.strides[0] + token * v.strides[1];
  const int64_t cs = v.strides[2];
  switch (v.dtype) {
    case DType::kF32: {
      const float* p = static_cast<const float*>(v.data) + base;
      for (int64_t c = 0; c < c_n; ++c) out[c] = p[c * cs];
      break;
    }
    case DType::kF16: {
      const uint16_t* p = static_cast<const uint16_t*>(v.data) + base;
      if (cs == 1) {
        HalfRowToFloat(p, out, c_n);
      } else {
        for (int64_t c = 0; c < c_n; ++c) out[c] = HalfToFloat(p[c * cs]);
      }
      break;
    }
    case DType::kBF16: {
      const uint16_t* p = static_cast<const uint16_t*>(v.data) + base;
      for (int64_t c = 0; c < c_n; ++c) out[c] = BFloat16ToFloat(p[c * cs]);
      break;
    }
  }
}

// One (layer, K/V) slice as dense fp32 [tokens][channels] (every element written: no zeroing first).
std::unique_ptr<float[]> LoadSlice(const TensorView& v, int64_t layer) {
  auto out = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(v.tokens() * v.channels()));
  for (int64_t t = 0; t < v.tokens(); ++t) LoadRow(v, layer, t, out.get() + t * v.channels());
  return out;
}

struct SegmentJob {
  const TensorView* view;
  int64_t layer;
  int kv;
};

// A segment's rANS stream: its symbols, their escapes and the tables that code them.
struct SegmentStream {
  const codec::Symbols& symbols;
  const std::vector<const codec::RansModel*>& models;
};

// Writes each stream's u32 stream bytes and u32 escape count (one stream, or with fine rows the rows at
// the chunk's level then the fine rows), the sink rows, `params`, then each stream and its escapes, and
// records the entropy stage's cost in *stats (if not null; the ideal size costs a pass over the symbols).
// A stream after the first continues from the states the one before ends in (docs/rans.md, "Chained
// streams"), so only the first stores its lanes' states: they are coded last to first.
Status FinishLossySegment(const std::vector<uint16_t>& sinks, const std::vector<uint8_t>& params,
                          std::initializer_list<SegmentStream> streams, std::vector<uint8_t>* out, EncodeStats* stats) {
  const size_t n = streams.size();
  std::vector<std::vector<uint8_t>> coded(n);
  codec::RansLanes handover;
  for (size_t i = n; i-- > 0;) {
    const SegmentStream& st = streams.begin()[i];
    const codec::Symbols& s = st.symbols;
    if (s.escapes.size() > std::numeric_limits<uint32_t>::max()) return Status::ResourceExhausted("segment exceeds 4 GiB");
    KVSTREAM_RETURN_IF_ERROR(codec::RansEncode(s.symbols.data(), s.symbols.size(), st.models.data(), st.models.size(),
                                               &coded[i], i + 1 < n ? &handover : nullptr, i > 0 ? &handover : nullptr));
    if (coded[i].size() > std::numeric_limits<uint32_t>::max()) return Status::ResourceExhausted("segment exceeds 4 GiB");
  }
  ByteWriter w(out);
  for (size_t i = 0; i < n; ++i) {
    w.U32(static_cast<uint32_t>(coded[i].size()));
    w.U32(static_cast<uint32_t>(streams.begin()[i].symbols.escapes.size()));
  }
  w.Raw(sinks.data(), sinks.size() * 2);
  w.Raw(params.data(), params.size());
  if (stats) *stats = EncodeStats{};
  for (size_t i = 0; i < n; ++i) {
    const SegmentStream& st = streams.begin()[i];
    const codec::Symbols& s = st.symbols;
    w.Raw(coded[i].data(), coded[i].size());
    w.Raw(s.escapes.data(), s.escapes.size() * 2);
    if (stats) {
      stats->coded_symbols += s.symbols.size();
      stats->coded_bits += 8.0 * static_cast<double>(coded[i].size());
      stats->ideal_bits += codec::RansIdealBits(s.symbols.data(), s.symbols.size(), st.models.data(), st.models.size());
      stats->escapes += s.escapes.size();
    }
  }
  if (stats) stats->sink_values = sinks.size();
  return Status::Ok();
}

// The rows a transform or predicted chunk codes at a finer level: per token, 1 for a fine row (null when
// the chunk has none), and that level.
struct FineRows {
  const uint8_t* rows = nullptr;
  Level level = 0;
};

// The coded tokens (after the sink rows) whose importance reaches the threshold: per token 1 for a fine
// row; empty when there is none.
std::vector<uint8_t> SelectFineRows(const float* importance, int64_t tokens, int64_t sinks, float min_importance) {
  std::vector<uint8_t> fine(static_cast<size_t>(tokens), 0);
  bool any = false;
  for (int64_t t = sinks; t < tokens; ++t) {
    fine[static_cast<size_t>(t)] = importance[t] >= min_importance;
    any = any || fine[static_cast<size_t>(t)];
  }
  if (!any) fine.clear();
  return fine;
}

// Chooses the in-chunk bank (size and grouping) with the fewest total bits for these symbols.
Result<codec::TableBank> BestInChunkBank(const codec::Symbols& s, size_t channels) {
  std::vector<codec::Histogram> hist(channels);
  for (auto& h : hist) h.fill(0);
  for (size_t row = 0; row < s.symbols.size(); row += channels) {
    for (size_t c = 0; c < channels; ++c) ++hist[c][s.symbols[row + c]];
  }
  // A segment of sink rows only codes no symbol, yet its frame carries a bank: a one-symbol table.
  if (s.symbols.empty()) hist[0][codec::kSymbolZero] = 1;
  std::optional<codec::Clustering> best;
  for (int k : kInChunkBankSizes) {
    if (static_cast<size_t>(k) > channels) break;
    codec::ClusterOptions options;
    options.max_tables = k;
    options.iterations = kInChunkIterations;
    KVSTREAM_ASSIGN_OR_RETURN(codec::Clustering c, codec::ClusterHistograms(hist, options));
    if (!best || c.payload_bits + c.bank_bits < best->payload_bits + best->bank_bits) best = std::move(c);
  }
  return std::move(best->bank);
}

float StepFor(const LevelSpec& spec, int kv, float base) { return base * spec.step_multiplier[kv]; }

// The rows [sinks, tokens) of a segment are quantised; rows [0, sinks) (context positions < 4) travel
// as exact fp16 and take no part in the in-chunk statistics.
Status EncodeChannelUniform(const SegmentJob& job, const LevelSpec& spec, const Profile* profile, int64_t sinks,
                            std::vector<uint8_t>* out, EncodeStats* stats) {
  const int64_t tokens = job.view->tokens(), channels = job.view->channels();
  const std::unique_ptr<float[]> all = LoadSlice(*job.view, job.layer);
  std::vector<uint16_t> sink_values(static_cast<size_t>(sinks * channels));
  for (size_t i = 0; i < sink_values.size(); ++i) sink_values[i] = FloatToHalf(all[i]);
  const float* const x = all.get() + sinks * channels;  // the coded rows
  const int64_t coded = tokens - sinks;
  std::vector<float> mean(static_cast<size_t>(channels)), step(static_cast<size_t>(channels));
  std::vector<uint8_t> params;
  ByteWriter pw(&params);
  if (profile) {
    const ProfileData& d = DataOf(*profile);
    const ProfileLevelData& lvl = d.levels[static_cast<size_t>(spec.level - 1)];
    for (int64_t c = 0; c < channels; ++c) {
      const size_t i = d.Index(static_cast<int>(job.layer), job.kv, static_cast<int>(c));
      mean[c] = d.means[i];
      step[c] = lvl.steps[i];
    }
  } else {
    // In-chunk parameters: fp16 channel means and one fp32 step from the RMS channel std. (Robust
    // median/MAD estimates were measured on SmolLM2 and changed neither size nor quality, while MAD = 0
    // channels of small models gave steps below fp32 resolution.)
    std::vector<double> sum(channels, 0.0), sq(channels, 0.0);
    for (int64_t t = 0; t < coded; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        const double v = std::isfinite(x[t * channels + c]) ? x[t * channels + c] : 0.0;
        sum[c] += v;
        sq[c] += v * v;
      }
    }
    const double n = static_cast<double>(std::max<int64_t>(coded, 1));
    double var_sum = 0;
    for (int64_t c = 0; c < channels; ++c) {
      const double m = sum[c] / n;
      var_sum += std::max(0.0, sq[c] / n - m * m);
      mean[c] = HalfToFloat(FloatToHalf(static_cast<float>(m)));
      if (!std::isfinite(mean[c])) mean[c] = 0.0f;  // a mean beyond fp16's range: those values escape
    }
    double base = std::sqrt(var_sum / static_cast<double>(channels));
    if (!(base > 1e-30) || !std::isfinite(base)) base = 1.0;  // constant data: any step codes it
    float s = StepFor(spec, job.kv, static_cast<float>(base));
    if (!std::isfinite(s)) s = std::numeric_limits<float>::max();
    std::fill(step.begin(), step.end(), s);
    pw.F32(s);
    for (int64_t c = 0; c < channels; ++c) pw.U16(FloatToHalf(mean[c]));
  }
  codec::Symbols s;
  s.symbols.resize(static_cast<size_t>(coded * channels));
  std::vector<float> inv(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) inv[c] = 1.0f / step[c];
  for (int64_t t = 0; t < coded; ++t) {
    const float* row = x + t * channels;
    uint8_t* sym = s.symbols.data() + t * channels;
    for (int64_t c = 0; c < channels; ++c) sym[c] = codec::QuantizeToSymbol(row[c], mean[c], inv[c]);
  }
  std::vector<const codec::RansModel*> models;
  codec::TableBank bank;
  if (profile) {
    const ProfileData& d = DataOf(*profile);
    models = d.levels[static_cast<size_t>(spec.level - 1)].bank.ChannelModels(
        d.Index(static_cast<int>(job.layer), job.kv, 0), static_cast<size_t>(channels));
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(bank, BestInChunkBank(s, static_cast<size_t>(channels)));
    models = bank.ChannelModels(0, static_cast<size_t>(channels));
    codec::WriteTableBank(bank, pw);
  }
  codec::EscapeUncodable(models, x, &s);
  KVSTREAM_RETURN_IF_ERROR(FinishLossySegment(sink_values, params, {{s, models}}, out, stats));
  if (stats) stats->table_bytes = params.size();
  return Status::Ok();
}

// Transform scheme: rows [sinks, tokens) with RoPE undone (keys) and the profile's mean removed are
// projected on the level's kept components (a fine row's: the fine level's); each component's weight
// z / step is quantised like a channel value (mean 0, step 1), and an escape carries the weight as fp16.
Status EncodeTransform(const SegmentJob& job, const LevelSpec& spec, const Profile& profile, int64_t sinks,
                       const codec::RopeTable& rope, const FineRows& fine, std::vector<uint8_t>* out, EncodeStats* stats) {
  const ProfileData& d = DataOf(profile);
  const int layer = static_cast<int>(job.layer);
  const int64_t tokens = job.view->tokens(), channels = job.view->channels();
  const std::unique_ptr<float[]> all = LoadSlice(*job.view, job.layer);
  std::vector<uint16_t> sink_values(static_cast<size_t>(sinks * channels));
  for (size_t i = 0; i < sink_values.size(); ++i) sink_values[i] = FloatToHalf(all[i]);
  const size_t slice = static_cast<size_t>(layer) * 2 + static_cast<size_t>(job.kv);
  const float* mean = d.transform.means.data() + d.Index(layer, job.kv, 0);
  // Each stream's centred rows, then their weights.
  codec::Symbols streams[2];
  std::vector<const codec::RansModel*> models[2];
  std::vector<float> centred, weights;
  for (int fine_class = 0; fine_class < (fine.rows ? 2 : 1); ++fine_class) {
    const ProfileTransformLevel& lvl = d.transform.levels[static_cast<size_t>((fine_class ? fine.level : spec.level) - 1)];
    const int64_t kept = lvl.kept[slice];
    centred.clear();
    int64_t rows = 0;
    for (int64_t t = sinks; t < tokens; ++t) {
      if (fine.rows && fine.rows[t] != fine_class) continue;
      centred.resize(static_cast<size_t>((rows + 1) * channels));
      float* y = centred.data() + rows++ * channels;
      const float* x = all.get() + t * channels;
      std::copy(x, x + channels, y);
      if (job.kv == 0) rope.Unrotate(y, t, static_cast<int>(channels));
      for (int64_t c = 0; c < channels; ++c) y[c] -= mean[c];
    }
    weights.resize(static_cast<size_t>(rows * kept));
    codec::ProjectRows(centred.data(), rows, channels, d.Basis(layer, job.kv), kept, 1.0f / lvl.steps[slice], weights.data());
    codec::Symbols& s = streams[fine_class];
    s.symbols.resize(weights.size());
    for (size_t i = 0; i < weights.size(); ++i) s.symbols[i] = codec::QuantizeToSymbol(weights[i], 0.0f, 1.0f);
    models[fine_class] = lvl.bank.ChannelModels(d.Index(layer, job.kv, 0), static_cast<size_t>(kept));
    codec::EscapeUncodable(models[fine_class], weights.data(), &s);
  }
  if (fine.rows) return FinishLossySegment(sink_values, {}, {{streams[0], models[0]}, {streams[1], models[1]}}, out, stats);
  return FinishLossySegment(sink_values, {}, {{streams[0], models[0]}}, out, stats);
}

// Predicted scheme (docs/codec.md): positions are independent, layers are not, so blocks of coded rows go
// through every slice in decode order in parallel. Each slice's rows (de-rotated keys, or values) minus
// their prediction from the slices before are projected on the residual basis and quantised like the
// transform's weights; the rows are then reconstructed exactly as the decoder will (PredictedRows), since
// the next slices predict from that. Then each slice's symbols, in row order, make its segment.
Status EncodePredicted(const ChunkInput& chunk, const LevelSpec& spec, const Profile& profile, int64_t sinks,
                       const codec::RopeTable& rope, const FineRows& fine, const EncodeOptions& options,
                       std::vector<std::vector<uint8_t>>* payloads, std::vector<EncodeStats>* stats) {
  const ProfileData& d = DataOf(profile);
  const int64_t tokens = chunk.keys.tokens(), n_c = chunk.keys.channels();
  const size_t slices = static_cast<size_t>(chunk.keys.layers()) * 2;
  // A slice's kept components, step and tables at a level (1-based).
  const auto coding = [&](Level level, size_t slice, std::vector<const codec::RansModel*>* models) {
    const ProfilePredictionLevel& lvl = d.prediction.levels[static_cast<size_t>(level - 1)];
    *models = lvl.bank.ChannelModels(d.Index(static_cast<int>(slice / 2), static_cast<int>(slice % 2), 0), lvl.kept[slice]);
    return codec::RowCoding{lvl.kept[slice], d.transform.levels[static_cast<size_t>(level - 1)].steps[slice], models};
  };
  const int64_t rows = tokens - sinks;
  const size_t blocks = static_cast<size_t>((rows + codec::kPredictedRowBlock - 1) / codec::kPredictedRowBlock);
  // Per slice and block of rows: the rows at the chunk's level, and the fine rows.
  std::vector<std::vector<codec::Symbols>> parts(slices, std::vector<codec::Symbols>(blocks));
  std::vector<std::vector<codec::Symbols>> fine_parts(fine.rows ? slices : 0, std::vector<codec::Symbols>(blocks));
  const auto view = [&](size_t slice) -> const TensorView& { return slice % 2 == 0 ? chunk.keys : chunk.values; };
  KVSTREAM_RETURN_IF_ERROR(codec::RunParallel(blocks, options.threads, options.parallel_for, [&](size_t b) -> Status {
    const int64_t first = static_cast<int64_t>(b) * codec::kPredictedRowBlock, n = std::min(codec::kPredictedRowBlock, rows - first);
    codec::PredictedSliceCoder coder(d);
    codec::PredictorRing ring(n, n_c);
    std::vector<float> targets(static_cast<size_t>(n * n_c));
    std::vector<const codec::RansModel*> models, fine_models;
    for (size_t slice = 0; slice < slices; ++slice) {
      const int layer = static_cast<int>(slice / 2), kv = static_cast<int>(slice % 2);
      for (int64_t r = 0; r < n; ++r) {
        float* y = targets.data() + r * n_c;
        LoadRow(view(slice), layer, sinks + first + r, y);
        if (kv == 0) rope.Unrotate(y, sinks + first + r, static_cast<int>(n_c));
      }
      const int16_t* inputs[3];
      ring.Inputs(static_cast<int>(slice), inputs);
      const codec::RowCoding at_level = coding(spec.level, slice, &models);
      if (fine.rows) {
        const codec::RowCoding at_fine = coding(fine.level, slice, &fine_models);
        coder.Code(static_cast<int>(slice), targets.data(), inputs, n, at_level, &parts[slice][b],
                   ring.Rows(static_cast<int>(slice)), fine.rows + sinks + first, &at_fine, &fine_parts[slice][b]);
      } else {
        coder.Code(static_cast<int>(slice), targets.data(), inputs, n, at_level, &parts[slice][b],
                   ring.Rows(static_cast<int>(slice)));
      }
    }
    return Status::Ok();
  }));
  return codec::RunParallel(slices, options.threads, options.parallel_for, [&](size_t slice) -> Status {
    const int layer = static_cast<int>(slice / 2);
    const auto join = [](const std::vector<codec::Symbols>& blocks_of_rows) {
      codec::Symbols s;
      for (const codec::Symbols& part : blocks_of_rows) {
        s.symbols.insert(s.symbols.end(), part.symbols.begin(), part.symbols.end());
        s.escapes.insert(s.escapes.end(), part.escapes.begin(), part.escapes.end());
      }
      return s;
    };
    const codec::Symbols s = join(parts[slice]);
    std::vector<uint16_t> sink_values(static_cast<size_t>(sinks * n_c));
    std::vector<float> row(static_cast<size_t>(n_c));
    for (int64_t t = 0; t < sinks; ++t) {
      LoadRow(view(slice), layer, t, row.data());
      for (int64_t c = 0; c < n_c; ++c) sink_values[static_cast<size_t>(t * n_c + c)] = FloatToHalf(row[c]);
    }
    std::vector<const codec::RansModel*> models, fine_models;
    coding(spec.level, slice, &models);
    EncodeStats* slice_stats = stats ? &(*stats)[slice] : nullptr;
    if (!fine.rows) return FinishLossySegment(sink_values, {}, {{s, models}}, &(*payloads)[slice], slice_stats);
    coding(fine.level, slice, &fine_models);
    const codec::Symbols fine_s = join(fine_parts[slice]);
    return FinishLossySegment(sink_values, {}, {{s, models}, {fine_s, fine_models}}, &(*payloads)[slice], slice_stats);
  });
}

// Level int8 (common/int8_row.h): per-token fp16 scale, then the int8 values, uncoded.
void EncodeInt8(const SegmentJob& job, std::vector<uint8_t>* out) {
  const int64_t tokens = job.view->tokens(), channels = job.view->channels();
  const std::unique_ptr<float[]> x = LoadSlice(*job.view, job.layer);
  ByteWriter w(out);
  std::vector<uint16_t> scales(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) scales[t] = Int8RowScale(&x[t * channels], channels);
  w.Raw(scales.data(), scales.size() * 2);
  std::vector<int8_t> q(static_cast<size_t>(tokens * channels));
  for (int64_t t = 0; t < tokens; ++t) {
    const float inverse = Int8InverseScale(scales[t]);
    for (int64_t c = 0; c < channels; ++c) q[t * channels + c] = QuantizeInt8(x[t * channels + c], inverse);
  }
  w.Raw(q.data(), q.size());
}

// Level fp16: fp16 and bf16 inputs verbatim, fp32 rounded to fp16.
void EncodeFp16(const SegmentJob& job, std::vector<uint8_t>* out) {
  const TensorView& v = *job.view;
  const int64_t tokens = v.tokens(), channels = v.channels();
  std::vector<uint16_t> buf(static_cast<size_t>(tokens * channels));
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t base = job.layer * v.strides[0] + t * v.strides[1];
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t off = base + c * v.strides[2];
      buf[t * channels + c] = v.dtype == DType::kF32 ? FloatToHalf(static_cast<const float*>(v.data)[off])
                                                     : static_cast<const uint16_t*>(v.data)[off];
    }
  }
  ByteWriter(out).Raw(buf.data(), buf.size() * 2);
}

// Whether the options ask for fine rows: a transform or predicted level, a finer fine level, a fraction.
bool UsesFineRows(const EncodeOptions& options) {
  return IsLossyLevel(options.level) && (options.scheme == QuantScheme::kTransform || options.scheme == QuantScheme::kPredicted) &&
         options.fine_min_importance != std::numeric_limits<float>::infinity() && options.fine_level < options.level;
}

Status ValidateInput(const ChunkInput& chunk, const EncodeOptions& options, const LevelSpec** spec,
                     std::vector<LevelSpec>* default_ladder) {
  KVSTREAM_RETURN_IF_ERROR(ValidateView(chunk.keys, "keys"));
  KVSTREAM_RETURN_IF_ERROR(ValidateView(chunk.values, "values"));
  static const char* kDims[] = {"layers", "tokens", "channels"};
  for (int i = 0; i < 3; ++i) {
    if (chunk.keys.shape[i] != chunk.values.shape[i]) {
      return Status::InvalidArgument(std::string("encode: keys ") + kDims[i] + " = " + std::to_string(chunk.keys.shape[i]) +
                                     " differs from values " + kDims[i] + " = " + std::to_string(chunk.values.shape[i]));
    }
    if (chunk.keys.shape[i] < 1 || chunk.keys.shape[i] > std::numeric_limits<int32_t>::max()) {
      return Status::InvalidArgument(std::string("encode: ") + kDims[i] + " = " + std::to_string(chunk.keys.shape[i]) +
                                     " outside [1, 2^31)");
    }
  }
  if (chunk.keys.device != Device::kHost || chunk.values.device != Device::kHost) {
    return Status::Unsupported("encode: the CPU encoder reads host views only");
  }
  if (chunk.keys.dtype != chunk.values.dtype) {
    return Status::InvalidArgument(std::string("encode: keys dtype ") + DTypeName(chunk.keys.dtype) +
                                   " differs from values dtype " + DTypeName(chunk.values.dtype));
  }
  if (chunk.token_begin < 0) {
    return Status::InvalidArgument("encode: token_begin = " + std::to_string(chunk.token_begin) + " is negative");
  }
  if (!IsValidLevel(options.level)) {
    return Status::InvalidArgument("encode: level " + std::to_string(options.level) + " is not a valid level");
  }
  if (options.level == kLevelText && chunk.token_ids == nullptr) {
    return Status::InvalidArgument("encode: level text needs the chunk's token_ids");
  }
  if (!IsLossyLevel(options.level)) return Status::Ok();
  if (options.scheme != QuantScheme::kChannelUniform && options.scheme != QuantScheme::kTransform && options.scheme != QuantScheme::kPredicted) {
    return Status::InvalidArgument("encode: unknown scheme " + std::to_string(static_cast<int>(options.scheme)));
  }
  const bool needs_profile = options.scheme == QuantScheme::kTransform || options.scheme == QuantScheme::kPredicted;
  if (needs_profile && (options.profile == nullptr || !options.profile->Supports(options.scheme))) {
    return Status::InvalidArgument(options.scheme == QuantScheme::kTransform
                                       ? "encode: scheme transform needs a profile learned with a transform "
                                         "(ProfileOptions::transform, kvstream profile --transform)"
                                       : "encode: scheme predicted needs a profile learned with a prediction "
                                         "(ProfileOptions::predict, kvstream profile --transform --predict)");
  }
  const std::vector<LevelSpec>* ladder = nullptr;
  if (options.profile) {
    const Profile& p = *options.profile;
    KVSTREAM_RETURN_IF_ERROR(p.CheckShape(chunk.keys.layers(), chunk.keys.channels(), "the chunk").WithContext("encode"));
    ladder = &p.ladder();
  } else {
    *default_ladder = DefaultLadder(static_cast<int>(chunk.keys.layers()));
    ladder = default_ladder;
  }
  if (options.level > static_cast<Level>(ladder->size())) {
    return Status::InvalidArgument("encode: level " + std::to_string(options.level) + " is beyond the ladder's " +
                                   std::to_string(ladder->size()) + " lossy levels");
  }
  *spec = &(*ladder)[static_cast<size_t>(options.level - 1)];
  if (std::isnan(options.fine_min_importance)) return Status::InvalidArgument("encode: fine_min_importance is NaN");
  if (UsesFineRows(options)) {
    if (chunk.importance == nullptr) {
      return Status::InvalidArgument("encode: fine_min_importance is set, but ChunkInput::importance is null");
    }
    if (options.fine_level < 1) {
      return Status::InvalidArgument("encode: fine_level " + std::to_string(options.fine_level) + " is not a lossy level");
    }
  }
  return Status::Ok();
}

}  // namespace

float FineRowsThreshold(const float* importance, int64_t tokens, double fraction) {
  std::vector<float> values;
  for (int64_t t = codec::kSinkPositions; t < tokens; ++t) {
    values.push_back(std::isnan(importance[t]) ? -std::numeric_limits<float>::infinity() : importance[t]);
  }
  const double count = std::round(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(values.size()));
  if (!(count >= 1.0)) return std::numeric_limits<float>::infinity();
  const auto nth = values.begin() + static_cast<ptrdiff_t>(count) - 1;
  std::nth_element(values.begin(), nth, values.end(), std::greater<float>());
  return *nth;
}

namespace {

// A chunk as the encoder leaves it: the header (with its segment index, fine-row map and CRC) and the
// segments' payloads, which follow it in order.
struct EncodedParts {
  std::vector<uint8_t> header;
  std::vector<std::vector<uint8_t>> payloads;
  uint64_t total_bytes = 0;

  void CopyTo(uint8_t* out) const {
    std::memcpy(out, header.data(), header.size());
    out += header.size();
    for (const std::vector<uint8_t>& p : payloads) {
      if (!p.empty()) std::memcpy(out, p.data(), p.size());
      out += p.size();
    }
  }
};

Result<EncodedParts> EncodeParts(const ChunkInput& chunk, const EncodeOptions& options) {
  const LevelSpec* spec = nullptr;
  std::vector<LevelSpec> default_ladder;
  KVSTREAM_RETURN_IF_ERROR(ValidateInput(chunk, options, &spec, &default_ladder));
  const int64_t layers = chunk.keys.layers(), tokens = chunk.keys.tokens(), channels = chunk.keys.channels();
  const Level level = options.level;
  const bool lossy = IsLossyLevel(level);
  const bool uses_profile = lossy && options.profile;
  const DType stored = (level == kLevelFp16 && chunk.keys.dtype == DType::kBF16) ? DType::kBF16 : DType::kF16;

  std::vector<SegmentJob> jobs;
  if (level == kLevelText) {
    jobs.push_back({nullptr, 0, 2});
  } else {
    for (int64_t l = 0; l < layers; ++l) {
      jobs.push_back({&chunk.keys, l, 0});
      jobs.push_back({&chunk.values, l, 1});
    }
  }
  EncodedParts parts;
  std::vector<std::vector<uint8_t>>& payloads = parts.payloads;
  payloads.resize(jobs.size());
  std::vector<EncodeStats> seg_stats(jobs.size());
  const int64_t sinks = lossy ? codec::SinkRows(chunk.token_begin, tokens) : 0;
  std::optional<codec::RopeTable> rope;  // the chunk's positions, shared by its key segments
  if (lossy && (options.scheme == QuantScheme::kTransform || options.scheme == QuantScheme::kPredicted)) {
    rope.emplace(DataOf(*options.profile).transform.rope, chunk.token_begin, tokens);
  }
  const std::vector<uint8_t> fine_rows =
      UsesFineRows(options) ? SelectFineRows(chunk.importance, tokens, sinks, options.fine_min_importance) : std::vector<uint8_t>();
  const FineRows fine{fine_rows.empty() ? nullptr : fine_rows.data(), fine_rows.empty() ? 0 : options.fine_level};
  const auto encode_segment = [&](size_t i) -> Status {
    const SegmentJob& job = jobs[i];
    std::vector<uint8_t>* out = &payloads[i];
    if (level == kLevelText) {
      ByteWriter w(out);
      for (int64_t t = 0; t < tokens; ++t) {
        if (chunk.token_ids[t] < 0) {
          return Status::InvalidArgument("encode: token_ids[" + std::to_string(t) + "] = " +
                                         std::to_string(chunk.token_ids[t]) + " is negative");
        }
        w.U32(static_cast<uint32_t>(chunk.token_ids[t]));
      }
      return Status::Ok();
    }
    if (level == kLevelFp16) {
      EncodeFp16(job, out);
      return Status::Ok();
    }
    if (level == kLevelInt8) {
      EncodeInt8(job, out);
      return Status::Ok();
    }
    EncodeStats* stats = options.stats ? &seg_stats[i] : nullptr;
    if (options.scheme == QuantScheme::kTransform) {
      return EncodeTransform(job, *spec, *options.profile, sinks, *rope, fine, out, stats);
    }
    return EncodeChannelUniform(job, *spec, uses_profile ? options.profile : nullptr, sinks, out, stats);
  };
  KVSTREAM_RETURN_IF_ERROR(lossy && options.scheme == QuantScheme::kPredicted
                               ? EncodePredicted(chunk, *spec, *options.profile, sinks, *rope, fine, options, &payloads,
                                                 options.stats ? &seg_stats : nullptr)
                               : codec::RunParallel(jobs.size(), options.threads, options.parallel_for, encode_segment));
  if (options.stats) {
    EncodeStats sum;
    for (const EncodeStats& st : seg_stats) {
      sum.coded_symbols += st.coded_symbols;
      sum.coded_bits += st.coded_bits;
      sum.ideal_bits += st.ideal_bits;
      sum.escapes += st.escapes;
      sum.sink_values += st.sink_values;
      sum.table_bytes += st.table_bytes;
    }
    *options.stats = sum;
  }

  const size_t map_bytes = fine.rows ? codec::FineRowMapBytes(tokens) : 0;
  const uint64_t header_bytes = codec::kChunkFixedHeaderBytes + codec::kSegmentEntryBytes * jobs.size() + map_bytes + 4;
  uint64_t total = header_bytes;
  for (const auto& p : payloads) {
    if (p.size() > std::numeric_limits<uint32_t>::max()) {
      return Status::ResourceExhausted("encode: a segment of " + std::to_string(p.size()) + " bytes exceeds 4 GiB");
    }
    total += p.size();
  }
  parts.total_bytes = total;
  std::vector<uint8_t>& out = parts.header;
  out.reserve(header_bytes);
  ByteWriter w(&out);
  w.Raw(codec::kChunkMagic, 4);
  w.U16(codec::kChunkVersion);
  w.U16(static_cast<uint16_t>(codec::kChunkFixedHeaderBytes));
  w.U8(static_cast<uint8_t>(static_cast<int8_t>(level)));
  w.U8(lossy ? static_cast<uint8_t>(options.scheme) : 0);
  w.U8(static_cast<uint8_t>(chunk.keys.dtype));
  w.U8(level == kLevelFp16 ? static_cast<uint8_t>(stored) : 0);
  w.U8((lossy && !uses_profile ? codec::kChunkFlagInChunkTables : 0) | (fine.rows ? codec::kChunkFlagFineRows : 0));
  w.U8(static_cast<uint8_t>(sinks));
  w.U8(static_cast<uint8_t>(fine.level));
  w.U8(0);
  w.U32(static_cast<uint32_t>(layers));
  w.U32(static_cast<uint32_t>(tokens));
  w.U32(static_cast<uint32_t>(channels));
  w.U32(static_cast<uint32_t>(jobs.size()));
  w.U64(static_cast<uint64_t>(chunk.token_begin));
  w.U64(uses_profile ? options.profile->hash() : 0);
  w.U64(total);
  w.U64(0);
  uint64_t offset = header_bytes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    w.U64(offset);
    w.U32(static_cast<uint32_t>(payloads[i].size()));
    w.U32(codec::Crc32c(payloads[i].data(), payloads[i].size()));
    w.U32(static_cast<uint32_t>(jobs[i].layer));
    w.U8(static_cast<uint8_t>(jobs[i].kv));
    w.U8(0);
    w.U16(0);
    offset += payloads[i].size();
  }
  if (fine.rows) {
    std::vector<uint8_t> map(map_bytes, 0);
    for (int64_t t = 0; t < tokens; ++t) map[static_cast<size_t>(t / 8)] |= static_cast<uint8_t>(fine.rows[t] << (t % 8));
    w.Raw(map.data(), map.size());
  }
  w.U32(codec::Crc32c(out.data(), out.size()));
  return parts;
}

}  // namespace

Result<std::vector<uint8_t>> EncodeChunk(const ChunkInput& chunk, const EncodeOptions& options) {
  KVSTREAM_ASSIGN_OR_RETURN(EncodedParts parts, EncodeParts(chunk, options));
  std::vector<uint8_t> out;
  out.reserve(parts.total_bytes);
  out.insert(out.end(), parts.header.begin(), parts.header.end());
  for (const std::vector<uint8_t>& p : parts.payloads) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Result<uint64_t> EncodeChunkInto(const ChunkInput& chunk, const EncodeOptions& options, const ChunkAllocator& allocate) {
  KVSTREAM_ASSIGN_OR_RETURN(EncodedParts parts, EncodeParts(chunk, options));
  uint8_t* out = allocate(parts.total_bytes);
  if (!out) return Status::ResourceExhausted("encode: no memory for a chunk of " + std::to_string(parts.total_bytes) + " bytes");
  parts.CopyTo(out);
  return parts.total_bytes;
}

}  // namespace kvstream
