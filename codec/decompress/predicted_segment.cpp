// Scheme 4, predicted (docs/format.md, "Scheme 4"): scheme 3 on the residual of a linear prediction from
// the slices decoded before. Each segment's weights are decoded as scheme 3's, with the prediction
// section's kept components and tables; then blocks of positions go through the slices in order, each row
// predicted from its input slices' rows at the same positions and its residual added (PredictedRows).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "codec/common/predicted_rows.h"
#include "codec/common/profile_data.h"
#include "codec/decompress/segment_decoders.h"
#include "codec/decompress/store_rows.h"
#include "codec/decompress/transform_segment.h"

namespace kvstream::codec {

class PredictedSegment final : public ComponentSegment {
 public:
  using ComponentSegment::ComponentSegment;

  // Given how the segment's rANS streams decoded, writes the sink rows, which take no part in the
  // prediction, and lays out the coded rows' integer weights and escapes for ReconstructRows.
  Status Prepare(const Status& rans) {
    if (!rans.ok()) return rans.WithContext(what());
    StoreSinkRows();
    KVSTREAM_RETURN_IF_ERROR(ComponentWeights());
    ReleaseSymbols();
    return Status::Ok();
  }

  // Coded rows [first, first + rows) of this segment, slice `slice`, once the slices before it hold the
  // same rows in `ring`: the prediction from its input slices, the residual's sums and escapes on top
  // (into y, rows x channels), its integer rows into the ring for the slices after it, then RoPE for keys
  // and the rows stored. `escapes`: scratch.
  void ReconstructRows(int slice, int64_t first, int64_t rows, PredictedRows* predicted, PredictorRing* ring, float* y,
                       std::vector<EscapedComponent>* escapes) const {
    const int64_t n_c = channels();
    const int16_t* inputs[3];
    ring->Inputs(slice, inputs);
    predicted->Predict(slice, inputs, rows);
    escapes->clear();
    auto it = std::lower_bound(escaped_.begin(), escaped_.end(), first,
                               [](const EscapedComponent& e, int64_t row) { return e.row < row; });
    for (; it != escaped_.end() && it->row < first + rows; ++it) {
      escapes->push_back({it->row - first, it->component, it->weight});
    }
    WeightRows classes[2];
    const int class_count = WeightClasses(classes);
    predicted->Reconstruct(slice, row_scales_.data() + first, classes, class_count, first, rows, escapes->data(),
                           escapes->size(), y, ring->Rows(slice));
    const int64_t sinks = info_.sink_rows;
    for (int64_t r = 0; r < rows; ++r) {
      float* row = y + r * n_c;
      const int64_t t = sinks + first + r;
      if (kv() == 0) rope_->Rotate(row, t, static_cast<int>(n_c));
      StoreRow(out_, seg_.layer, t, row);
    }
  }

 private:
  // The kept components and tables from the profile's prediction section, the step from its transform
  // section.
  void SetLevel(Level level, CodedStream* c) const override {
    const ProfileData& d = DataOf(profile_);
    const size_t index = static_cast<size_t>(level - 1);
    const size_t slice = static_cast<size_t>(seg_.layer) * 2 + static_cast<size_t>(kv());
    const ProfilePredictionLevel& p = d.prediction.levels[index];
    c->step = d.transform.levels[index].steps[slice];
    c->models = p.bank.ChannelModels(d.Index(static_cast<int>(seg_.layer), kv(), 0), p.kept[slice]);
  }
};

PredictedChunk::PredictedChunk(const Profile& profile, size_t segments)
    : profile_(profile), segments_(segments) {}

PredictedChunk::~PredictedChunk() = default;

Status PredictedChunk::Prepare(const LossySegments& g) {
  return LossySegment::DecodeGroup(
      g.count,
      [&](size_t i) -> PredictedSegment& {
        const SegmentInfo& seg = g.info.segments[g.first + i];
        const bool keys = seg.tensor == SegmentTensor::kKeys;
        segments_[g.first + i] = std::make_unique<PredictedSegment>(
            g.chunk, g.info, profile_, seg, keys ? g.keys_out : g.values_out, keys ? g.rope : nullptr);
        return *segments_[g.first + i];
      },
      [&](size_t i, const Status& rans) { return segments_[g.first + i]->Prepare(rans); });
}

void PredictedChunk::Reconstruct(int64_t first, int64_t rows) const {
  const ProfileData& d = DataOf(profile_);
  PredictedRows predicted(d);
  PredictorRing ring(rows, d.channels);
  const auto y = std::make_unique_for_overwrite<float[]>(static_cast<size_t>(rows * d.channels));
  std::vector<EscapedComponent> escapes;
  for (size_t slice = 0; slice < segments_.size(); ++slice) {
    segments_[slice]->ReconstructRows(static_cast<int>(slice), first, rows, &predicted, &ring, y.get(), &escapes);
  }
}

}  // namespace kvstream::codec
