// model_args.cpp — see model_args.h.
#include "tools/model_args.h"

#include <memory>
#include <string>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "measure/kv_methods.h"
#include "tools/command.h"

namespace kvstream::cli {

std::string KvMethodsHelp() {
  std::string s;
  for (const KvMethod& m : KvMethods()) s += "                        " + m.name + ": " + m.summary + "\n";
  return s;
}

Result<std::unique_ptr<Model>> LoadModelFromArgs(const Args& args, const std::string& default_model) {
  std::string name = args.GetString("model", default_model);
  if (name.empty()) return Status::InvalidArgument("missing required flag --model");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t threads, args.GetInt("threads", 0));
  if (threads < 0 || threads > 1024) return Status::InvalidArgument("--threads = " + std::to_string(threads) + ", expected 0..1024");
  LoadOptions options;
  options.tokenizer_path = args.GetString("tokenizer");
  options.threads = static_cast<int>(threads);
  return Model::Load(name, options);
}

Result<std::vector<int>> TokenizeFile(const Model& model, const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status().WithContext("--text");
  return model.tokenizer().Encode(*text, model.tokenizer().adds_bos());
}

}  // namespace kvstream::cli
