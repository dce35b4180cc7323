// `kvstream bench codec`: every method (kvstream's levels and the baselines) measured in one run on the
// real KV of a model: size over all chunks, entropy-stage overhead, single-thread encode/decode speed and
// multi-thread decode speed, and quality through the quality meter.
//
// The context (the first context_tokens of the text) is prefilled once; its KV is cut into chunks of
// chunk_tokens and each method encodes and decodes every chunk. Speeds are the best of `repetitions`
// runs, in GB of fp16-equivalent KV (2 bytes per value) per second. Ratios use the fp16 and int8 rows of
// the same run. With `windows` > 1 the sizes and the quality are those of that many windows of context +
// eval tokens one after the other through the text (as `kvstream eval --windows`): sizes over all of them,
// quality their mean and the lowest top-1; speeds stay those of the first.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/kv_codec.h"
#include "kvstream/model.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct CodecBenchOptions {
  std::string model = "smollm2";
  std::string text = "/usr/share/common-licenses/GPL-3";
  int context_tokens = 2048;
  int eval_tokens = 1024;
  int windows = 2;  // windows of context + eval tokens scored (see above)
  int chunk_tokens = 256;
  int threads = 1;       // for decode_gbps
  int repetitions = 3;   // timing: best of
  double min_seconds = 0.3;  // each timing repeats whole passes until at least this long (or 1 pass)
  bool transform = false;    // also learn the transform scheme and measure it ("kvstream-transform" rows)
  bool predict = false;      // also the predicted scheme ("kvstream-predicted" rows; implies transform)
  // > 0: also the transform and predicted levels finer than fine_level with that fraction of each chunk's
  // tokens coded at fine_level ("kvstream-transform+fine", "kvstream-predicted+fine" rows).
  double fine_fraction = 0.0;
  Level fine_level = 2;
};

struct CodecBenchRow {
  std::string method;
  Level level = kLevelFp16;
  double bits_per_value = 0;
  double ratio_vs_fp16 = 0;
  double ratio_vs_int8 = 0;
  std::optional<double> entropy_overhead_pct;
  double encode_gbps_per_core = 0;
  double decode_gbps_per_core = 0;
  double decode_gbps = 0;
  double ppl_delta_pct = 0;
  double ppl_delta_stderr = 0;  // standard errors of the windows' mean (QualityReport)
  double kl_mean = 0;
  double top1_agreement = 0;
  double top1_stderr = 0;
  bool negligible = false;  // IsNegligible of the mean
  std::optional<double> top1_agreement_min;  // the lowest window's, with more than one window
  // cachegen-ref only: the rANS payload against the ideal arithmetic-coding size under the released
  // 16-bit CDFs, and the released layout's byte breakdown.
  std::optional<double> rans_vs_ac16_pct;
  std::vector<std::pair<std::string, double>> breakdown;  // name -> bytes over all chunks
};

struct CodecBenchContext {
  std::string model_name;
  int layers = 0, kv_dim = 0, context_tokens = 0, chunks = 0, windows = 1;
  double ppl_reference = 0;  // the first window's
};

// A method under test: a codec plus how the bench names it. The kvstream codec enters through
// `extra_codecs` (an adapter over include/kvstream/codec.h) so this library does not depend on it.
using CodecFactory = std::function<Result<std::vector<std::unique_ptr<KvCodec>>>(const Model&)>;

// Runs the benchmark; `on_row` receives each finished row (ratios filled in), in order: fp16, int8,
// zstd-3, zstd-19, cachegen-ref levels, then the extra codecs (as each finishes with one window, after the
// last window with more).
Status RunCodecBench(const CodecBenchOptions& options, const CodecFactory& extra_codecs,
                     const std::function<void(const CodecBenchContext&)>& on_context,
                     const std::function<void(const CodecBenchRow&)>& on_row);

}  // namespace kvstream::bench
