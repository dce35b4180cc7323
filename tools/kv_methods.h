// The KV transformations the model commands (eval, demo) can measure, by name, plus the model and text
// plumbing those commands share.
//
// Adding a method is one line in KvMethods(): a name, a one-line summary and a factory that builds the
// KvTransform for a given model (codec levels need the model's shape and profile). "fp16" is the
// uncompressed baseline and stays first.
//
// Header-only on purpose: tools/CMakeLists.txt compiles only tools/cmd_*.cpp besides main and args.
#pragma once

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "bench/codec_transform.h"
#include "bench/kvstream_codec_adapter.h"
#include "tools/command.h"

namespace kvstream::cli {

// How the kvstream-L<n> methods code: each chunk with its own tables (no profile), or against a profile in
// its scheme, with fine rows for the transform and predicted schemes.
struct KvCodecChoice {
  std::shared_ptr<const Profile> profile;
  QuantScheme scheme = QuantScheme::kChannelUniform;
  bench::FineRowsOption fine;
};

struct KvMethod {
  std::string name;
  std::string summary;
  std::function<Result<std::unique_ptr<KvTransform>>(const Model&, const KvCodecChoice&)> make;
};

inline std::vector<KvMethod> BuildKvMethods() {
  std::vector<KvMethod> methods = {
      {"fp16", "fp16 round trip, the uncompressed baseline (16 bits)",
       [](const Model&, const KvCodecChoice&) -> Result<std::unique_ptr<KvTransform>> { return MakeFp16Transform(); }},
      {"int8", "per-token symmetric int8 with fp16 scales (8 + 16/kv_dim bits)",
       [](const Model&, const KvCodecChoice&) -> Result<std::unique_ptr<KvTransform>> { return MakeInt8Transform(); }},
  };
  // The codec's lossy levels, 256-token chunks, coded as the KvCodecChoice says.
  const int lossy_levels = static_cast<int>(DefaultLadder(/*layers=*/1).size());
  for (Level level = 1; level <= lossy_levels; ++level) {
    methods.push_back({"kvstream-" + LevelName(level),
                       "kvstream codec level " + LevelName(level) + ", 256-token chunks, in-chunk tables or --profile's",
                       [level](const Model&, const KvCodecChoice& c) -> Result<std::unique_ptr<KvTransform>> {
                         return bench::MakeCodecTransform(
                             bench::MakeKvstreamLevelCodec(c.profile, level, c.scheme, c.fine), 256);
                       }});
  }
  return methods;
}

inline const std::vector<KvMethod>& KvMethods() {
  static const std::vector<KvMethod> methods = BuildKvMethods();
  return methods;
}

// "all" or a comma-separated list of names; an unknown name is an error listing the known ones.
inline Result<std::vector<const KvMethod*>> SelectKvMethods(const std::string& list) {
  std::vector<const KvMethod*> out;
  std::string known;
  for (const KvMethod& m : KvMethods()) known += (known.empty() ? "" : ", ") + m.name;
  if (list == "all") {
    for (const KvMethod& m : KvMethods()) out.push_back(&m);
    return out;
  }
  for (const std::string& name : SplitList(list)) {
    const KvMethod* found = nullptr;
    for (const KvMethod& m : KvMethods()) {
      if (m.name == name) found = &m;
    }
    if (!found) return Status::InvalidArgument("--methods: unknown method '" + name + "' (known: all, " + known + ")");
    out.push_back(found);
  }
  if (out.empty()) return Status::InvalidArgument("--methods: no method given (known: all, " + known + ")");
  return out;
}

// The help lines listing every method, for the commands' --help.
inline std::string KvMethodsHelp() {
  std::string s;
  for (const KvMethod& m : KvMethods()) s += "                        " + m.name + ": " + m.summary + "\n";
  return s;
}

// --model, --tokenizer and --threads, as every model command reads them.
inline Result<std::unique_ptr<Model>> LoadModelFromArgs(const Args& args, const std::string& default_model = "") {
  std::string name = args.GetString("model", default_model);
  if (name.empty()) return Status::InvalidArgument("missing required flag --model");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0));
  if (threads < 0 || threads > 1024) return Status::InvalidArgument("--threads = " + std::to_string(threads) + ", expected 0..1024");
  LoadOptions options;
  options.tokenizer_path = args.GetString("tokenizer");
  options.threads = static_cast<int>(threads);
  return Model::Load(name, options);
}

// The default evaluation text: real English prose that every Debian system has.
inline constexpr const char* kDefaultText = "/usr/share/common-licenses/GPL-3";

// Reads a text file (up to 256 MiB) and tokenizes it as a document (BOS first when the model wants it).
inline Result<std::vector<int>> TokenizeFile(const Model& model, const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status().WithContext("--text");
  return model.tokenizer().Encode(*text, model.tokenizer().adds_bos());
}

}  // namespace kvstream::cli
