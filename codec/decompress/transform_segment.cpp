// Scheme 3, transform (docs/format.md, "Scheme 3"): the kept components' weights coded against the
// profile's tables, summed against the (layer, K/V)'s basis as integers, then the mean and step, the
// escaped components added in order and RoPE for keys. ComponentSegment's frame and weights serve the
// predicted scheme too.
#include "codec/decompress/transform_segment.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codec/common/profile_data.h"
#include "codec/common/row_kernels.h"
#include "codec/common/transform_sum.h"
#include "codec/decompress/segment_decoders.h"
#include "codec/decompress/store_rows.h"

namespace kvstream::codec {

Status ComponentSegment::Parse() {
  KVSTREAM_RETURN_IF_ERROR(ReadCounts());
  if (!profile_.Supports(info_.scheme)) {
    return Status::CorruptData(what() + ": a " + SchemeName(info_.scheme) + " chunk, but its profile has no " +
                               (info_.scheme == QuantScheme::kPredicted ? "prediction" : "transform"));
  }
  SetLevel(info_.level, &coded_);
  if (!info_.fine_rows.empty()) SetLevel(info_.fine_level, &fine_);
  KVSTREAM_RETURN_IF_ERROR(CountSymbols(coded_.models.size(), fine_.models.size()));
  KVSTREAM_RETURN_IF_ERROR(ReadSinkRows());
  return ReadStreams();
}

Status ComponentSegment::ComponentWeights() {
  const int64_t rows = tokens() - info_.sink_rows;
  row_scales_.assign(static_cast<size_t>(rows), TransformStepScale(coded_.step));
  for (int64_t r : fine_.index) row_scales_[static_cast<size_t>(r)] = TransformStepScale(fine_.step);
  for (CodedStream* c : {&coded_, &fine_}) {
    if (c->rows == 0) continue;
    const int64_t kept = static_cast<int64_t>(c->models.size());
    c->weights = std::make_unique_for_overwrite<int16_t[]>(static_cast<size_t>(c->rows * WeightStride(kept)));
    uint32_t e = 0;
    KVSTREAM_RETURN_IF_ERROR(SymbolWeights(c->symbols.get(), c->rows, kept, c->index.empty() ? nullptr : c->index.data(),
                                           c->escape_count, c->weights.get(), &escaped_,
                                           [&](float* weight) { return NextEscape(*c, &e, weight); }));
    KVSTREAM_RETURN_IF_ERROR(CheckEscapesUsed(*c, e));
  }
  if (!fine_.index.empty()) SortEscapes(&escaped_);
  return Status::Ok();
}

int ComponentSegment::WeightClasses(WeightRows classes[2]) const {
  int n = 0;
  for (const CodedStream* c : {&coded_, &fine_}) {
    if (c->rows != 0) classes[n++] = c->Weights();
  }
  return n;
}

namespace {

class TransformSegment final : public ComponentSegment {
 public:
  using ComponentSegment::ComponentSegment;

  // Given how the segment's rANS streams decoded, writes its rows: sinks as stored, then each coded row
  // from the integer sums of its weights against the basis, the mean and step, the escaped components
  // added in order, then RoPE for keys.
  Status Reconstruct(const Status& rans) {
    if (!rans.ok()) return rans.WithContext(what());
    StoreSinkRows();
    KVSTREAM_RETURN_IF_ERROR(ComponentWeights());
    const int64_t sinks = info_.sink_rows;
    const int64_t rows = tokens() - sinks;
    const ProfileData& d = DataOf(profile_);
    const int layer = static_cast<int>(seg_.layer);
    const int64_t n_c = channels();
    const int16_t* basis = d.Basis(layer, kv());
    // SumComponents writes every sum: no zeroing first (it cost 4 % of the decode).
    const auto acc = std::make_unique_for_overwrite<int32_t[]>(static_cast<size_t>(rows * n_c));
    const auto sums = std::make_unique_for_overwrite<const int32_t*[]>(static_cast<size_t>(rows));
    WeightRows classes[2];
    const int class_count = WeightClasses(classes);
    SumWeightRows(classes, class_count, 0, rows, basis, n_c, d.PackedBasis(layer, kv()), acc.get(), sums.get());
    const float* mean = d.transform.means.data() + d.Index(layer, kv(), 0);
    std::vector<float> y(static_cast<size_t>(n_c));
    const RowKernels& kernels = RowKernelsForCpu();
    size_t next = 0;
    for (int64_t t = 0; t < rows; ++t) {
      const size_t first = next;
      while (next < escaped_.size() && escaped_[next].row == t) ++next;
      DequantTransformRow(kernels, sums[t], mean, row_scales_[static_cast<size_t>(t)], escaped_.data() + first,
                          next - first, basis, n_c, y.data());
      if (kv() == 0) rope_->Rotate(y.data(), sinks + t, static_cast<int>(n_c));
      StoreRow(out_, seg_.layer, sinks + t, y.data());
    }
    return Status::Ok();
  }

 private:
  // From the profile's transform section.
  void SetLevel(Level level, CodedStream* c) const override {
    const ProfileData& d = DataOf(profile_);
    const ProfileTransformLevel& lvl = d.transform.levels[static_cast<size_t>(level - 1)];
    const size_t slice = static_cast<size_t>(seg_.layer) * 2 + static_cast<size_t>(kv());
    c->step = lvl.steps[slice];
    c->models = lvl.bank.ChannelModels(d.Index(static_cast<int>(seg_.layer), kv(), 0), lvl.kept[slice]);
  }
};

}  // namespace

Status DecodeTransformSegments(const LossySegments& g) {
  std::optional<TransformSegment> segments[kRansMaxTogether];
  return LossySegment::DecodeGroup(
      g.count,
      [&](size_t i) -> TransformSegment& {
        const SegmentInfo& seg = g.info.segments[g.first + i];
        const bool keys = seg.tensor == SegmentTensor::kKeys;
        return segments[i].emplace(g.chunk, g.info, *g.profile, seg, keys ? g.keys_out : g.values_out,
                                   keys ? g.rope : nullptr);
      },
      [&](size_t i, const Status& rans) { return segments[i]->Reconstruct(rans); });
}

}  // namespace kvstream::codec
