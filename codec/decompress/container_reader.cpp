// The container reader: nothing read from the bytes is used before it is checked (see
// container_reader.h and docs/format.md).
#include "codec/decompress/container_reader.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "codec/common/container_format.h"
#include "codec/common/crc32c.h"

namespace kvstream::codec {
namespace {

Status CheckDim(const char* field, uint32_t value, int64_t limit) {
  if (value == 0) return Status::CorruptData(std::string("chunk header: ") + field + " = 0");
  if (static_cast<int64_t>(value) > limit) {
    return Status::ResourceExhausted(std::string("chunk header: ") + field + " = " + std::to_string(value) +
                                     " exceeds limit " + std::to_string(limit));
  }
  return Status::Ok();
}

// The bitmap of fine rows (bit t % 8 of byte t / 8 for token t): sink rows and the padding bits must be 0,
// and at least one row set (an empty map would be the flag's contradiction).
Status ReadFineRowMap(const uint8_t* map, ChunkInfo* info) {
  info->fine_rows.resize(static_cast<size_t>(info->tokens));
  int64_t count = 0;
  const int64_t bits = static_cast<int64_t>(FineRowMapBytes(info->tokens)) * 8;
  for (int64_t t = 0; t < bits; ++t) {
    const uint8_t bit = (map[t / 8] >> (t % 8)) & 1;
    if (bit == 0) continue;
    if (t < info->sink_rows || t >= info->tokens) {
      return Status::CorruptData("chunk header: fine-row map marks " + std::string(t < info->sink_rows ? "sink row " : "padding bit ") +
                                 std::to_string(t));
    }
    info->fine_rows[static_cast<size_t>(t)] = 1;
    ++count;
  }
  if (count == 0) return Status::CorruptData("chunk header: fine-rows flag set but the fine-row map is empty");
  return Status::Ok();
}

const char* TensorName(uint8_t t) { return t == 0 ? "keys" : t == 1 ? "values" : t == 2 ? "tokens" : "?"; }

}  // namespace

std::string SegmentName(const SegmentInfo& s) {
  return std::string("segment (layer ") + std::to_string(s.layer) + ", " + TensorName(static_cast<uint8_t>(s.tensor)) + ")";
}

Status VerifySegment(const uint8_t* data, const SegmentInfo& segment) {
  const uint32_t crc = Crc32c(data + segment.offset, segment.size);
  if (crc != segment.crc32c) {
    return Status::CorruptData(SegmentName(segment) + ": CRC32C " + std::to_string(crc) + " does not match stored " +
                               std::to_string(segment.crc32c));
  }
  return Status::Ok();
}

Result<ChunkInfo> ReadContainerHeader(const uint8_t* data, size_t available, size_t size, const DecodeLimits& limits) {
  if (data == nullptr && size != 0) return Status::InvalidArgument("chunk: data is null");
  if (available > size) available = size;
  if (size > limits.max_chunk_bytes) {
    return Status::ResourceExhausted("chunk: " + std::to_string(size) + " bytes exceeds limit " +
                                     std::to_string(limits.max_chunk_bytes));
  }
  ByteReader in(data, available, "chunk header");
  uint8_t magic[4];
  KVSTREAM_RETURN_IF_ERROR(in.Read(magic, 4, "magic"));
  if (std::memcmp(magic, kChunkMagic, 4) != 0) return Status::CorruptData("chunk header: bad magic (not a kvstream chunk)");
  ChunkInfo info;
  uint16_t header_size = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U16(&info.version, "version"));
  if (info.version != kChunkVersion) {
    return Status::Unsupported("chunk header: unsupported version " + std::to_string(info.version) +
                               " (this build reads chunk format version " + std::to_string(kChunkVersion) + ")");
  }
  KVSTREAM_RETURN_IF_ERROR(in.U16(&header_size, "header size"));
  if (header_size != kChunkFixedHeaderBytes) {
    return Status::CorruptData("chunk header: header size = " + std::to_string(header_size) + ", expected " +
                               std::to_string(kChunkFixedHeaderBytes));
  }
  KVSTREAM_RETURN_IF_ERROR(in.Need(kChunkFixedHeaderBytes - 8, "fixed header"));
  // Zero-initialised: the reads below cannot fail after Need(), but GCC's -O1 cannot see that.
  uint8_t level_byte = 0, scheme = 0, source_dtype = 0, stored_dtype = 0, flags = 0, sink_rows = 0, fine_level = 0;
  uint8_t reserved8 = 0;
  uint32_t layers = 0, tokens = 0, channels = 0, segment_count = 0;
  uint64_t token_begin = 0, reserved64 = 0;
  KVSTREAM_RETURN_IF_ERROR(in.U8(&level_byte, "level"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&scheme, "scheme"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&source_dtype, "source dtype"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&stored_dtype, "stored dtype"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&flags, "flags"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&sink_rows, "sink rows"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&fine_level, "fine level"));
  KVSTREAM_RETURN_IF_ERROR(in.U8(&reserved8, "reserved"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&layers, "layers"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&tokens, "tokens"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&channels, "channels"));
  KVSTREAM_RETURN_IF_ERROR(in.U32(&segment_count, "segment count"));
  KVSTREAM_RETURN_IF_ERROR(in.U64(&token_begin, "token begin"));
  KVSTREAM_RETURN_IF_ERROR(in.U64(&info.profile_hash, "profile hash"));
  KVSTREAM_RETURN_IF_ERROR(in.U64(&info.total_bytes, "total bytes"));
  KVSTREAM_RETURN_IF_ERROR(in.U64(&reserved64, "reserved"));

  info.level = static_cast<int8_t>(level_byte);
  if (!IsValidLevel(info.level)) return Status::CorruptData("chunk header: level = " + std::to_string(info.level) + " is not a level");
  const bool lossy = IsLossyLevel(info.level);
  if (lossy) {
    // 2 was cachegen-token, removed in version 7.
    if (scheme != static_cast<uint8_t>(QuantScheme::kChannelUniform) && scheme != static_cast<uint8_t>(QuantScheme::kTransform) &&
        scheme != static_cast<uint8_t>(QuantScheme::kPredicted)) {
      return Status::Unsupported("chunk header: scheme = " + std::to_string(scheme) + ", expected 1, 3 or 4");
    }
    info.scheme = static_cast<QuantScheme>(scheme);
  } else if (scheme != 0) {
    return Status::CorruptData("chunk header: scheme = " + std::to_string(scheme) + " for non-lossy level " + LevelName(info.level));
  }
  if (source_dtype > 2) return Status::CorruptData("chunk header: source dtype = " + std::to_string(source_dtype) + ", expected 0..2");
  info.source_dtype = static_cast<DType>(source_dtype);
  if (info.level == kLevelFp16) {
    if (stored_dtype != static_cast<uint8_t>(DType::kF16) && stored_dtype != static_cast<uint8_t>(DType::kBF16)) {
      return Status::CorruptData("chunk header: stored dtype = " + std::to_string(stored_dtype) + ", expected 1 (f16) or 2 (bf16)");
    }
    info.stored_dtype = static_cast<DType>(stored_dtype);
  } else if (stored_dtype != 0) {
    return Status::CorruptData("chunk header: stored dtype = " + std::to_string(stored_dtype) + " for level " + LevelName(info.level));
  }
  if ((flags & ~(kChunkFlagInChunkTables | kChunkFlagFineRows)) != 0 || (!lossy && flags != 0)) {
    return Status::CorruptData("chunk header: flags = " + std::to_string(flags) + " has unknown bits for level " + LevelName(info.level));
  }
  info.in_chunk_tables = (flags & kChunkFlagInChunkTables) != 0;
  const bool fine_rows = (flags & kChunkFlagFineRows) != 0;
  if (fine_rows && info.scheme != QuantScheme::kTransform && info.scheme != QuantScheme::kPredicted) {
    return Status::CorruptData(std::string("chunk header: fine rows in a ") + SchemeName(info.scheme) +
                               " chunk (only transform and predicted chunks have them)");
  }
  if (fine_rows ? !(fine_level >= 1 && fine_level < info.level) : fine_level != 0) {
    return Status::CorruptData("chunk header: fine level = " + std::to_string(fine_level) +
                               (fine_rows ? ", expected 1.." + std::to_string(info.level - 1) + " (finer than level " +
                                                LevelName(info.level) + ")"
                                          : " without the fine-rows flag"));
  }
  info.fine_level = fine_level;
  if (reserved8 != 0 || reserved64 != 0) return Status::CorruptData("chunk header: reserved bytes are not zero");
  // Channel-uniform without in-chunk tables, transform and predicted need a profile; everything else must not
  // name one.
  const bool needs_profile = lossy && !info.in_chunk_tables;
  if (lossy && (info.scheme == QuantScheme::kTransform || info.scheme == QuantScheme::kPredicted) && info.in_chunk_tables) {
    return Status::CorruptData(std::string("chunk header: scheme ") + SchemeName(info.scheme) +
                               " has no in-chunk tables (its basis is in the profile)");
  }
  if (needs_profile != (info.profile_hash != 0)) {
    return Status::CorruptData(needs_profile ? "chunk header: profile hash = 0 but the chunk has no tables of its own"
                                             : "chunk header: profile hash set on a chunk that carries its own tables");
  }
  KVSTREAM_RETURN_IF_ERROR(CheckDim("layers", layers, limits.max_layers));
  KVSTREAM_RETURN_IF_ERROR(CheckDim("tokens", tokens, limits.max_tokens));
  KVSTREAM_RETURN_IF_ERROR(CheckDim("channels", channels, limits.max_channels));
  uint64_t values = 0;
  if (!MulWithin(uint64_t{layers} * tokens, uint64_t{channels} * 2, static_cast<uint64_t>(limits.max_values), &values) ||
      (layers != 0 && uint64_t{layers} * tokens / layers != tokens)) {
    return Status::ResourceExhausted("chunk header: 2 x " + std::to_string(layers) + " x " + std::to_string(tokens) + " x " +
                                     std::to_string(channels) + " values exceeds limit " + std::to_string(limits.max_values));
  }
  if (token_begin > static_cast<uint64_t>(INT64_MAX)) {
    return Status::CorruptData("chunk header: token begin = " + std::to_string(token_begin) + " exceeds 2^63 - 1");
  }
  info.layers = layers;
  info.tokens = tokens;
  info.channels = channels;
  info.token_begin = static_cast<int64_t>(token_begin);
  // Sink rows are part of the channel-uniform and transform schemes, and always exactly the chunk's
  // positions < 4.
  const int64_t want_sinks = lossy ? SinkRows(info.token_begin, info.tokens) : 0;
  if (sink_rows != want_sinks) {
    return Status::CorruptData("chunk header: sink rows = " + std::to_string(sink_rows) + ", expected " +
                               std::to_string(want_sinks) + " for token begin " + std::to_string(info.token_begin) + ", " +
                               std::to_string(info.tokens) + " tokens, level " + LevelName(info.level));
  }
  info.sink_rows = sink_rows;
  const uint64_t expected_segments = info.level == kLevelText ? 1 : uint64_t{layers} * 2;
  if (segment_count != expected_segments) {
    return Status::CorruptData("chunk header: segment count = " + std::to_string(segment_count) + ", expected " +
                               std::to_string(expected_segments) + " for level " + LevelName(info.level) + " and " +
                               std::to_string(layers) + " layers");
  }
  if (info.total_bytes != size) {
    return Status::CorruptData("chunk header: total bytes = " + std::to_string(info.total_bytes) + " but the buffer holds " +
                               std::to_string(size));
  }
  // segment_count <= 2 * max_layers and tokens <= max_tokens, so this cannot overflow.
  const uint64_t index_end = kChunkFixedHeaderBytes + uint64_t{kSegmentEntryBytes} * segment_count;
  const uint64_t map_bytes = fine_rows ? FineRowMapBytes(info.tokens) : 0;
  const uint64_t header_bytes = index_end + map_bytes + 4;
  if (header_bytes > size) {
    return Status::CorruptData("chunk header: segment index of " + std::to_string(segment_count) + " entries" +
                               (fine_rows ? " and fine-row map" : "") + " need " + std::to_string(header_bytes) +
                               " bytes but the chunk has " + std::to_string(size));
  }
  if (header_bytes > available) {
    return Status::InvalidArgument("chunk header: the host copy holds " + std::to_string(available) + " bytes of the " +
                                   std::to_string(header_bytes) + "-byte header");
  }
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, data + header_bytes - 4, 4);
  const uint32_t crc = Crc32c(data, header_bytes - 4);
  if (crc != stored_crc) {
    return Status::CorruptData("chunk header: CRC32C " + std::to_string(crc) + " does not match stored " + std::to_string(stored_crc));
  }
  info.header_bytes = static_cast<uint32_t>(header_bytes);
  if (fine_rows) KVSTREAM_RETURN_IF_ERROR(ReadFineRowMap(data + index_end, &info));
  ByteReader idx(data + kChunkFixedHeaderBytes, index_end - kChunkFixedHeaderBytes, "segment index");
  info.segments.resize(segment_count);
  uint64_t expected_offset = header_bytes;
  for (uint32_t i = 0; i < segment_count; ++i) {
    SegmentInfo& s = info.segments[i];
    uint8_t tensor = 0, r8 = 0;
    uint16_t r16 = 0;
    KVSTREAM_RETURN_IF_ERROR(idx.U64(&s.offset, "offset"));
    KVSTREAM_RETURN_IF_ERROR(idx.U32(&s.size, "size"));
    KVSTREAM_RETURN_IF_ERROR(idx.U32(&s.crc32c, "crc32c"));
    KVSTREAM_RETURN_IF_ERROR(idx.U32(&s.layer, "layer"));
    KVSTREAM_RETURN_IF_ERROR(idx.U8(&tensor, "tensor"));
    KVSTREAM_RETURN_IF_ERROR(idx.U8(&r8, "reserved"));
    KVSTREAM_RETURN_IF_ERROR(idx.U16(&r16, "reserved"));
    const std::string where = "segment index entry " + std::to_string(i);
    const uint32_t want_layer = info.level == kLevelText ? 0 : i / 2;
    const uint8_t want_tensor = info.level == kLevelText ? 2 : static_cast<uint8_t>(i % 2);
    if (s.layer != want_layer || tensor != want_tensor || r8 != 0 || r16 != 0) {
      return Status::CorruptData(where + ": (layer " + std::to_string(s.layer) + ", tensor " + std::to_string(tensor) +
                                 ") out of order, expected (layer " + std::to_string(want_layer) + ", " +
                                 TensorName(want_tensor) + ")");
    }
    s.tensor = static_cast<SegmentTensor>(tensor);
    if (s.offset != expected_offset) {
      return Status::CorruptData(where + ": offset = " + std::to_string(s.offset) + ", expected " +
                                 std::to_string(expected_offset) + " (segments are contiguous)");
    }
    if (s.size > limits.max_segment_bytes) {
      return Status::ResourceExhausted(where + ": size = " + std::to_string(s.size) + " exceeds limit " +
                                       std::to_string(limits.max_segment_bytes));
    }
    if (s.size > size - s.offset) {
      return Status::CorruptData(where + ": size = " + std::to_string(s.size) + " at offset " + std::to_string(s.offset) +
                                 " runs past the chunk's " + std::to_string(size) + " bytes");
    }
    expected_offset = s.offset + s.size;
  }
  if (expected_offset != size) {
    return Status::CorruptData("segment index: segments end at " + std::to_string(expected_offset) + " but the chunk has " +
                               std::to_string(size) + " bytes");
  }
  return info;
}

Status CheckChunkProfile(const ChunkInfo& info, const Profile* profile) {
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

Result<ChunkInfo> ReadContainer(const uint8_t* data, size_t size, const DecodeLimits& limits, bool verify_segments) {
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, ReadContainerHeader(data, size, size, limits));
  if (verify_segments) {
    for (const SegmentInfo& s : info.segments) KVSTREAM_RETURN_IF_ERROR(VerifySegment(data, s));
  }
  return info;
}

}  // namespace kvstream::codec

namespace kvstream {

Result<ChunkInfo> InspectChunk(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  return codec::ReadContainer(data, size, limits, /*verify_segments=*/true);
}

Result<ChunkInfo> ReadChunkHeader(const uint8_t* data, size_t size, const DecodeLimits& limits) {
  return codec::ReadContainer(data, size, limits, /*verify_segments=*/false);
}

}  // namespace kvstream
