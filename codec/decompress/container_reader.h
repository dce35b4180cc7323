// Parses and validates a chunk's fixed header and segment index (docs/format.md); shared by
// InspectChunk, DecodeChunk and DecodeChunkTokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kvstream/codec.h"

namespace kvstream::codec {

// Checks magic, version, every header field against the limits, the header CRC, the segment index
// (canonical order, contiguous offsets, sizes inside the buffer) and, when verify_segments, every
// segment's CRC32C. `size` must be exactly the chunk's total_bytes.
Result<ChunkInfo> ReadContainer(const uint8_t* data, size_t size, const DecodeLimits& limits, bool verify_segments);

// The same checks but the segments' CRCs, from the first `available` bytes of a `size`-byte chunk (a host
// copy of the header of a chunk whose payload is elsewhere, e.g. in GPU memory); InvalidArgument when
// they do not hold the whole header.
Result<ChunkInfo> ReadContainerHeader(const uint8_t* data, size_t available, size_t size, const DecodeLimits& limits);

// Checks that a chunk that references a profile was given the one it names (hash, shape, level); the
// errors name both hashes. Ok for a chunk that references none.
Status CheckChunkProfile(const ChunkInfo& info, const Profile* profile);

// "segment (layer 3, values)", for error messages.
std::string SegmentName(const SegmentInfo& segment);

// Verifies one segment's CRC32C; the error names the segment.
Status VerifySegment(const uint8_t* data, const SegmentInfo& segment);

}  // namespace kvstream::codec
