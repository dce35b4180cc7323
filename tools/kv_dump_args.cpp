// kv_dump_args.cpp — see kv_dump_args.h.
#include "tools/kv_dump_args.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/kv_dump.h"
#include "kvstream/model.h"
#include "kvstream/status.h"

namespace kvstream::cli {

Result<std::vector<std::shared_ptr<const KvDump>>> ReadKvDumpArgs(const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::InvalidArgument("--kv-dump names no file");
  if (paths.size() > 1024) {
    return Status::InvalidArgument("--kv-dump names " + std::to_string(paths.size()) + " files, at most 1024");
  }
  std::vector<std::shared_ptr<const KvDump>> dumps;
  for (const std::string& path : paths) {
    KVSTREAM_ASSIGN_OR_RETURN(KvDump dump, ReadKvDump(path));
    dumps.push_back(std::make_shared<const KvDump>(std::move(dump)));
  }
  return dumps;
}

ModelConfig ConfigOfDump(const KvDump& d) {
  ModelConfig c;
  c.name = "(from the dump)";
  c.n_layers = d.layers;
  c.n_heads = d.n_heads;
  c.n_kv_heads = d.n_kv_heads;
  c.head_dim = d.rope.head_dim;
  c.vocab_size = d.vocab_size;
  c.rope_theta = d.rope.theta;
  c.rope_layout = d.rope.layout;
  return c;
}

Status CheckDumpsFit(const std::vector<std::shared_ptr<const KvDump>>& dumps, const std::vector<std::string>& paths,
                     const ModelConfig& config, const std::string& what) {
  for (size_t i = 0; i < dumps.size(); ++i) {
    const ModelConfig mine = ConfigOfDump(*dumps[i]);
    const auto differs = [&](const char* field, double ours, double theirs) {
      char text[160];
      std::snprintf(text, sizeof text, "%s = %g, %s has %g", field, ours, what.c_str(), theirs);
      return Status::InvalidArgument("--kv-dump " + paths[i] + ": " + text);
    };
    if (mine.n_layers != config.n_layers) return differs("layers", mine.n_layers, config.n_layers);
    if (mine.n_kv_heads != config.n_kv_heads) return differs("n_kv_heads", mine.n_kv_heads, config.n_kv_heads);
    if (mine.head_dim != config.head_dim) return differs("head_dim", mine.head_dim, config.head_dim);
    if (mine.n_heads != config.n_heads) return differs("n_heads", mine.n_heads, config.n_heads);
    if (mine.vocab_size != config.vocab_size) return differs("vocab_size", mine.vocab_size, config.vocab_size);
    if (mine.rope_theta != config.rope_theta) return differs("rope_theta", mine.rope_theta, config.rope_theta);
    if (mine.rope_layout != config.rope_layout) {
      return differs("rope_layout", static_cast<int>(mine.rope_layout), static_cast<int>(config.rope_layout));
    }
  }
  return Status::Ok();
}

Result<KvDump> KvDumpOf(const ModelConfig& config, const KvCache& cache) {
  if (cache.layers != config.n_layers || cache.kv_dim != config.kv_dim()) {
    return Status::InvalidArgument("the KV is " + std::to_string(cache.layers) + " layers x " + std::to_string(cache.kv_dim) +
                                   " channels, the model " + config.name + " " + std::to_string(config.n_layers) + " x " +
                                   std::to_string(config.kv_dim()));
  }
  KvDump dump;
  dump.layers = cache.layers;
  dump.tokens = cache.tokens;
  dump.kv_dim = cache.kv_dim;
  dump.n_heads = config.n_heads;
  dump.n_kv_heads = config.n_kv_heads;
  dump.vocab_size = config.vocab_size;
  dump.rope = config.rope();
  dump.keys.resize(static_cast<size_t>(cache.keys().numel()) * sizeof(float));
  dump.values.resize(dump.keys.size());
  KVSTREAM_RETURN_IF_ERROR(CopyView(cache.keys(), dump.keys_view()));
  KVSTREAM_RETURN_IF_ERROR(CopyView(cache.values(), dump.values_view()));
  return dump;
}

}  // namespace kvstream::cli
