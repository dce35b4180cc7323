// The model and text plumbing the model commands (eval, demo, profile, ...) share, and the help lines of
// the methods they measure (measure/kv_methods.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "tools/command.h"

namespace kvstream::cli {

// The help lines listing every method, for the commands' --help.
std::string KvMethodsHelp();

// --model, --tokenizer and --threads, as every model command reads them.
Result<std::unique_ptr<Model>> LoadModelFromArgs(const Args& args, const std::string& default_model = "");

// Reads a text file (up to 256 MiB) and tokenizes it as a document (BOS first when the model wants it).
Result<std::vector<int>> TokenizeFile(const Model& model, const std::string& path);

}  // namespace kvstream::cli
