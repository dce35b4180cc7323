// What `kvstream serve`, `fetch`, `bench transport` and the streaming demo share: host:port and secret
// parsing, a sender's codec flags, prefilling a text's windows into contexts, and the bits per value of fetched KV.
//
// Contexts served from a text: context "i" is the KV of tokens [i * T, (i + 1) * T) of the tokenized text,
// prefilled from scratch, so a fetcher that has the same model and text knows exactly what it receives.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/stream.h"
#include "tools/command.h"

namespace kvstream::cli {

// A sender's --profile (checked against the shape and RoPE of the KV served, `what`: the model's before any
// prefill, rather than at the first chunk's encode), --scheme and fine rows.
Status SetSenderCodec(const Args& args, const ModelConfig& config, SenderOptions* options,
                      const std::string& what = "the model");

// `value` of flag `flag` as host:port (port 1..65535); the error names the flag.
Result<std::pair<std::string, int>> ParseHostPort(const std::string& flag, const std::string& value);

// The shared secret: the file's bytes without a trailing newline (at most 4 KiB, at least 1 byte).
Result<std::string> ReadSecretFile(const std::string& path);

struct TextContext {
  std::vector<int> tokens;  // the window's tokens
  KvCache cache;
};

// Prefills window `index` of `tokens` (windows of `window` tokens).
Result<TextContext> PrefillWindow(const Model& model, const std::vector<int>& tokens, int index, int window);

// The bits per K/V value that `bytes` on the wire cost for `cache`'s tokens.
double WireBitsPerValue(const KvCache& cache, uint64_t bytes);

}  // namespace kvstream::cli
