// The Llama forward pass: batched prefill and decode over a KvCache, matrix products in OpenBLAS.
//
// Per layer: RMSNorm -> q/k/v projections -> RoPE on q and k -> k, v appended to the cache -> causal
// grouped-query attention -> output projection + residual -> RMSNorm -> SwiGLU FFN + residual. Attention
// runs per head as two sgemm calls over blocks of queries, so a 1024-token prefill is a few hundred
// large matrix products rather than a million dot products.
#include "model/llama.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvstream::model {
namespace {

// C[m][n] = A[m][k] * B[n][k]^T with leading dimensions given (row-major).
void MatMulBt(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc,
              float alpha = 1.0f) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}

// C[m][n] = A[m][k] * B[k][n] (row-major).
void MatMul(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void RmsNorm(const float* x, const float* w, float* out, int rows, int dim, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<size_t>(r) * dim;
    float* o = out + static_cast<size_t>(r) * dim;
    float ss = 0.0f;
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int i = 0; i < dim; ++i) o[i] = w[i] * (xr[i] * scale);
  }
}

// Rotates `heads` heads of each of `rows` rows (row stride `stride`) at positions pos0.. by the angles
// in cos/sin ([rows][head_dim/2]).
void ApplyRope(float* x, int rows, int stride, int heads, int head_dim, RopeLayout layout, const float* cos_t,
               const float* sin_t) {
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    const float* c = cos_t + static_cast<size_t>(r) * half;
    const float* s = sin_t + static_cast<size_t>(r) * half;
    for (int h = 0; h < heads; ++h) {
      float* v = x + static_cast<size_t>(r) * stride + static_cast<size_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const int a = layout == RopeLayout::kInterleaved ? 2 * i : i;
        const int b = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + half;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[i] - x1 * s[i];
        v[b] = x0 * s[i] + x1 * c[i];
      }
    }
  }
}

class LlamaModel final : public Model {
 public:
  explicit LlamaModel(LoadedModel loaded) : m_(std::move(loaded)) {}
  const ModelConfig& config() const override { return m_.config; }
  const Tokenizer& tokenizer() const override { return *m_.tokenizer; }
  Status Forward(const std::vector<int>& tokens, KvCache& cache, std::vector<float>* logits) const override;

 private:
  LoadedModel m_;
};

Status LlamaModel::Forward(const std::vector<int>& tokens, KvCache& cache, std::vector<float>* logits) const {
  const ModelConfig& c = m_.config;
  const int n = static_cast<int>(tokens.size());
  const int dim = c.dim, hd = c.head_dim, kv_dim = c.kv_dim(), q_dim = c.n_heads * c.head_dim;
  if (cache.layers != c.n_layers || cache.kv_dim != kv_dim) {
    return Status::InvalidArgument("Forward: cache shape layers=" + std::to_string(cache.layers) + " kv_dim=" +
                                   std::to_string(cache.kv_dim) + " does not match the model's layers=" +
                                   std::to_string(c.n_layers) + " kv_dim=" + std::to_string(kv_dim));
  }
  const size_t cache_floats = static_cast<size_t>(cache.layers) * cache.capacity * kv_dim;
  if (cache.capacity < 0 || cache.k.size() != cache_floats || cache.v.size() != cache_floats ||
      cache.tokens < 0 || cache.tokens > cache.capacity) {
    return Status::InvalidArgument("Forward: cache buffers do not match its capacity " + std::to_string(cache.capacity) +
                                   " (use KvCache::Allocate)");
  }
  if (n > cache.capacity - cache.tokens) {
    return Status::ResourceExhausted("Forward: " + std::to_string(n) + " tokens at position " +
                                     std::to_string(cache.tokens) + " exceed the cache capacity " +
                                     std::to_string(cache.capacity));
  }
  if (cache.tokens + n > c.max_seq_len) {
    return Status::InvalidArgument("Forward: position " + std::to_string(cache.tokens + n) +
                                   " exceeds the model's max_seq_len " + std::to_string(c.max_seq_len));
  }
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return Status::InvalidArgument("Forward: token id " + std::to_string(tokens[i]) + " at index " +
                                     std::to_string(i) + " outside the vocabulary [0, " +
                                     std::to_string(c.vocab_size) + ")");
    }
  }
  if (logits) logits->clear();
  if (n == 0) return Status::Ok();

  const int p0 = cache.tokens;
  const size_t cap = static_cast<size_t>(cache.capacity);
  if (cache.attention.size() != cap || cache.uniform_attention.size() != cap) {
    cache.attention.assign(cap, 0.0);
    cache.uniform_attention.assign(cap, 0.0);
  }
  double* const received = cache.attention.data();
  std::vector<float> x(static_cast<size_t>(n) * dim), xb(x.size());
  std::vector<float> q(static_cast<size_t>(n) * q_dim), att(q.size());
  std::vector<float> hb(static_cast<size_t>(n) * c.hidden_dim), hb2(hb.size());
  for (int i = 0; i < n; ++i) {
    std::copy_n(m_.weights.token_embedding.data() + static_cast<size_t>(tokens[i]) * dim, dim,
                x.data() + static_cast<size_t>(i) * dim);
  }

  // RoPE angles, computed in float as llama2.c and Hugging Face do, so greedy outputs match theirs.
  const int half = hd / 2;
  std::vector<float> cos_t(static_cast<size_t>(n) * half), sin_t(cos_t.size());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < half; ++j) {
      const float freq = 1.0f / std::pow(c.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hd));
      const float angle = static_cast<float>(p0 + i) * freq;
      cos_t[static_cast<size_t>(i) * half + j] = std::cos(angle);
      sin_t[static_cast<size_t>(i) * half + j] = std::sin(angle);
    }
  }

  constexpr int kQueryBlock = 128;
  const int total = p0 + n;
  std::vector<float> scores(static_cast<size_t>(std::min(n, kQueryBlock)) * total);
  const int group = c.n_heads / c.n_kv_heads;
  const float att_scale = 1.0f / std::sqrt(static_cast<float>(hd));

  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = m_.weights.layers[l];
    float* kc = cache.k.data() + l * cap * kv_dim;
    float* vc = cache.v.data() + l * cap * kv_dim;
    RmsNorm(x.data(), w.attn_norm.data(), xb.data(), n, dim, c.rms_eps);
    MatMulBt(n, q_dim, dim, xb.data(), dim, w.wq.data(), dim, q.data(), q_dim);
    MatMulBt(n, kv_dim, dim, xb.data(), dim, w.wk.data(), dim, kc + p0 * kv_dim, kv_dim);
    MatMulBt(n, kv_dim, dim, xb.data(), dim, w.wv.data(), dim, vc + p0 * kv_dim, kv_dim);
    ApplyRope(q.data(), n, q_dim, c.n_heads, hd, c.rope_layout, cos_t.data(), sin_t.data());
    ApplyRope(kc + p0 * kv_dim, n, kv_dim, c.n_kv_heads, hd, c.rope_layout, cos_t.data(), sin_t.data());

    for (int h = 0; h < c.n_heads; ++h) {
      const int g = h / group;
      for (int i0 = 0; i0 < n; i0 += kQueryBlock) {
        const int rows = std::min(kQueryBlock, n - i0);
        const int keys = p0 + i0 + rows;  // the last query of the block sees keys [0, keys)
        MatMulBt(rows, keys, hd, q.data() + static_cast<size_t>(i0) * q_dim + h * hd, q_dim, kc + g * hd, kv_dim,
                 scores.data(), keys, att_scale);
        for (int r = 0; r < rows; ++r) {
          float* s = scores.data() + static_cast<size_t>(r) * keys;
          const int visible = p0 + i0 + r + 1;
          float mx = -std::numeric_limits<float>::infinity();
          for (int j = 0; j < visible; ++j) mx = std::max(mx, s[j]);
          float sum = 0.0f;
          for (int j = 0; j < visible; ++j) {
            s[j] = std::exp(s[j] - mx);
            sum += s[j];
          }
          const float inv = 1.0f / sum;
          for (int j = 0; j < visible; ++j) {
            s[j] *= inv;
            received[j] += s[j];
          }
          std::fill(s + visible, s + keys, 0.0f);
        }
        MatMul(rows, hd, keys, scores.data(), keys, vc + g * hd, kv_dim,
               att.data() + static_cast<size_t>(i0) * q_dim + h * hd, q_dim);
      }
    }
    MatMulBt(n, dim, q_dim, att.data(), q_dim, w.wo.data(), q_dim, xb.data(), dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] += xb[i];

    RmsNorm(x.data(), w.ffn_norm.data(), xb.data(), n, dim, c.rms_eps);
    MatMulBt(n, c.hidden_dim, dim, xb.data(), dim, w.w_gate.data(), dim, hb.data(), c.hidden_dim);
    MatMulBt(n, c.hidden_dim, dim, xb.data(), dim, w.w_up.data(), dim, hb2.data(), c.hidden_dim);
    for (size_t i = 0; i < hb.size(); ++i) {
      const float g = hb[i];
      hb[i] = g / (1.0f + std::exp(-g)) * hb2[i];
    }
    MatMulBt(n, dim, c.hidden_dim, hb.data(), c.hidden_dim, w.w_down.data(), c.hidden_dim, xb.data(), dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] += xb[i];
  }
  cache.tokens = total;
  // Each query's even share, 1 / visible per position it sees, for every layer and head: a difference
  // array, since a query sees a prefix.
  const double heads = static_cast<double>(c.n_layers) * c.n_heads;
  std::vector<double> share_change(static_cast<size_t>(total) + 1, 0.0);
  for (int i = 0; i < n; ++i) {
    const int visible = p0 + i + 1;
    share_change[0] += heads / visible;
    share_change[static_cast<size_t>(visible)] -= heads / visible;
  }
  double share = 0.0;
  for (int j = 0; j < total; ++j) {
    share += share_change[static_cast<size_t>(j)];
    cache.uniform_attention[static_cast<size_t>(j)] += share;
  }

  if (logits) {
    RmsNorm(x.data(), m_.weights.final_norm.data(), xb.data(), n, dim, c.rms_eps);
    const std::vector<float>& out = m_.weights.output.empty() ? m_.weights.token_embedding : m_.weights.output;
    logits->resize(static_cast<size_t>(n) * c.vocab_size);
    MatMulBt(n, c.vocab_size, dim, xb.data(), dim, out.data(), dim, logits->data(), c.vocab_size);
  }
  return Status::Ok();
}

Status CheckSize(const std::vector<float>& v, size_t expected, const std::string& name, const std::string& file) {
  if (v.size() == expected) return Status::Ok();
  return Status::CorruptData(file + ": tensor " + name + " has " + std::to_string(v.size()) +
                             " values, the config implies " + std::to_string(expected));
}

}  // namespace

Status ValidateConfig(const ModelConfig& c, const std::string& file) {
  auto bad = [&](const char* field, long long value, const std::string& expected) {
    return Status::CorruptData(file + ": " + field + " = " + std::to_string(value) + ", expected " + expected);
  };
  auto in_range = [](long long v, long long hi) { return v >= 1 && v <= hi; };
  if (!in_range(c.dim, kMaxDim)) return bad("dim", c.dim, "1.." + std::to_string(kMaxDim));
  if (!in_range(c.hidden_dim, 8LL * kMaxDim)) return bad("hidden_dim", c.hidden_dim, "1.." + std::to_string(8 * kMaxDim));
  if (!in_range(c.n_layers, kMaxLayers)) return bad("n_layers", c.n_layers, "1.." + std::to_string(kMaxLayers));
  if (!in_range(c.n_heads, kMaxHeads)) return bad("n_heads", c.n_heads, "1.." + std::to_string(kMaxHeads));
  if (!in_range(c.n_kv_heads, c.n_heads) || c.n_heads % c.n_kv_heads != 0) {
    return bad("n_kv_heads", c.n_kv_heads, "a divisor of n_heads = " + std::to_string(c.n_heads));
  }
  if (!in_range(c.head_dim, kMaxDim) || c.head_dim % 2 != 0) return bad("head_dim", c.head_dim, "an even number 2.." + std::to_string(kMaxDim));
  if (static_cast<long long>(c.n_heads) * c.head_dim > 4LL * kMaxDim) return bad("n_heads * head_dim", static_cast<long long>(c.n_heads) * c.head_dim, "at most " + std::to_string(4 * kMaxDim));
  if (!in_range(c.vocab_size, kMaxVocab)) return bad("vocab_size", c.vocab_size, "1.." + std::to_string(kMaxVocab));
  if (!in_range(c.max_seq_len, kMaxSeqLen)) return bad("max_seq_len", c.max_seq_len, "1.." + std::to_string(kMaxSeqLen));
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta)) {
    return Status::CorruptData(file + ": rope_theta = " + std::to_string(c.rope_theta) + ", expected a positive number");
  }
  if (!(c.rms_eps > 0.0f) || !(c.rms_eps < 1.0f)) {
    return Status::CorruptData(file + ": rms_eps = " + std::to_string(c.rms_eps) + ", expected a value in (0, 1)");
  }
  return Status::Ok();
}

Status ValidateWeights(const ModelConfig& c, const LlamaWeights& w, const std::string& file) {
  const size_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim(), qd = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t vocab = c.vocab_size;
  KVSTREAM_RETURN_IF_ERROR(CheckSize(w.token_embedding, vocab * dim, "token_embedding", file));
  KVSTREAM_RETURN_IF_ERROR(CheckSize(w.final_norm, dim, "final_norm", file));
  if (!w.output.empty()) KVSTREAM_RETURN_IF_ERROR(CheckSize(w.output, vocab * dim, "output", file));
  if (w.layers.size() != static_cast<size_t>(c.n_layers)) {
    return Status::CorruptData(file + ": " + std::to_string(w.layers.size()) + " layers of weights, config says " +
                               std::to_string(c.n_layers));
  }
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.attn_norm, dim, p + "attn_norm", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.wq, qd * dim, p + "wq", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.wk, kv * dim, p + "wk", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.wv, kv * dim, p + "wv", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.wo, dim * qd, p + "wo", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.ffn_norm, dim, p + "ffn_norm", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.w_gate, hidden * dim, p + "w_gate", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.w_up, hidden * dim, p + "w_up", file));
    KVSTREAM_RETURN_IF_ERROR(CheckSize(L.w_down, dim * hidden, p + "w_down", file));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Model>> MakeLlamaModel(LoadedModel loaded, int threads) {
  const std::string name = loaded.config.name;
  KVSTREAM_RETURN_IF_ERROR(ValidateConfig(loaded.config, name));
  KVSTREAM_RETURN_IF_ERROR(ValidateWeights(loaded.config, loaded.weights, name));
  if (!loaded.tokenizer) return Status::Internal(name + ": loader produced no tokenizer");
  if (loaded.tokenizer->vocab_size() > loaded.config.vocab_size) {
    return Status::CorruptData(name + ": tokenizer has " + std::to_string(loaded.tokenizer->vocab_size()) +
                               " tokens, the model's vocabulary only " + std::to_string(loaded.config.vocab_size));
  }
  if (threads > 0) openblas_set_num_threads(threads);
  return std::unique_ptr<Model>(new LlamaModel(std::move(loaded)));
}

}  // namespace kvstream::model
