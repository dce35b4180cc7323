// Scheme 1, channel-uniform (docs/format.md, "Scheme 1"): the segment's mean and step of each channel,
// carried in the chunk or taken from the profile, then every coded value reconstructed as mean + q x step.
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "codec/common/row_kernels.h"
#include "codec/common/table_bank.h"
#include "codec/decompress/lossy_segment.h"
#include "codec/decompress/segment_decoders.h"
#include "codec/decompress/store_rows.h"
#include "common/half.h"

namespace kvstream::codec {
namespace {

class ChannelUniformSegment : public LossySegment {
 public:
  ChannelUniformSegment(const uint8_t* chunk, const ChunkInfo& info, const Profile* profile, const SegmentInfo& seg,
                        const TensorView& out)
      : LossySegment(chunk, info, seg, out), profile_(profile) {}

  // Reads the frame, the parameters and the tables (the chunk's, or with the profile's), and locates the
  // rANS stream and escapes.
  Status Parse() {
    const size_t n_c = static_cast<size_t>(channels());
    KVSTREAM_RETURN_IF_ERROR(ReadCounts());
    KVSTREAM_RETURN_IF_ERROR(CountSymbols(n_c, 0));
    KVSTREAM_RETURN_IF_ERROR(ReadSinkRows());
    mean_.assign(n_c, 0.0f);
    step_.assign(n_c, 0.0f);
    if (info_.in_chunk_tables) {
      float s = 0;
      KVSTREAM_RETURN_IF_ERROR(in_.F32(&s, "step"));
      if (!std::isfinite(s) || !(s > 0.0f)) {
        return Status::CorruptData(what() + ": step = " + std::to_string(s) + " is not a finite positive number");
      }
      const uint8_t* means = nullptr;
      KVSTREAM_RETURN_IF_ERROR(in_.Span(2 * n_c, &means, "channel means"));
      for (size_t c = 0; c < n_c; ++c) {
        uint16_t m;
        std::memcpy(&m, means + 2 * c, 2);
        mean_[c] = HalfToFloat(m);
        if (!std::isfinite(mean_[c])) {
          return Status::CorruptData(what() + ": mean of channel " + std::to_string(c) + " is not finite");
        }
        step_[c] = s;
      }
      KVSTREAM_RETURN_IF_ERROR(ReadTableBank(in_, n_c, &own_bank_));
      coded_.models = own_bank_.ChannelModels(0, n_c);
    } else {
      const ProfileData& d = DataOf(*profile_);
      const ProfileLevelData& lvl = d.levels[static_cast<size_t>(info_.level - 1)];
      const size_t first = d.Index(static_cast<int>(seg_.layer), kv(), 0);
      for (size_t c = 0; c < n_c; ++c) {
        mean_[c] = d.means[first + c];
        step_[c] = lvl.steps[first + c];
      }
      coded_.models = lvl.bank.ChannelModels(first, n_c);
    }
    return ReadStreams();
  }

  // Given how the segment's rANS stream decoded, writes its rows: sinks as stored, the rest dequantised,
  // escapes patched in.
  Status Dequantise(const Status& rans) {
    if (!rans.ok()) return rans.WithContext(what());
    StoreSinkRows();
    const int64_t sinks = info_.sink_rows;
    const size_t n_c = static_cast<size_t>(channels());
    std::vector<float> row(n_c);
    const RowKernels& kernels = RowKernelsForCpu();
    const bool dense_half = out_.dtype == DType::kF16 && out_.strides[2] == 1;
    uint32_t e = 0;
    for (int64_t t = sinks; t < tokens(); ++t) {
      const uint8_t* sym = coded_.symbols.get() + static_cast<size_t>(t - sinks) * n_c;
      const uint8_t* escape = coded_.escape_count != 0 ? FindEscapeSymbol(sym, sym + n_c) : nullptr;
      if (dense_half && escape == nullptr) {
        uint16_t* dst = static_cast<uint16_t*>(out_.data) + seg_.layer * out_.strides[0] + t * out_.strides[1];
        kernels.dequant_channels_half(sym, mean_.data(), step_.data(), static_cast<int64_t>(n_c), dst);
        continue;
      }
      // Branch-free dequantisation (vectorisable), then the rare escapes patched in.
      kernels.dequant_channels(sym, mean_.data(), step_.data(), static_cast<int64_t>(n_c), row.data());
      for (; escape != nullptr; escape = FindEscapeSymbol(escape + 1, sym + n_c)) {
        KVSTREAM_RETURN_IF_ERROR(NextEscape(coded_, &e, &row[escape - sym]));
      }
      StoreRow(out_, seg_.layer, t, row.data());
    }
    return CheckEscapesUsed(coded_, e);
  }

 private:
  const Profile* profile_;      // without in-chunk tables
  std::vector<float> mean_, step_;  // per channel
  TableBank own_bank_;          // with in-chunk tables
};

}  // namespace

Status DecodeChannelUniformSegments(const LossySegments& g) {
  std::optional<ChannelUniformSegment> segments[kRansMaxTogether];
  return LossySegment::DecodeGroup(
      g.count,
      [&](size_t i) -> ChannelUniformSegment& {
        const SegmentInfo& seg = g.info.segments[g.first + i];
        return segments[i].emplace(g.chunk, g.info, g.profile, seg,
                                   seg.tensor == SegmentTensor::kKeys ? g.keys_out : g.values_out);
      },
      [&](size_t i, const Status& rans) { return segments[i]->Dequantise(rans); });
}

}  // namespace kvstream::codec
