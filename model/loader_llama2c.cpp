// llama2.c legacy (v0) checkpoints: a 7 x int32 header, then fp32 tensors in a fixed order. A negative
// vocab_size means the classifier is stored separately; the RoPE frequency tables llama2.c wrote are
// skipped (the forward pass computes its own). The file size must match the header exactly.
#include <sys/stat.h>

#include <cstring>

#include "model/binary_reader.h"
#include "model/loaders.h"
#include "model/tokenizers.h"

namespace kvstream::model {
namespace {

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<LoadedModel> LoadLlama2c(const std::string& path, const std::string& tokenizer_path) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path));
  ByteReader r(bytes.data(), bytes.size(), path);
  int32_t h[7];
  static const char* kFields[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    KVSTREAM_ASSIGN_OR_RETURN(h[i], r.Read<int32_t>(kFields[i]));
  }
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = path.substr(path.find_last_of('/') + 1);
  if (c.name.size() > 4 && c.name.compare(c.name.size() - 4, 4, ".bin") == 0) c.name.resize(c.name.size() - 4);
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.tied_embeddings = h[5] > 0;
  c.vocab_size = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.max_seq_len = h[6];
  c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;  // hard-coded in llama2.c's run.c
  c.rope_layout = RopeLayout::kInterleaved;
  KVSTREAM_RETURN_IF_ERROR(ValidateConfig(c, path));
  if (c.head_dim * c.n_heads != c.dim) {
    return Status::CorruptData(path + ": dim = " + std::to_string(c.dim) + " is not a multiple of n_heads = " + std::to_string(c.n_heads));
  }
  const uint64_t dim = c.dim, hidden = c.hidden_dim, L = c.n_layers, kv = c.kv_dim(), vocab = c.vocab_size;
  const uint64_t floats = vocab * dim + L * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) + dim +
                          static_cast<uint64_t>(c.max_seq_len) * c.head_dim + (c.tied_embeddings ? 0 : vocab * dim);
  if (floats * 4 != r.remaining()) {
    return Status::CorruptData(path + ": file size " + std::to_string(bytes.size()) + " bytes, the header implies " +
                               std::to_string(28 + floats * 4) + " (truncated, or not a legacy v0 llama2.c checkpoint)");
  }
  auto take = [&](uint64_t n, const char* field) -> Result<std::vector<float>> {
    KVSTREAM_ASSIGN_OR_RETURN(const uint8_t* p, r.Take(n * 4, field));
    std::vector<float> v(n);
    std::memcpy(v.data(), p, n * 4);
    return v;
  };
  // Per-layer tensors are stored tensor by tensor across layers: all rms_att, then all wq, ...
  auto take_layers = [&](uint64_t per_layer, std::vector<float> LayerWeights::*member, const char* field) -> Status {
    for (uint64_t l = 0; l < L; ++l) {
      KVSTREAM_ASSIGN_OR_RETURN(m.weights.layers[l].*member, take(per_layer, field));
    }
    return Status::Ok();
  };
  LlamaWeights& w = m.weights;
  w.layers.resize(L);
  KVSTREAM_ASSIGN_OR_RETURN(w.token_embedding, take(vocab * dim, "token_embedding_table"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(dim, &LayerWeights::attn_norm, "rms_att_weight"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(dim * dim, &LayerWeights::wq, "wq"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(kv * dim, &LayerWeights::wk, "wk"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(kv * dim, &LayerWeights::wv, "wv"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(dim * dim, &LayerWeights::wo, "wo"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(dim, &LayerWeights::ffn_norm, "rms_ffn_weight"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(hidden * dim, &LayerWeights::w_gate, "w1"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(dim * hidden, &LayerWeights::w_down, "w2"));
  KVSTREAM_RETURN_IF_ERROR(take_layers(hidden * dim, &LayerWeights::w_up, "w3"));
  KVSTREAM_ASSIGN_OR_RETURN(w.final_norm, take(dim, "rms_final_weight"));
  KVSTREAM_RETURN_IF_ERROR(r.Take(static_cast<uint64_t>(c.max_seq_len) * c.head_dim * 4, "freq_cis_real/freq_cis_imag").status());
  if (!c.tied_embeddings) {
    KVSTREAM_ASSIGN_OR_RETURN(w.output, take(vocab * dim, "wcls"));
  }

  std::string tok = tokenizer_path;
  if (tok.empty()) {
    const std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/'));
    for (const std::string& cand : {dir + "/tokenizer.bin", dir + "/tok" + std::to_string(c.vocab_size) + ".bin"}) {
      if (IsFile(cand)) {
        tok = cand;
        break;
      }
    }
    if (tok.empty()) {
      return Status::NotFound(path + ": no tokenizer found beside it (looked for tokenizer.bin and tok" +
                              std::to_string(c.vocab_size) + ".bin); pass --tokenizer PATH");
    }
  }
  KVSTREAM_ASSIGN_OR_RETURN(m.tokenizer, LoadLlama2cTokenizer(tok, c.vocab_size));
  return m;
}

}  // namespace kvstream::model
