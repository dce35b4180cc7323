// DecodeChunk and DecodeChunkTokens: validate the container, then decode every (layer, K/V) segment
// into the caller's views, layers in parallel: rANS into a symbol buffer (a layer's keys and values
// together, two layers' when the CPU's kernel takes four streams), then dequantise. A predicted chunk's
// layers depend on each other, so its segments are only entropy-decoded in that pass; a second one
// reconstructs blocks of positions in parallel, each through every layer in order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "codec/common/container_format.h"
#include "codec/common/key_rotation.h"
#include "codec/common/parallel.h"
#include "codec/common/predicted_rows.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "codec/common/rans.h"
#include "codec/common/table_bank.h"
#include "codec/common/transform_sum.h"
#include "codec/decompress/container_reader.h"
#include "common/half.h"
#include "common/half_rows.h"
#include "common/int8_row.h"
#include "kvstream/codec.h"

namespace kvstream {
namespace {

using codec::ByteReader;

// Copies a row of floats with streaming stores where the CPU has them: the decoded KV is written once and
// read later by someone else (a fetched context's fp32 KV is far larger than the caches), and ordinary
// stores first read every line they write: that was 7-11 % of a fetch's CPU. The tasks that call it run
// WithFencedStores.
void StreamRow(const float* row, int64_t n, float* p) {
#if defined(__SSE2__)
  if (reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % 4 == 0) {
    for (int64_t c = 0; c < n; c += 4) _mm_stream_ps(p + c, _mm_loadu_ps(row + c));
    return;
  }
#endif
  std::memcpy(p, row, static_cast<size_t>(n) * sizeof(float));
}

// Streaming stores are weakly ordered: a task fences its own before RunParallel's synchronisation hands
// the rows to the caller.
template <typename Task>
auto WithFencedStores(Task task) {
  return [task](size_t i) -> Status {
    Status status = task(i);
#if defined(__SSE2__)
    _mm_sfence();
#endif
    return status;
  };
}

// Writes one [token] row of floats into a view, rounding once to its dtype.
void StoreRow(const TensorView& v, int64_t layer, int64_t token, const float* row) {
  const int64_t c_n = v.channels();
  const int64_t base = layer * v.strides[0] + token * v.strides[1];
  const int64_t cs = v.strides[2];
  switch (v.dtype) {
    case DType::kF32: {
      float* p = static_cast<float*>(v.data) + base;
      if (cs == 1) {
        StreamRow(row, c_n, p);
      } else {
        for (int64_t c = 0; c < c_n; ++c) p[c * cs] = row[c];
      }
      break;
    }
    case DType::kF16: {
      uint16_t* p = static_cast<uint16_t*>(v.data) + base;
      if (cs == 1) {
        FloatRowToHalf(row, p, c_n);  // the scalar conversion was half of the decode time
      } else {
        for (int64_t c = 0; c < c_n; ++c) p[c * cs] = FloatToHalf(row[c]);
      }
      break;
    }
    case DType::kBF16: {
      uint16_t* p = static_cast<uint16_t*>(v.data) + base;
      for (int64_t c = 0; c < c_n; ++c) p[c * cs] = FloatToBFloat16(row[c]);
      break;
    }
  }
}

Status CheckDestination(const TensorView& view, const char* what, const ChunkInfo& info) {
  KVSTREAM_RETURN_IF_ERROR(ValidateView(view, what));
  if (view.device != Device::kHost) return Status::Unsupported(std::string(what) + ": the CPU decoder writes host views only");
  static const char* kDims[] = {"layers", "tokens", "channels"};
  const int64_t want[3] = {info.layers, info.tokens, info.channels};
  for (int i = 0; i < 3; ++i) {
    if (view.shape[i] != want[i]) {
      return Status::InvalidArgument(std::string(what) + ": " + kDims[i] + " = " + std::to_string(view.shape[i]) +
                                     " but the chunk has " + std::to_string(want[i]));
    }
  }
  return Status::Ok();
}

Status CheckProfile(const ChunkInfo& info, const Profile* profile) {
  if (info.profile_hash == 0) return Status::Ok();
  char want[20], have[20];
  std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(info.profile_hash));
  if (profile == nullptr) {
    return Status::InvalidArgument(std::string("decode: the chunk needs profile ") + want + " and none was given");
  }
  std::snprintf(have, sizeof have, "%016llx", static_cast<unsigned long long>(profile->hash()));
  if (profile->hash() != info.profile_hash) {
    return Status::InvalidArgument(std::string("decode: the chunk was encoded with profile ") + want + " but profile " +
                                   have + " ('" + profile->model() + "') was given");
  }
  if (profile->layers() != info.layers || profile->channels() != info.channels ||
      info.level > static_cast<Level>(profile->ladder().size())) {
    return Status::CorruptData("decode: chunk shape " + std::to_string(info.layers) + " x " + std::to_string(info.channels) +
                               " at level " + std::to_string(info.level) + " does not fit its profile");
  }
  return Status::Ok();
}

class SegmentDecoder {
  // A rANS stream of coded rows and its escapes: all coded rows, or with fine rows those at the chunk's
  // level (coded_) and those at its fine level (fine_).
  struct CodedStream {
    const uint8_t* stream = nullptr;
    uint32_t stream_bytes = 0;
    const uint8_t* escapes = nullptr;
    uint32_t escape_count = 0;
    std::vector<const codec::RansModel*> models;  // one per symbol of a row
    float step = 0.0f;                            // transform and predicted: the (layer, K/V)'s step
    int64_t rows = 0;
    std::vector<int64_t> index;                   // with fine rows: the stream's rows among the coded rows
    std::unique_ptr<uint8_t[]> symbols;
    size_t symbol_count = 0;
    std::unique_ptr<int16_t[]> weights;           // transform and predicted: ComponentWeights'

    codec::WeightRows Weights() const {
      return {weights.get(), static_cast<int64_t>(models.size()), rows, index.empty() ? nullptr : index.data()};
    }
  };

 public:
  // `rope`: the chunk's positions, for the key segments of a transform chunk (else unused).
  SegmentDecoder(const uint8_t* chunk, const ChunkInfo& info, const Profile* profile, const SegmentInfo& seg,
                 const TensorView& out, const codec::RopeTable* rope = nullptr)
      : info_(info), profile_(profile), seg_(seg), out_(out), rope_(rope),
        in_(chunk + seg.offset, seg.size, codec::SegmentName(seg)) {}

  // An fp16 or int8 segment (lossy ones go by layers, in RunLossy).
  Status RunPassthrough() { return info_.level == kLevelFp16 ? Fp16() : Int8(); }

  // Lossy segments (a layer's or two layers' keys and values): all parsed, their rANS streams decoded
  // together (the vector kernels need several streams to keep their gathers busy), all dequantised. The
  // first error found is returned.
  static Status RunLossy(std::optional<SegmentDecoder>* segments, size_t n) {
    Status rans[codec::kRansMaxTogether];
    KVSTREAM_RETURN_IF_ERROR(DecodeSymbols(segments, n, rans));
    for (size_t i = 0; i < n; ++i) KVSTREAM_RETURN_IF_ERROR(segments[i]->Dequantise(rans[i]));
    return Status::Ok();
  }

  // Predicted segments, first pass (any order): parsed, symbols decoded, sink rows written, the integer
  // weights and escapes of the coded rows laid out for ReconstructPredicted.
  static Status PrepareLossy(std::optional<SegmentDecoder>* segments, size_t n) {
    Status rans[codec::kRansMaxTogether];
    KVSTREAM_RETURN_IF_ERROR(DecodeSymbols(segments, n, rans));
    for (size_t i = 0; i < n; ++i) {
      if (!rans[i].ok()) return rans[i].WithContext(segments[i]->in_.what());
      segments[i]->StoreSinkRows();
      KVSTREAM_RETURN_IF_ERROR(segments[i]->ComponentWeights());
      segments[i]->ReleaseSymbols();
    }
    return Status::Ok();
  }

  // Predicted chunk, second pass: coded rows [first, first + rows) of every slice, in slice order
  // (segments[s] is slice s), each predicted from the slices before it (docs/format.md, "Scheme 4").
  static void ReconstructPredicted(std::optional<SegmentDecoder>* segments, size_t slices, const ProfileData& d,
                                   int64_t first, int64_t rows) {
    const int64_t n_c = d.channels;
    codec::PredictedRows predicted(d);
    codec::PredictorRing ring(rows, n_c);
    const auto y = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(rows * n_c));
    std::vector<codec::EscapedComponent> escapes;
    for (size_t slice = 0; slice < slices; ++slice) {
      SegmentDecoder& seg = *segments[slice];
      const int16_t* inputs[3];
      ring.Inputs(static_cast<int>(slice), inputs);
      predicted.Predict(static_cast<int>(slice), inputs, rows);
      escapes.clear();
      auto it = std::lower_bound(seg.escaped_.begin(), seg.escaped_.end(), first,
                                 [](const codec::EscapedComponent& e, int64_t row) { return e.row < row; });
      for (; it != seg.escaped_.end() && it->row < first + rows; ++it) escapes.push_back({it->row - first, it->component, it->weight});
      codec::WeightRows classes[2];
      const int class_count = seg.WeightClasses(classes);
      predicted.Reconstruct(static_cast<int>(slice), seg.row_scales_.data() + first, classes, class_count, first, rows,
                            escapes.data(), escapes.size(), y.get(), ring.Rows(static_cast<int>(slice)));
      const int64_t sinks = seg.info_.sink_rows;
      for (int64_t r = 0; r < rows; ++r) {
        float* row = y.get() + r * n_c;
        const int64_t t = sinks + first + r;
        if (seg.kv() == 0) seg.rope_->Rotate(row, t, static_cast<int>(n_c));
        StoreRow(seg.out_, seg.seg_.layer, t, row);
      }
    }
  }

 private:
  int64_t tokens() const { return info_.tokens; }
  int64_t channels() const { return info_.channels; }
  size_t values() const { return static_cast<size_t>(info_.tokens * info_.channels); }
  int kv() const { return seg_.tensor == SegmentTensor::kValues ? 1 : 0; }

  Status ExpectSize(uint64_t want) const {
    if (seg_.size != want) {
      return Status::CorruptData(in_.what() + ": size = " + std::to_string(seg_.size) + ", level " +
                                 LevelName(info_.level) + " needs " + std::to_string(want));
    }
    return Status::Ok();
  }

  Status Fp16() {
    KVSTREAM_RETURN_IF_ERROR(ExpectSize(uint64_t{2} * values()));
    const uint8_t* p = in_.cursor();
    const size_t row_bytes = 2 * static_cast<size_t>(channels());
    if (out_.dtype == info_.stored_dtype && out_.strides[2] == 1) {
      // The stored dtype into dense rows: a copy (bit-exact, NaN payloads included).
      uint16_t* base = static_cast<uint16_t*>(out_.data) + seg_.layer * out_.strides[0];
      for (int64_t t = 0; t < tokens(); ++t) std::memcpy(base + t * out_.strides[1], p + t * row_bytes, row_bytes);
      return Status::Ok();
    }
    std::vector<uint16_t> stored(static_cast<size_t>(channels()));
    std::vector<float> row(static_cast<size_t>(channels()));
    for (int64_t t = 0; t < tokens(); ++t) {
      std::memcpy(stored.data(), p + t * row_bytes, row_bytes);
      if (info_.stored_dtype == DType::kBF16) {
        for (int64_t c = 0; c < channels(); ++c) row[c] = BFloat16ToFloat(stored[c]);
      } else {
        HalfRowToFloat(stored.data(), row.data(), channels());
      }
      StoreRow(out_, seg_.layer, t, row.data());
    }
    return Status::Ok();
  }

  Status Int8() {
    KVSTREAM_RETURN_IF_ERROR(ExpectSize(uint64_t{2} * tokens() + values()));
    const uint8_t* scales = in_.cursor();
    const int8_t* q = reinterpret_cast<const int8_t*>(scales + 2 * tokens());
    std::vector<float> row(static_cast<size_t>(channels()));
    for (int64_t t = 0; t < tokens(); ++t) {
      uint16_t scale;
      std::memcpy(&scale, scales + 2 * t, 2);
      for (int64_t c = 0; c < channels(); ++c) row[c] = DequantizeInt8(q[t * channels() + c], scale);
      StoreRow(out_, seg_.layer, t, row.data());
    }
    return Status::Ok();
  }

  // Reads the segment's parameters and tables and locates its rANS stream and escapes.
  Status ParseLossy() {
    const bool fine = !info_.fine_rows.empty();  // the container reader allows them in transform chunks only
    KVSTREAM_RETURN_IF_ERROR(in_.U32(&coded_.stream_bytes, "stream bytes"));
    KVSTREAM_RETURN_IF_ERROR(in_.U32(&coded_.escape_count, "escape count"));
    if (fine) {
      KVSTREAM_RETURN_IF_ERROR(in_.U32(&fine_.stream_bytes, "fine stream bytes"));
      KVSTREAM_RETURN_IF_ERROR(in_.U32(&fine_.escape_count, "fine escape count"));
    }
    const int64_t sinks = info_.sink_rows;  // validated by the container reader: <= tokens
    const size_t n_c = static_cast<size_t>(channels());
    transform_ = info_.scheme == QuantScheme::kTransform || info_.scheme == QuantScheme::kPredicted;
    coded_.rows = tokens() - sinks;
    if (fine) {
      // Coded row r is token sinks + r; the map never marks a sink row.
      for (int64_t r = 0; r < coded_.rows; ++r) (info_.fine_rows[static_cast<size_t>(sinks + r)] ? fine_ : coded_).index.push_back(r);
      coded_.rows = static_cast<int64_t>(coded_.index.size());
      fine_.rows = static_cast<int64_t>(fine_.index.size());
    }
    // Symbols per coded row: a value per channel, or a weight per kept component.
    size_t row_symbols = n_c;
    if (transform_) {
      if (!profile_->Supports(info_.scheme)) {
        return Status::CorruptData(in_.what() + ": a " + QuantSchemeName(info_.scheme) + " chunk, but its profile has no " +
                                   (info_.scheme == QuantScheme::kPredicted ? "prediction" : "transform"));
      }
      TransformLevel(info_.level, &coded_);
      if (fine) TransformLevel(info_.fine_level, &fine_);
      row_symbols = coded_.models.size();
    }
    coded_.symbol_count = static_cast<size_t>(coded_.rows) * row_symbols;
    fine_.symbol_count = static_cast<size_t>(fine_.rows) * fine_.models.size();
    for (const CodedStream* c : {&coded_, &fine_}) {
      if (c->escape_count > c->symbol_count) {
        return Status::CorruptData(in_.what() + ": " + (c == &fine_ ? "fine " : "") + "escape count = " +
                                   std::to_string(c->escape_count) + " exceeds its " + std::to_string(c->symbol_count) +
                                   " coded values");
      }
    }
    KVSTREAM_RETURN_IF_ERROR(in_.Span(size_t{2} * static_cast<size_t>(sinks) * n_c, &sink_values_, "sink rows"));
    cachegen_ = info_.scheme == QuantScheme::kCacheGenToken;
    mean_.assign(n_c, 0.0f);
    step_.assign(n_c, 0.0f);
    if (cachegen_) {
      uint8_t bins = 0;
      KVSTREAM_RETURN_IF_ERROR(in_.U8(&bins, "bins"));
      if (bins < 4) return Status::CorruptData(in_.what() + ": bins = " + std::to_string(bins) + ", expected 4..255");
      const uint8_t* maxes = nullptr;
      KVSTREAM_RETURN_IF_ERROR(in_.Span(static_cast<size_t>(2 * tokens()), &maxes, "token scales"));
      token_step_.resize(static_cast<size_t>(tokens()));
      for (int64_t t = 0; t < tokens(); ++t) {
        uint16_t m;
        std::memcpy(&m, maxes + 2 * t, 2);
        if (m >= 0x7c00u) {  // negative, infinite or NaN
          return Status::CorruptData(in_.what() + ": token " + std::to_string(t) + " scale 0x" + std::to_string(m) +
                                     " is not a finite non-negative fp16");
        }
        token_step_[t] = codec::CacheGenStep(m, bins);
      }
    } else if (info_.in_chunk_tables) {
      float s = 0;
      KVSTREAM_RETURN_IF_ERROR(in_.F32(&s, "step"));
      if (!std::isfinite(s) || !(s > 0.0f)) {
        return Status::CorruptData(in_.what() + ": step = " + std::to_string(s) + " is not a finite positive number");
      }
      const uint8_t* means = nullptr;
      KVSTREAM_RETURN_IF_ERROR(in_.Span(static_cast<size_t>(2 * channels()), &means, "channel means"));
      for (int64_t c = 0; c < channels(); ++c) {
        uint16_t m;
        std::memcpy(&m, means + 2 * c, 2);
        mean_[c] = HalfToFloat(m);
        if (!std::isfinite(mean_[c])) return Status::CorruptData(in_.what() + ": mean of channel " + std::to_string(c) + " is not finite");
        step_[c] = s;
      }
    } else if (!transform_) {
      const ProfileData& d = profile_->data();
      const ProfileLevelData& lvl = d.levels[static_cast<size_t>(info_.level - 1)];
      const size_t first = d.Index(static_cast<int>(seg_.layer), kv(), 0);
      for (int64_t c = 0; c < channels(); ++c) {
        mean_[c] = d.means[first + c];
        step_[c] = lvl.steps[first + c];
      }
      coded_.models = lvl.bank.ChannelModels(first, static_cast<size_t>(channels()));
    }
    if (info_.in_chunk_tables) {
      KVSTREAM_RETURN_IF_ERROR(codec::ReadTableBank(in_, static_cast<size_t>(channels()), &own_bank_));
      coded_.models = own_bank_.ChannelModels(0, static_cast<size_t>(channels()));
    }
    KVSTREAM_RETURN_IF_ERROR(in_.Span(coded_.stream_bytes, &coded_.stream, "rANS stream"));
    KVSTREAM_RETURN_IF_ERROR(in_.Span(size_t{2} * coded_.escape_count, &coded_.escapes, "escape values"));
    if (fine) {
      KVSTREAM_RETURN_IF_ERROR(in_.Span(fine_.stream_bytes, &fine_.stream, "fine rANS stream"));
      KVSTREAM_RETURN_IF_ERROR(in_.Span(size_t{2} * fine_.escape_count, &fine_.escapes, "fine escape values"));
    }
    if (in_.remaining() != 0) {
      return Status::CorruptData(in_.what() + ": " + std::to_string(in_.remaining()) + " bytes left over after the escapes");
    }
    // RansDecode writes every symbol, or fails and Dequantise reads none: no zeroing first.
    for (CodedStream* c : {&coded_, &fine_}) c->symbols = std::make_unique_for_overwrite<uint8_t[]>(c->symbol_count);
    return Status::Ok();
  }

  // A transform or predicted segment's kept components, tables and step at `level` (1-based).
  void TransformLevel(Level level, CodedStream* c) const {
    const ProfileData& d = profile_->data();
    const size_t index = static_cast<size_t>(level - 1);
    const size_t slice = static_cast<size_t>(seg_.layer) * 2 + static_cast<size_t>(kv());
    const size_t first = d.Index(static_cast<int>(seg_.layer), kv(), 0);
    const ProfileTransformLevel& lvl = d.transform.levels[index];
    c->step = lvl.steps[slice];
    if (info_.scheme == QuantScheme::kPredicted) {
      const ProfilePredictionLevel& p = d.prediction.levels[index];
      c->models = p.bank.ChannelModels(first, p.kept[slice]);
    } else {
      c->models = lvl.bank.ChannelModels(first, lvl.kept[slice]);
    }
  }

  void ReleaseSymbols() {
    coded_.symbols.reset();
    fine_.symbols.reset();
  }

  // Parses the segments and decodes their rANS streams together (the vector kernels need several streams
  // of similar length to keep their gathers busy: the segments' fine streams, if any, go together after
  // the others); rans[i] is segment i's outcome.
  static Status DecodeSymbols(std::optional<SegmentDecoder>* segments, size_t n, Status* rans) {
    codec::RansDecodeJob jobs[codec::kRansMaxTogether];
    for (size_t i = 0; i < n; ++i) KVSTREAM_RETURN_IF_ERROR(segments[i]->ParseLossy());
    const bool fine = !segments[0]->info_.fine_rows.empty();
    for (CodedStream SegmentDecoder::*stream : {&SegmentDecoder::coded_, &SegmentDecoder::fine_}) {
      if (stream == &SegmentDecoder::fine_ && !fine) break;
      for (size_t i = 0; i < n; ++i) {
        SegmentDecoder& seg = *segments[i];
        CodedStream& c = seg.*stream;
        // The fine stream continues from the states the other one ends in (docs/format.md, "Fine rows").
        const bool first = stream == &SegmentDecoder::coded_;
        jobs[i] = {c.stream, c.stream_bytes, c.models.data(), c.models.size(), c.symbols.get(), c.symbol_count,
                   fine && !first ? &seg.handover_ : nullptr, fine && first ? &seg.handover_ : nullptr};
      }
      Status statuses[codec::kRansMaxTogether];
      codec::RansDecodeTogether(jobs, n, statuses);
      for (size_t i = 0; i < n; ++i) {
        if (stream == &SegmentDecoder::coded_ || (rans[i].ok() && !statuses[i].ok())) rans[i] = statuses[i];
      }
    }
    return Status::Ok();
  }

  void StoreSinkRows() const {
    const size_t n_c = static_cast<size_t>(channels());
    std::vector<float> row(n_c);
    for (int64_t t = 0; t < info_.sink_rows; ++t) {
      for (size_t c = 0; c < n_c; ++c) {
        uint16_t h;
        std::memcpy(&h, sink_values_ + 2 * (static_cast<size_t>(t) * n_c + c), 2);
        row[c] = HalfToFloat(h);
      }
      StoreRow(out_, seg_.layer, t, row.data());
    }
  }

  // Transform and predicted schemes: each stream's integer weights (CodedStream::weights: its rows x
  // WeightStride(its components); an escape's weight is 0), their escaped components into escaped_ (by
  // row, then component) and each row's scaled step into row_scales_.
  Status ComponentWeights() {
    const int64_t rows = tokens() - info_.sink_rows;
    row_scales_.assign(static_cast<size_t>(rows), codec::TransformStepScale(coded_.step));
    for (int64_t r : fine_.index) row_scales_[static_cast<size_t>(r)] = codec::TransformStepScale(fine_.step);
    for (CodedStream* c : {&coded_, &fine_}) {
      if (c->rows == 0) continue;
      const int64_t kept = static_cast<int64_t>(c->models.size());
      c->weights = std::make_unique_for_overwrite<int16_t[]>(static_cast<size_t>(c->rows * codec::WeightStride(kept)));
      uint32_t e = 0;
      KVSTREAM_RETURN_IF_ERROR(codec::SymbolWeights(c->symbols.get(), c->rows, kept, c->index.empty() ? nullptr : c->index.data(),
                                                    c->escape_count, c->weights.get(), &escaped_,
                                                    [&](float* weight) { return NextEscape(*c, &e, weight); }));
      KVSTREAM_RETURN_IF_ERROR(CheckEscapesUsed(*c, e));
    }
    if (!fine_.index.empty()) codec::SortEscapes(&escaped_);
    return Status::Ok();
  }

  // The weight classes (codec::SumWeightRows) of the coded rows: the level's rows, then any fine rows.
  int WeightClasses(codec::WeightRows classes[2]) const {
    int n = 0;
    for (const CodedStream* c : {&coded_, &fine_}) {
      if (c->rows != 0) classes[n++] = c->Weights();
    }
    return n;
  }

  // Given how the segment's rANS stream decoded, writes its rows: sinks as stored, the rest dequantised,
  // escapes patched in.
  Status Dequantise(const Status& rans) {
    if (!rans.ok()) return rans.WithContext(in_.what());
    const int64_t sinks = info_.sink_rows;
    const size_t n_c = static_cast<size_t>(channels());
    StoreSinkRows();
    if (transform_) return InverseTransform();
    std::vector<float> row(n_c);
    const codec::RowKernels& kernels = codec::RowKernelsForCpu();
    const bool dense_half = !cachegen_ && out_.dtype == DType::kF16 && out_.strides[2] == 1;
    uint32_t e = 0;
    for (int64_t t = sinks; t < tokens(); ++t) {
      const uint8_t* sym = coded_.symbols.get() + static_cast<size_t>(t - sinks) * n_c;
      const uint8_t* escape = coded_.escape_count != 0 ? codec::FindEscapeSymbol(sym, sym + n_c) : nullptr;
      if (dense_half && escape == nullptr) {
        uint16_t* dst = static_cast<uint16_t*>(out_.data) + seg_.layer * out_.strides[0] + t * out_.strides[1];
        kernels.dequant_channels_half(sym, mean_.data(), step_.data(), static_cast<int64_t>(n_c), dst);
        continue;
      }
      // Branch-free dequantisation (vectorisable), then the rare escapes patched in.
      if (cachegen_) {
        const float s = token_step_[t];
        for (size_t c = 0; c < n_c; ++c) row[c] = codec::DequantScaled(sym[c], s);
      } else {
        kernels.dequant_channels(sym, mean_.data(), step_.data(), static_cast<int64_t>(n_c), row.data());
      }
      for (; escape != nullptr; escape = codec::FindEscapeSymbol(escape + 1, sym + n_c)) {
        KVSTREAM_RETURN_IF_ERROR(NextEscape(coded_, &e, &row[escape - sym]));
      }
      StoreRow(out_, seg_.layer, t, row.data());
    }
    return CheckEscapesUsed(coded_, e);
  }

  // The value of escape symbol number *e (in symbol order) of stream c, advancing *e; CorruptData when the
  // stream has more escape symbols than escape values.
  Status NextEscape(const CodedStream& c, uint32_t* e, float* value) const {
    if (*e == c.escape_count) {
      return Status::CorruptData(in_.what() + ": more escape symbols than the " + std::to_string(c.escape_count) +
                                 (&c == &fine_ ? " fine" : "") + " escape values");
    }
    uint16_t h;
    std::memcpy(&h, c.escapes + 2 * (*e)++, 2);
    *value = HalfToFloat(h);
    return Status::Ok();
  }
  Status CheckEscapesUsed(const CodedStream& c, uint32_t e) const {
    if (e == c.escape_count) return Status::Ok();
    return Status::CorruptData(in_.what() + ": " + (&c == &fine_ ? "fine " : "") + "escape count = " +
                               std::to_string(c.escape_count) + " but the stream has " + std::to_string(e) + " escape symbols");
  }

  // Transform scheme, after the sink rows: the integer sums of the weights against the basis, the mean
  // and step, the escaped components added in order, then RoPE for keys (quantizer.h and
  // key_rotation.h define each step).
  Status InverseTransform() {
    KVSTREAM_RETURN_IF_ERROR(ComponentWeights());
    const int64_t sinks = info_.sink_rows;
    const int64_t rows = tokens() - sinks;
    const ProfileData& d = profile_->data();
    const int layer = static_cast<int>(seg_.layer);
    const int64_t n_c = channels();
    const int16_t* basis = d.Basis(layer, kv());
    // SumComponents writes every sum: no zeroing first (it cost 4 % of the decode).
    const auto acc = std::make_unique_for_overwrite<int32_t[]>(static_cast<size_t>(rows * n_c));
    const auto sums = std::make_unique_for_overwrite<const int32_t*[]>(static_cast<size_t>(rows));
    codec::WeightRows classes[2];
    const int class_count = WeightClasses(classes);
    codec::SumWeightRows(classes, class_count, 0, rows, basis, n_c, d.PackedBasis(layer, kv()), acc.get(), sums.get());
    const float* mean = d.transform.means.data() + d.Index(layer, kv(), 0);
    std::vector<float> y(static_cast<size_t>(n_c));
    const codec::RowKernels& kernels = codec::RowKernelsForCpu();
    size_t next = 0;
    for (int64_t t = 0; t < rows; ++t) {
      const size_t first = next;
      while (next < escaped_.size() && escaped_[next].row == t) ++next;
      codec::DequantTransformRow(kernels, sums[t], mean, row_scales_[static_cast<size_t>(t)],
                                 escaped_.data() + first, next - first, basis, n_c, y.data());
      if (kv() == 0) rope_->Rotate(y.data(), sinks + t, static_cast<int>(n_c));
      StoreRow(out_, seg_.layer, sinks + t, y.data());
    }
    return Status::Ok();
  }

  const ChunkInfo& info_;
  const Profile* profile_;
  const SegmentInfo& seg_;
  const TensorView& out_;
  const codec::RopeTable* rope_;
  ByteReader in_;
  // A lossy segment between ParseLossy and Dequantise.
  bool cachegen_ = false;
  bool transform_ = false;
  std::vector<float> mean_, step_;  // channel-uniform: per channel
  std::vector<float> token_step_;   // cachegen-token: per token
  codec::TableBank own_bank_;
  const uint8_t* sink_values_ = nullptr;
  CodedStream coded_, fine_;
  codec::RansLanes handover_{};  // with fine rows: where coded_'s stream ends and fine_'s starts (0: it failed)
  // Transform and predicted: the coded rows' escaped components and scaled steps (ComponentWeights).
  std::vector<float> row_scales_;
  std::vector<codec::EscapedComponent> escaped_;
};

}  // namespace

Status DecodeChunk(const uint8_t* data, size_t size, const DecodeOptions& options, const TensorView& keys_out,
                   const TensorView& values_out) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, codec::ReadContainer(data, size, options.limits, /*verify_segments=*/false));
  if (info.level == kLevelText) {
    return Status::InvalidArgument("decode: a text-level chunk holds token ids, not KV; recompute them with the model");
  }
  KVSTREAM_RETURN_IF_ERROR(CheckDestination(keys_out, "keys_out", info));
  KVSTREAM_RETURN_IF_ERROR(CheckDestination(values_out, "values_out", info));
  KVSTREAM_RETURN_IF_ERROR(CheckProfile(info, options.profile));
  if (IsLossyLevel(info.level)) {
    std::optional<codec::RopeTable> rope;  // the chunk's positions, shared by its key segments
    const bool predicted = info.scheme == QuantScheme::kPredicted;
    if ((info.scheme == QuantScheme::kTransform || predicted) && options.profile->Supports(QuantScheme::kTransform)) {
      rope.emplace(options.profile->data().transform.rope, info.token_begin, info.tokens);
    }
    // Segment 2l holds layer l's keys and 2l + 1 its values (the container reader checked the order). A
    // task takes whole layers: as many segments as the rANS kernel decodes together, one layer at least.
    const size_t segments = info.segments.size();
    const size_t per_task = std::max<size_t>(2, codec::RansStreamsDecodedTogether());
    // A predicted chunk's decoders outlive the first pass, which only prepares their rows.
    std::vector<std::optional<SegmentDecoder>> kept(predicted ? segments : 0);
    KVSTREAM_RETURN_IF_ERROR(codec::RunParallel((segments + per_task - 1) / per_task, options.threads, options.parallel_for,
                                                WithFencedStores([&](size_t task) -> Status {
      std::optional<SegmentDecoder> local[codec::kRansMaxTogether];
      const size_t first = task * per_task;
      const size_t n = std::min(per_task, segments - first);
      std::optional<SegmentDecoder>* decoders = predicted ? kept.data() + first : local;
      for (size_t i = 0; i < n; ++i) {
        const SegmentInfo& seg = info.segments[first + i];
        KVSTREAM_RETURN_IF_ERROR(codec::VerifySegment(data, seg));
        const bool keys = seg.tensor == SegmentTensor::kKeys;
        decoders[i].emplace(data, info, options.profile, seg, keys ? keys_out : values_out,
                            keys && rope ? &*rope : nullptr);
      }
      return predicted ? SegmentDecoder::PrepareLossy(decoders, n) : SegmentDecoder::RunLossy(decoders, n);
    })));
    if (!predicted) return Status::Ok();
    // Positions are independent: blocks of rows go through every layer in order, in parallel.
    const int64_t rows = info.tokens - info.sink_rows;
    const int64_t blocks = (rows + codec::kPredictedRowBlock - 1) / codec::kPredictedRowBlock;
    return codec::RunParallel(static_cast<size_t>(blocks), options.threads, options.parallel_for,
                              WithFencedStores([&](size_t b) -> Status {
      const int64_t first = static_cast<int64_t>(b) * codec::kPredictedRowBlock;
      SegmentDecoder::ReconstructPredicted(kept.data(), segments, options.profile->data(), first,
                                           std::min(codec::kPredictedRowBlock, rows - first));
      return Status::Ok();
    }));
  }
  return codec::RunParallel(info.segments.size(), options.threads, options.parallel_for,
                            WithFencedStores([&](size_t i) -> Status {
    const SegmentInfo& seg = info.segments[i];
    KVSTREAM_RETURN_IF_ERROR(codec::VerifySegment(data, seg));
    const TensorView& out = seg.tensor == SegmentTensor::kKeys ? keys_out : values_out;
    return SegmentDecoder(data, info, options.profile, seg, out).RunPassthrough();
  }));
}

Result<std::vector<int32_t>> DecodeChunkTokens(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, codec::ReadContainer(data, size, limits, /*verify_segments=*/true));
  if (info.level != kLevelText) {
    return Status::InvalidArgument("decode: chunk is level " + LevelName(info.level) + ", not text; it holds no token ids");
  }
  const SegmentInfo& seg = info.segments[0];
  if (seg.size != uint64_t{4} * info.tokens) {
    return Status::CorruptData(codec::SegmentName(seg) + ": size = " + std::to_string(seg.size) + ", " +
                               std::to_string(info.tokens) + " token ids need " + std::to_string(4 * info.tokens));
  }
  std::vector<int32_t> ids(static_cast<size_t>(info.tokens));
  for (size_t t = 0; t < ids.size(); ++t) {
    uint32_t id;
    std::memcpy(&id, data + seg.offset + 4 * t, 4);
    if (id > static_cast<uint32_t>(INT32_MAX)) {
      return Status::CorruptData(codec::SegmentName(seg) + ": token id " + std::to_string(t) + " = " + std::to_string(id) +
                                 " exceeds 2^31 - 1");
    }
    ids[t] = static_cast<int32_t>(id);
  }
  return ids;
}

}  // namespace kvstream
