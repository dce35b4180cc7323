// How much each (layer, K/V) slice of a KV cache contributes to a level's quality loss: the weights a
// profile's bit allocation uses (ProfileOptions::slice_sensitivity, `kvstream profile --weigh-slices`).
#pragma once

#include <memory>
#include <vector>

#include "kvstream/profile.h"
#include "kvstream/quality.h"
#include "kvstream/status.h"
#include "measure/kvstream_codec.h"

namespace kvstream {

// The meter's context decoded at `level` in `scheme` (with the fine rows a sender would add, chunks of
// `chunk_tokens`), then for each slice the mean KL that putting only that slice's decoded values in place
// of the original's causes. Returns [layer * 2 + kv] (kv 0 = K, 1 = V), each >= 0; the shares add up to
// about the whole decoded cache's KL.
Result<std::vector<double>> MeasureSliceSensitivity(const QualityMeter& meter,
                                                    const std::shared_ptr<const Profile>& profile, QuantScheme scheme,
                                                    Level level, FineRowsOption fine, int chunk_tokens);

}  // namespace kvstream
