// One function per checkpoint format, each turning a file (or folder) into a LoadedModel.
#pragma once

#include <string>

#include "model/llama.h"

namespace kvstream::model {

// llama2.c legacy (v0) fp32 checkpoint; the tokenizer is `tokenizer_path`, else tokenizer.bin or tok<vocab>.bin
// beside the checkpoint.
Result<LoadedModel> LoadLlama2c(const std::string& path, const std::string& tokenizer_path);

// Hugging Face folder: model.safetensors + config.json + tokenizer.json (or `tokenizer_path`).
Result<LoadedModel> LoadSafetensors(const std::string& folder, const std::string& tokenizer_path);

// GGUF v2/v3, architecture llama, with its embedded tokenizer.
Result<LoadedModel> LoadGguf(const std::string& path);

// Only the tokenizer embedded in a GGUF file (no tensor is dequantized).
Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path);

}  // namespace kvstream::model
