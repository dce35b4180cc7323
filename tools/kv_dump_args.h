// KV dumps on the command line: --kv-dump FILE[,FILE...] for the commands that take KV from .npz dumps
// (serve, encode, profile) instead of prefilling a text, read and checked against a model or each other;
// and a model's cache as a dump, for those that write one (kv dump, fetch --out).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/kv_dump.h"
#include "kvstream/model.h"
#include "kvstream/status.h"

namespace kvstream::cli {

// The dumps at `paths` (--kv-dump's files), each read whole.
Result<std::vector<std::shared_ptr<const KvDump>>> ReadKvDumpArgs(const std::vector<std::string>& paths);

// A model's geometry as a dump states it: what a command without --model checks profiles and other dumps
// against.
ModelConfig ConfigOfDump(const KvDump& d);

// Each dump's KV must be what `config` (`what`: the model, or the first dump) makes: its shape, heads, RoPE
// and vocabulary, so that fetchers, profiles and the text level agree with it.
Status CheckDumpsFit(const std::vector<std::shared_ptr<const KvDump>>& dumps, const std::vector<std::string>& paths,
                     const ModelConfig& config, const std::string& what);

// The first cache.tokens positions of a model's cache as a dump (f32; no token ids or importance yet).
Result<KvDump> KvDumpOf(const ModelConfig& config, const KvCache& cache);

}  // namespace kvstream::cli
