// The model and text plumbing the model commands (eval, demo, profile, ...) share, and the help lines of
// the methods they measure (measure/kv_methods.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "measure/kv_methods.h"
#include "tools/command.h"

namespace kvstream::cli {

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
