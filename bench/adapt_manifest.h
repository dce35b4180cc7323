// `kvstream bench adapt --manifest-from-model`: the manifest of a real context (each level's chunk sizes,
// quality and receiver cost) measured with a model, the codec and the quality meter, in place of a
// shipped bench/traces/*.manifest.json.
#pragma once

#include <cstdint>
#include <string>

#include "bench/manifest_file.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct ManifestFromModelOptions {
  std::string model;       // required: a model name or path, as Model::Load takes it (--manifest-from-model)
  std::string tokenizer;   // overrides the model's tokenizer (--tokenizer); empty: the model's own
  int64_t threads = 0;     // forward-pass threads, 0..1024; 0: all cores (--threads)
  std::string text = "/usr/share/common-licenses/GPL-3";  // the context's text (--text)
  int64_t context_tokens = 2048;  // 16..65536 (--context-tokens)
  int64_t chunk_tokens = 256;     // 1..context_tokens (--chunk-tokens)
  int64_t eval_tokens = 128;      // continuation tokens the quality meter scores, 1..65536 (--eval-tokens)
  std::string profile;     // a codec profile file the lossy levels are encoded with; empty: in-chunk tables
};

// The model prefills the text's first context_tokens tokens; every chunk is encoded at fp16, int8, every
// lossy level of the ladder (the profile's, else the default one) and text (real sizes); decoding them
// (one thread, the faster of two decodes) gives each level's seconds per token and its decoded cache,
// which the quality meter scores (top-1 agreement of the next eval_tokens tokens); text's cost is the
// model's measured prefill time per token and its quality 1. Prints one line per level on stderr.
Result<ManifestFile> ManifestFromModel(const ManifestFromModelOptions& options);

}  // namespace kvstream::bench
