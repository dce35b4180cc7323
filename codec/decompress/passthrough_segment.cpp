// Levels fp16 and int8 (docs/format.md, "Segment payloads"): values stored as they are, or as int8 with a
// scale per token; no entropy coding.
#include <cstring>
#include <string>
#include <vector>

#include "codec/decompress/container_reader.h"
#include "codec/decompress/segment_decoders.h"
#include "codec/decompress/store_rows.h"
#include "common/half.h"
#include "common/half_rows.h"
#include "common/int8_row.h"

namespace kvstream::codec {
namespace {

Status ExpectSize(const ChunkInfo& info, const SegmentInfo& seg, uint64_t want) {
  if (seg.size != want) {
    return Status::CorruptData(SegmentName(seg) + ": size = " + std::to_string(seg.size) + ", level " +
                               LevelName(info.level) + " needs " + std::to_string(want));
  }
  return Status::Ok();
}

Status DecodeFp16(const uint8_t* p, const ChunkInfo& info, const SegmentInfo& seg, const TensorView& out) {
  const int64_t tokens = info.tokens, channels = info.channels;
  KVSTREAM_RETURN_IF_ERROR(ExpectSize(info, seg, uint64_t{2} * static_cast<uint64_t>(tokens * channels)));
  const size_t row_bytes = 2 * static_cast<size_t>(channels);
  if (out.dtype == info.stored_dtype && out.strides[2] == 1) {
    // The stored dtype into dense rows: a copy (bit-exact, NaN payloads included).
    uint16_t* base = static_cast<uint16_t*>(out.data) + seg.layer * out.strides[0];
    for (int64_t t = 0; t < tokens; ++t) std::memcpy(base + t * out.strides[1], p + t * row_bytes, row_bytes);
    return Status::Ok();
  }
  std::vector<uint16_t> stored(static_cast<size_t>(channels));
  std::vector<float> row(static_cast<size_t>(channels));
  for (int64_t t = 0; t < tokens; ++t) {
    std::memcpy(stored.data(), p + t * row_bytes, row_bytes);
    if (info.stored_dtype == DType::kBF16) {
      for (int64_t c = 0; c < channels; ++c) row[c] = BFloat16ToFloat(stored[c]);
    } else {
      HalfRowToFloat(stored.data(), row.data(), channels);
    }
    StoreRow(out, seg.layer, t, row.data());
  }
  return Status::Ok();
}

Status DecodeInt8(const uint8_t* scales, const ChunkInfo& info, const SegmentInfo& seg, const TensorView& out) {
  const int64_t tokens = info.tokens, channels = info.channels;
  KVSTREAM_RETURN_IF_ERROR(ExpectSize(info, seg, uint64_t{2} * static_cast<uint64_t>(tokens) +
                                                     static_cast<uint64_t>(tokens * channels)));
  const int8_t* q = reinterpret_cast<const int8_t*>(scales + 2 * tokens);
  std::vector<float> row(static_cast<size_t>(channels));
  for (int64_t t = 0; t < tokens; ++t) {
    uint16_t scale;
    std::memcpy(&scale, scales + 2 * t, 2);
    for (int64_t c = 0; c < channels; ++c) row[c] = DequantizeInt8(q[t * channels + c], scale);
    StoreRow(out, seg.layer, t, row.data());
  }
  return Status::Ok();
}

}  // namespace

Status DecodePassthroughSegment(const uint8_t* chunk, const ChunkInfo& info, const SegmentInfo& seg, const TensorView& out) {
  const uint8_t* p = chunk + seg.offset;
  return info.level == kLevelFp16 ? DecodeFp16(p, info, seg, out) : DecodeInt8(p, info, seg, out);
}

}  // namespace kvstream::codec
