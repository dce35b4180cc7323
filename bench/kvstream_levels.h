// kvstream's own rows in `bench codec`: a profile read from a file or learned from a calibration slice of
// text that the evaluated context does not contain, then one KvCodec per level of every scheme it serves.
#pragma once

#include <string>

#include "bench/codec_bench.h"
#include "measure/kvstream_codec.h"

namespace kvstream::bench {

// The calibration slice a learned profile came from, for the benchmark's report.
struct CalibrationSlice {
  std::string text;
  int64_t first_token = 0;
  int64_t tokens = 0;  // 0: no profile was learned (none, or one read from a file)
};

// The profile: read from `profile_path` when it is not empty (made by `kvstream profile`, for this
// model); otherwise learned here: tokens [offset, offset + 2048) of `calibration_text` (4096 with
// options.predict; fewer if the text or the model's context is shorter; offset < 0: right after the
// benchmark's context and continuation) are prefilled after a BOS and their KV trains it, with the
// transform scheme when options.transform and the predicted one when options.predict; *learned_from
// (if not null) records the slice. Then one codec per level of every scheme the profile serves, the
// transform and predicted levels finer than options.fine_level again with fine rows when
// options.fine_fraction > 0, plus int8 and fp16.
CodecFactory KvstreamCodecFactory(const std::string& calibration_text, int64_t offset, const std::string& profile_path,
                                  const CodecBenchOptions& options, CalibrationSlice* learned_from = nullptr);

}  // namespace kvstream::bench
