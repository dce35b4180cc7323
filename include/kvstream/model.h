// kvstream/model.h — the reference LLM engine that produces real KV caches.
//
// A small Llama-family engine (llama2.c, safetensors and GGUF checkpoints) whose job is to give kvstream
// real KV caches and to measure what a codec costs in quality. It is not a serving engine: one sequence,
// fp32 activations, OpenBLAS matrix products. A Model is immutable after Load and safe to share between
// threads; each thread runs its own forward passes with its own KvCache.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/rope.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"
#include "kvstream/text_recomputer.h"

namespace kvstream {

struct ModelConfig {
  std::string name;           // short name or file stem, for reports
  int dim = 0;                // hidden size
  int hidden_dim = 0;         // FFN intermediate size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int vocab_size = 0;
  int max_seq_len = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  bool tied_embeddings = true;

  int kv_dim() const { return n_kv_heads * head_dim; }
  RopeSpec rope() const { return {head_dim, rope_theta, rope_layout}; }
};

// Text <-> token ids. Encode never fails, whatever the bytes: what the vocabulary cannot spell becomes
// byte-fallback tokens or, where the vocabulary lacks those too, the unknown token. Decode of Encode's
// output gives the text back whenever the vocabulary covers it: always for llama2.c vocabularies (byte
// fallback); for SmolLM2 except a few control bytes (0x04, 0x06, 0x13, 0x14, 0x16, 0x1D) and bytes
// invalid in UTF-8; for TinyStories-656K only its 78-character alphabet. Decode drops control tokens
// (BOS, EOS, unknown).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int> Encode(const std::string& text, bool add_bos) const = 0;
  virtual std::string Decode(const std::vector<int>& ids) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 when the vocabulary has none
  virtual int eos_id() const = 0;  // -1 when the vocabulary has none
  // Whether the model was trained with BOS opening every sequence (llama2.c, TinyStories: yes; SmolLM2:
  // no). Callers pass it as Encode's add_bos when tokenizing a document.
  virtual bool adds_bos() const = 0;
};

// A model's KV cache for one sequence: keys and values of every layer, dense fp32,
// [layers][tokens][kv_dim] with kv_dim = n_kv_heads * head_dim; keys are stored after RoPE, as serving
// engines keep them. `tokens` is the number of positions filled; `capacity` the number allocated.
struct KvCache {
  int layers = 0;
  int kv_dim = 0;
  int tokens = 0;
  int capacity = 0;
  std::vector<float> k;  // layers * capacity * kv_dim
  std::vector<float> v;
  // Attention each position has received from the queries run through Forward so far, summed over
  // layers and query heads, and the same sum had every query spread its attention evenly over the
  // positions it sees (capacity entries each; Allocate zeroes them).
  std::vector<double> attention, uniform_attention;

  static KvCache Allocate(const ModelConfig& config, int capacity);
  // Views of the first `tokens` positions (strides cover `capacity`).
  TensorView keys();
  TensorView values();
  TensorView keys() const;
  TensorView values() const;
  // Per position < tokens: attention / uniform_attention, how many times its even share of attention the
  // position received (0 where no query has seen it). Attention concentrates on few tokens (the first,
  // separators, the most recent), whose KV errors cost the most: the codec's fine rows rank tokens by this.
  std::vector<float> Importance() const;
};

struct LoadOptions {
  std::string tokenizer_path;  // overrides the tokenizer found beside or inside the model file
  int threads = 0;             // forward-pass threads; 0 = all cores
};

class Model {
 public:
  virtual ~Model() = default;

  // Loads a model by short name ("stories260K", "tinystories656k", "smollm2") or by path (a .bin
  // llama2.c checkpoint, a .gguf file, or a folder holding model.safetensors + config.json). A
  // truncated, corrupt or unsupported file gives an error naming the file, the field and what was
  // expected.
  static Result<std::unique_ptr<Model>> Load(const std::string& name_or_path, const LoadOptions& options = {});

  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;

  // Runs `tokens` at positions [cache.tokens, cache.tokens + n) as one batch, appending their keys and
  // values to `cache`. If `logits` is non-null it receives n * vocab_size floats, the next-token logits
  // after each input token. Fails if the cache lacks capacity or positions exceed max_seq_len.
  virtual Status Forward(const std::vector<int>& tokens, KvCache& cache, std::vector<float>* logits) const = 0;
};

// What a handshake compares for "same model" (ControlOptions::model_hash): FNV-1a over the architecture
// fields that make two models' KV caches interchangeable; never 0 (0 means "any model").
uint64_t ModelHash(const ModelConfig& config);

// The text level's recompute with this model (ReceiverOptions::text_recomputer): the chunk's tokens are
// prefilled on top of the destination's earlier KV. `model` must outlive the recomputer.
std::unique_ptr<TextRecomputer> MakeTextRecomputer(const Model& model);

// Greedy (temperature 0) decoding: runs `prompt` from an empty cache, then appends the argmax token up
// to `max_new_tokens` times, stopping early at the tokenizer's EOS (when stop_at_eos) or at max_seq_len.
// Returns the new tokens only.
Result<std::vector<int>> GenerateGreedy(const Model& model, const std::vector<int>& prompt, int max_new_tokens,
                                        bool stop_at_eos = true);

// Resolves a model short name or path to the file or folder Load would open, fetching SmolLM2 into the
// cache folder when asked for by name (see docs). Exposed for the CLI and tests.
Result<std::string> ResolveModelPath(const std::string& name_or_path);

}  // namespace kvstream
