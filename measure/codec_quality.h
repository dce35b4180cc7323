// What a KvCodec does to a model's KV cache, measured the way a receiver would see it: the cache is cut
// into chunks, each chunk goes through fp16, Encode and Decode, and the decoded values replace the
// originals.
#pragma once

#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "kvstream/status.h"
#include "measure/kv_codec.h"

namespace kvstream {

// Passes tokens [0, cache.tokens) of `cache` through `codec` in chunks of `chunk_tokens` (>= 1; the last
// may be shorter) and returns the charged bits per K/V value over all chunks.
Result<double> ApplyCodec(const KvCodec& codec, int chunk_tokens, KvCache& cache);

// The quality meter's report for the meter's context passed through ApplyCodec (method: codec.name()).
Result<QualityReport> MeasureCodec(const QualityMeter& meter, const KvCodec& codec, int chunk_tokens);

}  // namespace kvstream
