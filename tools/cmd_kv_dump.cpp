// `kvstream kv dump`: writes the KV cache of a text's first T tokens as an uncompressed .npz that numpy
// reads with np.load (format: docs/kv-dump-format.md).
#include <cstdio>

#include "tools/kv_dump_args.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

Status RunKvDump(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, args.Require("text"));
  KVSTREAM_ASSIGN_OR_RETURN(std::string out_path, args.Require("out"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens_wanted, args.GetInt("tokens", 1024));
  if (tokens_wanted < 1 || tokens_wanted > (1 << 20)) return Status::InvalidArgument("--tokens = " + std::to_string(tokens_wanted) + ", expected 1..1048576");
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  if (tokens.size() < static_cast<size_t>(tokens_wanted)) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(tokens.size()) + " tokens, fewer than --tokens " +
                                   std::to_string(tokens_wanted));
  }
  tokens.resize(static_cast<size_t>(tokens_wanted));
  const ModelConfig& c = model->config();
  KvCache cache = KvCache::Allocate(c, static_cast<int>(tokens_wanted));
  KVSTREAM_RETURN_IF_ERROR(model->Forward(tokens, cache, nullptr));

  KVSTREAM_ASSIGN_OR_RETURN(KvDump dump, KvDumpOf(c, cache));
  dump.token_ids.assign(tokens.begin(), tokens.end());
  dump.importance = cache.Importance();
  KVSTREAM_RETURN_IF_ERROR(WriteKvDump(dump, out_path).WithContext("--out"));
  std::printf("wrote %s: k, v float32 [%d][%d][%d], tokens int32 [%d] (model %s)\n", out_path.c_str(), cache.layers,
              cache.tokens, cache.kv_dim, cache.tokens, c.name.c_str());
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(kv_dump, {
    "kv dump",
    "write the KV cache of a text as a numpy .npz file",
    "usage: kvstream kv dump --model M --text FILE --out FILE [--tokens T] [--tokenizer PATH] [--threads N]\n\n"
    "Prefills the first T tokens of the text and writes the KV cache as an uncompressed .npz (np.load reads\n"
    "it): k and v float32 [layers][tokens][kv_dim] (keys after RoPE), tokens int32 [tokens], config int64\n"
    "[layers, tokens, kv_dim, n_heads, n_kv_heads, head_dim, rope_layout (0 interleaved, 1 rotate-half),\n"
    "vocab_size], rope_theta float32 [1], importance float32 [tokens] (the attention each token received,\n"
    "which ranks the fine rows when kvstream serve --kv-dump serves it). See docs/kv-dump-format.md.\n\n"
    "  --model M         model short name (stories260K, tinystories656k, smollm2) or a path (required)\n"
    "  --text FILE       text whose first T tokens are prefilled (required)\n"
    "  --out FILE        the .npz to write (required)\n"
    "  --tokens T        context length (default 1024)\n"
    "  --tokenizer PATH  tokenizer overriding the one beside the model (default: found with the model)\n"
    "  --threads N       OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "out", "tokens", "tokenizer", "threads"},
    {},
    RunKvDump,
});

}  // namespace kvstream::cli
