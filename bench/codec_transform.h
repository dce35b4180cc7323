// Runs a baseline codec as a KvTransform: the cache is cut into chunks, each chunk goes through fp16,
// Encode and Decode, and the decoded values replace the originals. Apply returns the charged bits per
// K/V value over all chunks, so the quality meter sees exactly what a receiver would.
#pragma once

#include <memory>

#include "bench/baseline_codec.h"
#include "kvstream/quality.h"

namespace kvstream::bench {

// `codec` must outlive the transform. chunk_tokens >= 1.
std::unique_ptr<KvTransform> MakeCodecTransform(const BaselineCodec& codec, int chunk_tokens);
// The same, owning the codec.
std::unique_ptr<KvTransform> MakeCodecTransform(std::unique_ptr<const BaselineCodec> codec, int chunk_tokens);

}  // namespace kvstream::bench
