// kvstream's own chunk codec (include/kvstream/codec.h) as a BaselineCodec, so that `bench codec`
// measures it exactly like the baselines: one row per level of a profile learned from a calibration slice
// of text that the evaluated context does not contain, plus the int8 and fp16 passthrough levels.
#pragma once

#include <memory>
#include <string>

#include "bench/codec_bench.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream::bench {

// The profile: read from `profile_path` when it is not empty (made by `kvstream profile`, for this
// model); otherwise learned here: tokens [offset, offset + 2048) of `calibration_text` (fewer if the
// model's context is shorter; offset < 0: right after the benchmark's context and continuation) are
// prefilled after a BOS and their KV trains it, with the transform scheme when options.transform.
// One level of kvstream's codec as a BaselineCodec (method "kvstream", or "kvstream-transform" for the
// transform scheme, which needs a profile with a transform); `profile` null: every chunk carries its own
// tables.
std::unique_ptr<BaselineCodec> MakeKvstreamLevelCodec(std::shared_ptr<const Profile> profile, Level level,
                                                      QuantScheme scheme = QuantScheme::kChannelUniform);

CodecFactory KvstreamCodecFactory(const std::string& calibration_text, int64_t offset, const std::string& profile_path,
                                  const CodecBenchOptions& options);

}  // namespace kvstream::bench
