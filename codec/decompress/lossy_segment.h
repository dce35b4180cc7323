// The frame every lossy segment shares (docs/format.md, "Lossy levels"): stream and escape counts, the
// fine-row streams, the sink rows, the rANS streams and their escapes. Each scheme's decoder
// (channel_uniform_segment.cpp, transform_segment.cpp, predicted_segment.cpp) derives from LossySegment and
// reads its own parameters and tables between the sink rows and the streams.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/common/container_format.h"
#include "codec/common/predicted_rows.h"
#include "codec/common/rans.h"
#include "codec/decompress/container_reader.h"
#include "kvstream/codec.h"

namespace kvstream::codec {

// A rANS stream of coded rows and its escapes: all coded rows, or with fine rows those at the chunk's
// level (LossySegment::coded_) and those at its fine level (LossySegment::fine_).
struct CodedStream {
  const uint8_t* stream = nullptr;
  uint32_t stream_bytes = 0;
  const uint8_t* escapes = nullptr;
  uint32_t escape_count = 0;
  std::vector<const RansModel*> models;  // one per symbol of a row
  float step = 0.0f;                     // transform and predicted: the (layer, K/V)'s step
  int64_t rows = 0;
  std::vector<int64_t> index;            // with fine rows: the stream's rows among the coded rows
  std::unique_ptr<uint8_t[]> symbols;
  size_t symbol_count = 0;
  std::unique_ptr<int16_t[]> weights;    // transform and predicted: ComponentSegment::ComponentWeights'

  WeightRows Weights() const {
    return {weights.get(), static_cast<int64_t>(models.size()), rows, index.empty() ? nullptr : index.data()};
  }
};

class LossySegment {
 public:
  // `chunk` holds the segment `seg` of the chunk `info` describes (both validated by the container reader);
  // the segment decodes into `out`.
  LossySegment(const uint8_t* chunk, const ChunkInfo& info, const SegmentInfo& seg, const TensorView& out)
      : info_(info), seg_(seg), out_(out), in_(chunk + seg.offset, seg.size, SegmentName(seg)) {}

  // Decodes the rANS streams of n <= kRansMaxTogether parsed segments together (the vector kernels need
  // several streams of similar length to keep their gathers busy: the segments' fine streams, if any, go
  // together after the others); rans[i] is segment i's outcome.
  static void DecodeStreamsTogether(LossySegment* const* segments, size_t n, Status* rans);

  // A group of n <= kRansMaxTogether segments of one scheme: segment_at(i) constructs segment i and returns
  // it (a LossySegment subclass with Parse()); each is parsed, their streams decoded together, then
  // finish(i, rans outcome of segment i) writes it. Returns the first error, in that order.
  template <typename SegmentAt, typename Finish>
  static Status DecodeGroup(size_t n, SegmentAt segment_at, Finish finish) {
    LossySegment* frames[kRansMaxTogether];
    for (size_t i = 0; i < n; ++i) {
      auto& segment = segment_at(i);
      KVSTREAM_RETURN_IF_ERROR(segment.Parse());
      frames[i] = &segment;
    }
    Status rans[kRansMaxTogether];
    DecodeStreamsTogether(frames, n, rans);
    for (size_t i = 0; i < n; ++i) KVSTREAM_RETURN_IF_ERROR(finish(i, rans[i]));
    return Status::Ok();
  }

 protected:
  int64_t tokens() const { return info_.tokens; }
  int64_t channels() const { return info_.channels; }
  int kv() const { return seg_.tensor == SegmentTensor::kValues ? 1 : 0; }
  const std::string& what() const { return in_.what(); }

  // The frame's reads, in their order in the segment; a scheme's parameters and tables come between
  // ReadSinkRows and ReadStreams.
  // The stream and escape counts (and the fine stream's), and which coded rows each stream holds.
  Status ReadCounts();
  // Sets each stream's symbol count from its symbols per row (a value per channel, or a weight per kept
  // component) and checks its escape count against it.
  Status CountSymbols(size_t row_symbols, size_t fine_row_symbols);
  Status ReadSinkRows();
  // Locates the streams and their escapes, which end the segment, and allocates the symbols they decode to.
  Status ReadStreams();

  // Writes the sink rows as stored.
  void StoreSinkRows() const;
  // The value of escape symbol number *e (in symbol order) of stream c, advancing *e; CorruptData when the
  // stream has more escape symbols than escape values.
  Status NextEscape(const CodedStream& c, uint32_t* e, float* value) const;
  // CorruptData unless stream c's e escape symbols used all its escape values.
  Status CheckEscapesUsed(const CodedStream& c, uint32_t e) const;
  void ReleaseSymbols();

  const ChunkInfo& info_;
  const SegmentInfo& seg_;
  const TensorView& out_;
  ByteReader in_;
  const uint8_t* sink_values_ = nullptr;
  CodedStream coded_, fine_;

 private:
  RansLanes handover_{};  // with fine rows: where coded_'s stream ends and fine_'s starts (0: it failed)
};

}  // namespace kvstream::codec
