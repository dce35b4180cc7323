// kvstream's own chunk codec (include/kvstream/codec.h, EncodeChunk/DecodeChunk) as KvCodecs, one per
// level, so that the CLI's eval, profile and demo and the benchmarks measure it exactly like any other
// method.
#pragma once

#include <memory>
#include <string>

#include "measure/kv_codec.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream {

// The fine rows a level codec asks for: that fraction of each context's tokens (FineRowsThreshold over
// KvChunk16::context_importance) at that level.
struct FineRowsOption {
  double fraction = 0.0;
  Level level = 2;
};

// One level of kvstream's codec as a KvCodec (method "kvstream", or "kvstream-transform" /
// "kvstream-predicted" for those schemes, which need a profile that serves them, with "+fine" when it
// codes fine rows); `profile` null: every chunk carries its own tables.
std::unique_ptr<KvCodec> MakeKvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level,
                                         QuantScheme scheme = QuantScheme::kChannelUniform,
                                         FineRowsOption fine = {});

}  // namespace kvstream
