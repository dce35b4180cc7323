// The named KV transformations (see the header).
#include "measure/kv_methods.h"

namespace kvstream {
namespace {

std::vector<KvMethod> BuildKvMethods() {
  std::vector<KvMethod> methods = {
      {"fp16", "kvstream's fp16 level, the uncompressed baseline (16 bits)",
       [](const KvCodecChoice&) { return MakeKvstreamLevelCodec(nullptr, kLevelFp16); }},
      {"int8", "kvstream's int8 level: per-token symmetric int8 with fp16 scales (8 + 16/kv_dim bits)",
       [](const KvCodecChoice&) { return MakeKvstreamLevelCodec(nullptr, kLevelInt8); }},
  };
  const int lossy_levels = static_cast<int>(DefaultLadder(/*layers=*/1).size());
  for (Level level = 1; level <= lossy_levels; ++level) {
    methods.push_back({"kvstream-" + LevelName(level),
                       "kvstream codec level " + LevelName(level) + ", 256-token chunks, in-chunk tables or --profile's",
                       [level](const KvCodecChoice& c) {
                         return MakeKvstreamLevelCodec(c.profile, level, c.scheme, c.fine);
                       }});
  }
  return methods;
}

}  // namespace

const std::vector<KvMethod>& KvMethods() {
  static const std::vector<KvMethod> methods = BuildKvMethods();
  return methods;
}

Result<std::vector<const KvMethod*>> SelectKvMethods(const std::vector<std::string>& names) {
  std::vector<const KvMethod*> out;
  std::string known;
  for (const KvMethod& m : KvMethods()) known += (known.empty() ? "" : ", ") + m.name;
  if (names.size() == 1 && names[0] == "all") {
    for (const KvMethod& m : KvMethods()) out.push_back(&m);
    return out;
  }
  for (const std::string& name : names) {
    const KvMethod* found = nullptr;
    for (const KvMethod& m : KvMethods()) {
      if (m.name == name) found = &m;
    }
    if (!found) return Status::InvalidArgument("unknown method '" + name + "' (known: all, " + known + ")");
    out.push_back(found);
  }
  if (out.empty()) return Status::InvalidArgument("no method given (known: all, " + known + ")");
  return out;
}

}  // namespace kvstream
