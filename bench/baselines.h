// The baselines kvstream is compared against, as KvCodecs over fp16 KV chunks: raw fp16, per-token int8
// and zstd on the fp16 bytes (cachegen-ref, the released CacheGen configuration, is in cachegen_ref.h).
#pragma once

#include <memory>

#include "measure/kv_codec.h"

namespace kvstream::bench {

std::unique_ptr<KvCodec> MakeFp16Codec();
// Per (K/V, layer, token): an fp16 scale max|x|/127 and round(x/scale) as int8.
std::unique_ptr<KvCodec> MakeInt8Codec();
// zstd at `level` over the chunk's fp16 bytes (K then V).
std::unique_ptr<KvCodec> MakeZstdCodec(int level);

}  // namespace kvstream::bench
