// The three tokenizer formats the loaders meet, each behind kvstream::Tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"

namespace kvstream::model {

// llama2.c tokenizer.bin: int32 max_token_length, then per token float score, int32 length, bytes.
// Sentencepiece-style: a dummy-prefix space, characters, merges by best score, <0xXX> byte fallback.
Result<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size);

// Hugging Face tokenizer.json with a BPE model (sentencepiece-converted: '\u2581' normalizer, byte
// fallback, merges by rank), as TinyStories and Llama-2 conversions ship it. bos_id/eos_id (from
// config.json) win over the ones guessed from the file; -1 = guess.
Result<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path, int bos_id = -1, int eos_id = -1);

// GPT-2-style byte-level BPE, as embedded in GGUF files (tokenizer.ggml.model = "gpt2").
struct ByteLevelBpeSpec {
  std::vector<std::string> tokens;
  std::vector<std::string> merges;  // "left right", best first
  std::vector<int> token_types;     // GGUF token types (3 = control); may be empty
  int bos_id = -1;
  int eos_id = -1;
  int unk_id = -1;  // stands for bytes the vocabulary lacks
  bool add_bos = false;
  bool split_digits = false;  // pre-tokenizer splits every digit on its own (smollm, starcoder, ...)
};
Result<std::unique_ptr<Tokenizer>> MakeByteLevelBpeTokenizer(ByteLevelBpeSpec spec, const std::string& file);

}  // namespace kvstream::model
