// Hugging Face folder loader: config.json (LlamaForCausalLM), model.safetensors (F32/F16/BF16, Llama
// tensor names, lm_head optional when the embeddings are tied) and tokenizer.json. HF checkpoints keep
// q/k in the rotate-half RoPE layout.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>

#include "common/half.h"
#include "model/binary_reader.h"
#include "model/loaders.h"
#include "model/tokenizers.h"

namespace kvstream::model {
namespace {

using json = nlohmann::json;

struct StTensor {
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;
};

Result<json> ReadJson(const std::string& path) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, uint64_t{256} << 20));
  json j = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::CorruptData(path + ": not a valid JSON object");
  return j;
}

Result<int> ConfigInt(const json& cfg, const std::string& path, const char* key, int64_t lo, int64_t hi) {
  if (!cfg.contains(key) || !cfg[key].is_number_integer()) return Status::CorruptData(path + ": " + key + " is missing or not an integer");
  const int64_t v = cfg[key].get<int64_t>();
  if (v < lo || v > hi) {
    return Status::CorruptData(path + ": " + key + " = " + std::to_string(v) + ", expected " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<int>(v);
}

class SafetensorsFile {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    KVSTREAM_ASSIGN_OR_RETURN(bytes_, ReadWholeFile(path));
    ByteReader r(bytes_.data(), bytes_.size(), path);
    KVSTREAM_ASSIGN_OR_RETURN(uint64_t header_len, r.Read<uint64_t>("header length"));
    if (header_len > r.remaining() || header_len > (uint64_t{100} << 20)) {
      return r.Error("header length", std::to_string(header_len) + " exceeds the file (" + std::to_string(r.remaining()) + " bytes left) or 100 MiB");
    }
    KVSTREAM_ASSIGN_OR_RETURN(const uint8_t* hp, r.Take(header_len, "header"));
    json header = json::parse(hp, hp + header_len, nullptr, /*allow_exceptions=*/false);
    if (header.is_discarded() || !header.is_object()) return r.Error("header", "not a valid JSON object");
    data_start_ = r.offset();
    const uint64_t data_len = bytes_.size() - data_start_;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      const json& t = it.value();
      const std::string field = "tensor " + it.key();
      if (!t.is_object() || !t.contains("dtype") || !t["dtype"].is_string() || !t.contains("shape") || !t["shape"].is_array() ||
          !t.contains("data_offsets") || !t["data_offsets"].is_array() || t["data_offsets"].size() != 2) {
        return r.Error(field, "expected {dtype, shape, data_offsets}");
      }
      StTensor st;
      st.dtype = t["dtype"].get<std::string>();
      uint64_t elements = 1;
      for (const json& d : t["shape"]) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > (uint64_t{1} << 40)) return r.Error(field + " shape", "expected non-negative integers");
        st.shape.push_back(d.get<uint64_t>());
        elements *= st.shape.back();
        if (elements > (uint64_t{1} << 40)) return r.Error(field + " shape", "too many elements");
      }
      for (int k = 0; k < 2; ++k) {
        if (!t["data_offsets"][k].is_number_unsigned()) return r.Error(field + " data_offsets", "expected non-negative integers");
      }
      st.begin = t["data_offsets"][0].get<uint64_t>();
      st.end = t["data_offsets"][1].get<uint64_t>();
      if (st.begin > st.end || st.end > data_len) {
        return r.Error(field + " data_offsets", "[" + std::to_string(st.begin) + ", " + std::to_string(st.end) +
                                                     ") outside the data section of " + std::to_string(data_len) + " bytes");
      }
      const uint64_t esize = st.dtype == "F32" ? 4 : (st.dtype == "F16" || st.dtype == "BF16") ? 2 : 0;
      if (esize != 0 && elements * esize != st.end - st.begin) {
        return r.Error(field, std::to_string(st.end - st.begin) + " bytes for " + std::to_string(elements) + " " + st.dtype + " elements");
      }
      tensors_[it.key()] = st;
    }
    return Status::Ok();
  }

  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }

  Result<std::vector<float>> Tensor(const std::string& name, const std::vector<uint64_t>& shape) const {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return Status::CorruptData(path_ + ": tensor " + name + " is missing");
    const StTensor& t = it->second;
    if (t.shape != shape) {
      std::string have, want;
      for (uint64_t d : t.shape) have += std::to_string(d) + " ";
      for (uint64_t d : shape) want += std::to_string(d) + " ";
      return Status::CorruptData(path_ + ": tensor " + name + " has shape [ " + have + "], expected [ " + want + "]");
    }
    const uint8_t* p = bytes_.data() + data_start_ + t.begin;
    const uint64_t bytes = t.end - t.begin;
    std::vector<float> out;
    if (t.dtype == "F32") {
      out.resize(bytes / 4);
      std::memcpy(out.data(), p, bytes);
    } else if (t.dtype == "F16" || t.dtype == "BF16") {
      out.resize(bytes / 2);
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = t.dtype == "F16" ? HalfToFloat(h) : BFloat16ToFloat(h);
      }
    } else {
      return Status::Unsupported(path_ + ": tensor " + name + " has dtype " + t.dtype + ", supported: F32, F16, BF16");
    }
    return out;
  }

 private:
  std::string path_;
  std::vector<uint8_t> bytes_;
  uint64_t data_start_ = 0;
  std::map<std::string, StTensor> tensors_;
};

}  // namespace

Result<LoadedModel> LoadSafetensors(const std::string& folder, const std::string& tokenizer_path) {
  const std::string config_path = folder + "/config.json";
  KVSTREAM_ASSIGN_OR_RETURN(json cfg, ReadJson(config_path));
  if (cfg.contains("model_type") && cfg["model_type"] != "llama") {
    return Status::Unsupported(config_path + ": model_type = " + cfg["model_type"].dump() + ", only llama is supported");
  }
  if (cfg.contains("rope_scaling") && !cfg["rope_scaling"].is_null()) {
    return Status::Unsupported(config_path + ": rope_scaling = " + cfg["rope_scaling"].dump() + ", only unscaled RoPE is supported");
  }
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = folder.substr(folder.find_last_of('/') + 1);
  KVSTREAM_ASSIGN_OR_RETURN(c.dim, ConfigInt(cfg, config_path, "hidden_size", 1, kMaxDim));
  KVSTREAM_ASSIGN_OR_RETURN(c.hidden_dim, ConfigInt(cfg, config_path, "intermediate_size", 1, 8 * kMaxDim));
  KVSTREAM_ASSIGN_OR_RETURN(c.n_layers, ConfigInt(cfg, config_path, "num_hidden_layers", 1, kMaxLayers));
  KVSTREAM_ASSIGN_OR_RETURN(c.n_heads, ConfigInt(cfg, config_path, "num_attention_heads", 1, kMaxHeads));
  c.n_kv_heads = c.n_heads;
  if (cfg.contains("num_key_value_heads")) {
    KVSTREAM_ASSIGN_OR_RETURN(c.n_kv_heads, ConfigInt(cfg, config_path, "num_key_value_heads", 1, kMaxHeads));
  }
  c.head_dim = c.dim / c.n_heads;
  if (cfg.contains("head_dim") && !cfg["head_dim"].is_null()) {
    KVSTREAM_ASSIGN_OR_RETURN(c.head_dim, ConfigInt(cfg, config_path, "head_dim", 2, kMaxDim));
  }
  KVSTREAM_ASSIGN_OR_RETURN(c.vocab_size, ConfigInt(cfg, config_path, "vocab_size", 1, kMaxVocab));
  KVSTREAM_ASSIGN_OR_RETURN(c.max_seq_len, ConfigInt(cfg, config_path, "max_position_embeddings", 1, kMaxSeqLen));
  const double theta = cfg.contains("rope_theta") && cfg["rope_theta"].is_number() ? cfg["rope_theta"].get<double>() : 10000.0;
  const double eps = cfg.contains("rms_norm_eps") && cfg["rms_norm_eps"].is_number() ? cfg["rms_norm_eps"].get<double>() : 1e-6;
  if (!(theta > 0.0 && theta <= 1e12)) return Status::CorruptData(config_path + ": rope_theta = " + std::to_string(theta) + ", expected (0, 1e12]");
  if (!(eps > 0.0 && eps < 1.0)) return Status::CorruptData(config_path + ": rms_norm_eps = " + std::to_string(eps) + ", expected (0, 1)");
  c.rope_theta = static_cast<float>(theta);
  c.rms_eps = static_cast<float>(eps);
  c.tied_embeddings = !(cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean() &&
                        !cfg["tie_word_embeddings"].get<bool>());
  c.rope_layout = RopeLayout::kRotateHalf;
  KVSTREAM_RETURN_IF_ERROR(ValidateConfig(c, config_path));

  SafetensorsFile st;
  const std::string weights_path = folder + "/model.safetensors";
  KVSTREAM_RETURN_IF_ERROR(st.Open(weights_path));
  const uint64_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim(), qd = static_cast<uint64_t>(c.n_heads) * c.head_dim,
                 vocab = c.vocab_size;
  LlamaWeights& w = m.weights;
  // Tied checkpoints may store either name (TinyStories-656K keeps only lm_head.weight).
  const char* emb_name = st.Has("model.embed_tokens.weight") ? "model.embed_tokens.weight" : "lm_head.weight";
  KVSTREAM_ASSIGN_OR_RETURN(w.token_embedding, st.Tensor(emb_name, {vocab, dim}));
  KVSTREAM_ASSIGN_OR_RETURN(w.final_norm, st.Tensor("model.norm.weight", {dim}));
  if (!c.tied_embeddings) {
    KVSTREAM_ASSIGN_OR_RETURN(w.output, st.Tensor("lm_head.weight", {vocab, dim}));
  }
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    KVSTREAM_ASSIGN_OR_RETURN(L.attn_norm, st.Tensor(p + "input_layernorm.weight", {dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wq, st.Tensor(p + "self_attn.q_proj.weight", {qd, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wk, st.Tensor(p + "self_attn.k_proj.weight", {kv, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wv, st.Tensor(p + "self_attn.v_proj.weight", {kv, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wo, st.Tensor(p + "self_attn.o_proj.weight", {dim, qd}));
    KVSTREAM_ASSIGN_OR_RETURN(L.ffn_norm, st.Tensor(p + "post_attention_layernorm.weight", {dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_gate, st.Tensor(p + "mlp.gate_proj.weight", {hidden, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_up, st.Tensor(p + "mlp.up_proj.weight", {hidden, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_down, st.Tensor(p + "mlp.down_proj.weight", {dim, hidden}));
  }
  auto token_id = [&](const char* key) {
    if (!cfg.contains(key) || !cfg[key].is_number_integer()) return -1;
    const int64_t v = cfg[key].get<int64_t>();
    return v >= 0 && v < c.vocab_size ? static_cast<int>(v) : -1;
  };
  const int bos = token_id("bos_token_id"), eos = token_id("eos_token_id");
  KVSTREAM_ASSIGN_OR_RETURN(m.tokenizer, LoadHfTokenizer(tokenizer_path.empty() ? folder + "/tokenizer.json" : tokenizer_path, bos, eos));
  return m;
}

}  // namespace kvstream::model
