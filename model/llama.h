// The Llama-family transformer shared by every loader: fp32 weights in one layout, a config check, and
// the Model implementation that runs the forward pass (loaders only translate their file into this).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvstream/model.h"

namespace kvstream::model {

// Matrices are row-major [out][in], as llama2.c, safetensors and GGUF (ne0 = in) store them.
struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> wq;         // [n_heads * head_dim][dim]
  std::vector<float> wk;         // [kv_dim][dim]
  std::vector<float> wv;         // [kv_dim][dim]
  std::vector<float> wo;         // [dim][n_heads * head_dim]
  std::vector<float> ffn_norm;   // [dim]
  std::vector<float> w_gate;     // [hidden_dim][dim]
  std::vector<float> w_up;       // [hidden_dim][dim]
  std::vector<float> w_down;     // [dim][hidden_dim]
};

struct LlamaWeights {
  std::vector<float> token_embedding;  // [vocab][dim]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [dim]
  std::vector<float> output;      // [vocab][dim]; empty when the embeddings are tied
};

// What a loader produces.
struct LoadedModel {
  ModelConfig config;
  LlamaWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Limits that keep a lying header from asking for absurd allocations before sizes are checked.
inline constexpr int kMaxDim = 1 << 16;
inline constexpr int kMaxLayers = 1024;
inline constexpr int kMaxHeads = 1024;
inline constexpr int kMaxVocab = 1 << 21;
inline constexpr int kMaxSeqLen = 1 << 20;

// Checks that a config is internally consistent and within the limits above. `file` names the source.
Status ValidateConfig(const ModelConfig& config, const std::string& file);

// Checks every weight's size against the config.
Status ValidateWeights(const ModelConfig& config, const LlamaWeights& weights, const std::string& file);

// Wraps a validated model. threads > 0 sets the OpenBLAS thread count (process-wide).
Result<std::unique_ptr<Model>> MakeLlamaModel(LoadedModel loaded, int threads);

}  // namespace kvstream::model
