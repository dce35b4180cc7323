// LossySegment: the frame of a lossy segment (lossy_segment.h; docs/format.md, "Lossy levels").
#include "codec/decompress/lossy_segment.h"

#include <cstring>
#include <string>
#include <vector>

#include "codec/decompress/store_rows.h"
#include "common/half.h"

namespace kvstream::codec {

Status LossySegment::ReadCounts() {
  const bool fine = !info_.fine_rows.empty();  // the container reader allows them in transform chunks only
  KVSTREAM_RETURN_IF_ERROR(in_.U32(&coded_.stream_bytes, "stream bytes"));
  KVSTREAM_RETURN_IF_ERROR(in_.U32(&coded_.escape_count, "escape count"));
  if (fine) {
    KVSTREAM_RETURN_IF_ERROR(in_.U32(&fine_.stream_bytes, "fine stream bytes"));
    KVSTREAM_RETURN_IF_ERROR(in_.U32(&fine_.escape_count, "fine escape count"));
  }
  const int64_t sinks = info_.sink_rows;  // validated by the container reader: <= tokens
  coded_.rows = tokens() - sinks;
  if (fine) {
    // Coded row r is token sinks + r; the map never marks a sink row.
    for (int64_t r = 0; r < coded_.rows; ++r) {
      (info_.fine_rows[static_cast<size_t>(sinks + r)] ? fine_ : coded_).index.push_back(r);
    }
    coded_.rows = static_cast<int64_t>(coded_.index.size());
    fine_.rows = static_cast<int64_t>(fine_.index.size());
  }
  return Status::Ok();
}

Status LossySegment::CountSymbols(size_t row_symbols, size_t fine_row_symbols) {
  coded_.symbol_count = static_cast<size_t>(coded_.rows) * row_symbols;
  fine_.symbol_count = static_cast<size_t>(fine_.rows) * fine_row_symbols;
  for (const CodedStream* c : {&coded_, &fine_}) {
    if (c->escape_count > c->symbol_count) {
      return Status::CorruptData(what() + ": " + (c == &fine_ ? "fine " : "") + "escape count = " +
                                 std::to_string(c->escape_count) + " exceeds its " + std::to_string(c->symbol_count) +
                                 " coded values");
    }
  }
  return Status::Ok();
}

Status LossySegment::ReadSinkRows() {
  return in_.Span(size_t{2} * static_cast<size_t>(info_.sink_rows) * static_cast<size_t>(channels()), &sink_values_,
                  "sink rows");
}

Status LossySegment::ReadStreams() {
  KVSTREAM_RETURN_IF_ERROR(in_.Span(coded_.stream_bytes, &coded_.stream, "rANS stream"));
  KVSTREAM_RETURN_IF_ERROR(in_.Span(size_t{2} * coded_.escape_count, &coded_.escapes, "escape values"));
  if (!info_.fine_rows.empty()) {
    KVSTREAM_RETURN_IF_ERROR(in_.Span(fine_.stream_bytes, &fine_.stream, "fine rANS stream"));
    KVSTREAM_RETURN_IF_ERROR(in_.Span(size_t{2} * fine_.escape_count, &fine_.escapes, "fine escape values"));
  }
  if (in_.remaining() != 0) {
    return Status::CorruptData(what() + ": " + std::to_string(in_.remaining()) + " bytes left over after the escapes");
  }
  // RansDecode writes every symbol, or fails and nothing reads them: no zeroing first.
  for (CodedStream* c : {&coded_, &fine_}) c->symbols = std::make_unique_for_overwrite<uint8_t[]>(c->symbol_count);
  return Status::Ok();
}

void LossySegment::DecodeStreamsTogether(LossySegment* const* segments, size_t n, Status* rans) {
  RansDecodeJob jobs[kRansMaxTogether];
  const bool fine = !segments[0]->info_.fine_rows.empty();
  for (CodedStream LossySegment::*stream : {&LossySegment::coded_, &LossySegment::fine_}) {
    if (stream == &LossySegment::fine_ && !fine) break;
    const bool first = stream == &LossySegment::coded_;
    for (size_t i = 0; i < n; ++i) {
      LossySegment& seg = *segments[i];
      CodedStream& c = seg.*stream;
      // The fine stream continues from the states the other one ends in (docs/format.md, "Fine rows").
      jobs[i] = {c.stream, c.stream_bytes, c.models.data(), c.models.size(), c.symbols.get(), c.symbol_count,
                 fine && !first ? &seg.handover_ : nullptr, fine && first ? &seg.handover_ : nullptr};
    }
    Status statuses[kRansMaxTogether];
    RansDecodeTogether(jobs, n, statuses);
    for (size_t i = 0; i < n; ++i) {
      if (first || (rans[i].ok() && !statuses[i].ok())) rans[i] = statuses[i];
    }
  }
}

void LossySegment::StoreSinkRows() const {
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

Status LossySegment::NextEscape(const CodedStream& c, uint32_t* e, float* value) const {
  if (*e == c.escape_count) {
    return Status::CorruptData(what() + ": more escape symbols than the " + std::to_string(c.escape_count) +
                               (&c == &fine_ ? " fine" : "") + " escape values");
  }
  uint16_t h;
  std::memcpy(&h, c.escapes + 2 * (*e)++, 2);
  *value = HalfToFloat(h);
  return Status::Ok();
}

Status LossySegment::CheckEscapesUsed(const CodedStream& c, uint32_t e) const {
  if (e == c.escape_count) return Status::Ok();
  return Status::CorruptData(what() + ": " + (&c == &fine_ ? "fine " : "") + "escape count = " +
                             std::to_string(c.escape_count) + " but the stream has " + std::to_string(e) + " escape symbols");
}

void LossySegment::ReleaseSymbols() {
  coded_.symbols.reset();
  fine_.symbols.reset();
}

}  // namespace kvstream::codec
