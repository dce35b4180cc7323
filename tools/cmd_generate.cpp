// `kvstream generate`: greedy text generation with the reference model engine.
#include <cstdio>

#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

Status RunGenerate(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string prompt, args.Require("prompt"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t max_tokens, args.GetInt("max-tokens", 64));
  if (max_tokens < 0 || max_tokens > (1 << 20)) return Status::InvalidArgument("--max-tokens = " + std::to_string(max_tokens) + ", expected 0..1048576");
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  const Tokenizer& tok = model->tokenizer();
  const std::vector<int> prompt_ids = tok.Encode(prompt, tok.adds_bos());
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> generated, GenerateGreedy(*model, prompt_ids, static_cast<int>(max_tokens)));
  // Decode prompt and continuation together so pieces that span the boundary (a leading space, a UTF-8
  // character split over byte tokens) come out right, then print the user's prompt verbatim before it.
  std::vector<int> all = prompt_ids;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string full = tok.Decode(all), head = tok.Decode(prompt_ids);
  const std::string continuation = full.compare(0, head.size(), head) == 0 ? full.substr(head.size()) : tok.Decode(generated);
  std::printf("%s%s\n", prompt.c_str(), continuation.c_str());
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(generate, {
    "generate",
    "greedy text generation with the reference model engine",
    "usage: kvstream generate --model M --prompt TEXT [--max-tokens N] [--tokenizer PATH] [--threads N]\n\n"
    "Runs the prompt through the model and appends the most likely token (temperature 0) until N new\n"
    "tokens, the end-of-sequence token or the model's context length. Prints the prompt and continuation.\n\n"
    "  --model M         model short name (stories260K, tinystories656k, smollm2) or a path: a llama2.c\n"
    "                    .bin checkpoint, a .gguf file, or a Hugging Face folder with model.safetensors (required)\n"
    "  --prompt TEXT     the prompt (required)\n"
    "  --max-tokens N    new tokens to generate (default 64)\n"
    "  --tokenizer PATH  tokenizer file overriding the one beside the model (tokenizer.bin or tokenizer.json;\n"
    "                    default: found beside or inside the model)\n"
    "  --threads N       OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "prompt", "max-tokens", "tokenizer", "threads"},
    {},
    RunGenerate,
});

}  // namespace kvstream::cli
