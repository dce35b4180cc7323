// GGUF tensor types and tensor mapping, on a GGUF written here from the real stories260K weights:
//  - the same fp32 weights through GGUF and through the llama2.c loader give identical logits;
//  - F16, Q8_0, Q4_0 and Q4_1 tensors load to exactly the values the ggml block formulas give, so a
//    quantized file and an F32 file holding those values give identical logits.
// SmolLM2 itself only exercises F32, Q8_0 and Q4_1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kvstream/model.h"
#include "model/loaders.h"
#include "model/unicode.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

enum Type : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 8 };

struct Out {
  std::vector<uint8_t> b;
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void F32(float v) { Raw(&v, 4); }
  void Str(const std::string& s) {
    U64(s.size());
    Raw(s.data(), s.size());
  }
  void Raw(const void* p, size_t n) { b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n); }
};

// Encodes fp32 values as ggml `type` blocks; `expected` receives what a correct decoder must produce.
std::vector<uint8_t> Encode(const std::vector<float>& x, Type type, std::vector<float>* expected) {
  Out o;
  expected->assign(x.size(), 0.0f);
  if (type == kF32) {
    o.Raw(x.data(), x.size() * 4);
    *expected = x;
    return o.b;
  }
  if (type == kF16) {
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t h = FloatToHalf(x[i]);
      o.Raw(&h, 2);
      (*expected)[i] = HalfToFloat(h);
    }
    return o.b;
  }
  for (size_t b0 = 0; b0 < x.size(); b0 += 32) {
    const float* v = x.data() + b0;
    float* e = expected->data() + b0;
    float lo = v[0], hi = v[0], amax = 0;
    for (int j = 0; j < 32; ++j) {
      lo = std::min(lo, v[j]);
      hi = std::max(hi, v[j]);
      amax = std::max(amax, std::fabs(v[j]));
    }
    if (type == kQ8_0) {
      const uint16_t d = FloatToHalf(amax / 127.0f);
      o.Raw(&d, 2);
      for (int j = 0; j < 32; ++j) {
        const float df = HalfToFloat(d);
        const int8_t q = static_cast<int8_t>(df > 0 ? std::clamp(std::lround(v[j] / df), -127L, 127L) : 0);
        o.Raw(&q, 1);
        e[j] = q * df;
      }
    } else {
      const bool with_min = type == kQ4_1;
      const uint16_t d = FloatToHalf(with_min ? (hi - lo) / 15.0f : amax / 7.0f);
      const uint16_t m = FloatToHalf(lo);
      const float df = HalfToFloat(d), mf = with_min ? HalfToFloat(m) : 0.0f;
      o.Raw(&d, 2);
      if (with_min) o.Raw(&m, 2);
      uint8_t qs[16];
      for (int j = 0; j < 16; ++j) {
        auto quant = [&](float val) {
          const long q = df > 0 ? std::lround((val - mf) / df) + (with_min ? 0 : 8) : 8;
          return static_cast<uint8_t>(std::clamp(q, 0L, 15L));
        };
        const uint8_t a = quant(v[j]), c = quant(v[j + 16]);
        qs[j] = static_cast<uint8_t>(a | (c << 4));
        const int bias = with_min ? 0 : 8;
        e[j] = (a - bias) * df + mf;
        e[j + 16] = (c - bias) * df + mf;
      }
      o.Raw(qs, 16);
    }
  }
  return o.b;
}

struct Tensor {
  std::string name;
  std::vector<uint64_t> dims;
  Type type;
  const std::vector<float>* data;
};

// Writes a GGUF v3 llama file for `m` with each tensor in its given type; returns the dequantized
// weights a correct loader must see.
model::LlamaWeights WriteGguf(const std::string& path, const model::LoadedModel& m, bool quantize) {
  const ModelConfig& c = m.config;
  const uint64_t dim = c.dim, hid = c.hidden_dim, kv = c.kv_dim(), vocab = c.vocab_size;
  std::vector<Tensor> ts;
  auto pick = [&](Type t) { return quantize ? t : kF32; };
  ts.push_back({"token_embd.weight", {dim, vocab}, pick(kF16), &m.weights.token_embedding});
  ts.push_back({"output_norm.weight", {dim}, kF32, &m.weights.final_norm});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const model::LayerWeights& L = m.weights.layers[l];
    ts.push_back({p + "attn_norm.weight", {dim}, kF32, &L.attn_norm});
    ts.push_back({p + "attn_q.weight", {dim, dim}, pick(kQ4_0), &L.wq});
    ts.push_back({p + "attn_k.weight", {dim, kv}, pick(kQ4_1), &L.wk});
    ts.push_back({p + "attn_v.weight", {dim, kv}, pick(kQ8_0), &L.wv});
    ts.push_back({p + "attn_output.weight", {dim, dim}, pick(kQ8_0), &L.wo});
    ts.push_back({p + "ffn_norm.weight", {dim}, kF32, &L.ffn_norm});
    ts.push_back({p + "ffn_gate.weight", {dim, hid}, pick(kQ4_1), &L.w_gate});
    ts.push_back({p + "ffn_up.weight", {dim, hid}, pick(kQ4_0), &L.w_up});
    ts.push_back({p + "ffn_down.weight", {hid, dim}, pick(kF16), &L.w_down});  // ne0 = 172: no 32-blocks
  }
  Out o;
  o.U32(0x46554747u);
  o.U32(3);
  o.U64(ts.size());
  o.U64(12);
  auto kv_u32 = [&](const std::string& k, uint32_t v) { o.Str(k); o.U32(4); o.U32(v); };
  auto kv_f32 = [&](const std::string& k, float v) { o.Str(k); o.U32(6); o.F32(v); };
  auto kv_str = [&](const std::string& k, const std::string& v) { o.Str(k); o.U32(8); o.Str(v); };
  kv_str("general.architecture", "llama");
  kv_u32("llama.block_count", c.n_layers);
  kv_u32("llama.context_length", c.max_seq_len);
  kv_u32("llama.embedding_length", c.dim);
  kv_u32("llama.feed_forward_length", c.hidden_dim);
  kv_u32("llama.attention.head_count", c.n_heads);
  kv_u32("llama.attention.head_count_kv", c.n_kv_heads);
  kv_f32("llama.rope.freq_base", c.rope_theta);
  kv_f32("llama.attention.layer_norm_rms_epsilon", c.rms_eps);
  kv_str("tokenizer.ggml.model", "gpt2");
  o.Str("tokenizer.ggml.tokens");  // the 256 byte tokens and no merges: a valid byte-level vocabulary
  o.U32(9);
  o.U32(8);
  o.U64(256);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    model::AppendUtf8(model::ByteToUnicode(static_cast<uint8_t>(b)), ch);
    o.Str(ch);
  }
  o.Str("tokenizer.ggml.merges");
  o.U32(9);
  o.U32(8);
  o.U64(0);

  model::LlamaWeights expected;
  expected.layers.resize(c.n_layers);
  std::vector<std::vector<uint8_t>> blobs;
  std::vector<std::vector<float>> deq(ts.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    blobs.push_back(Encode(*ts[i].data, ts[i].type, &deq[i]));
    o.Str(ts[i].name);
    o.U32(static_cast<uint32_t>(ts[i].dims.size()));
    for (uint64_t d : ts[i].dims) o.U64(d);
    o.U32(ts[i].type);
    o.U64(offset);
    offset += (blobs.back().size() + 31) / 32 * 32;
  }
  while (o.b.size() % 32) o.b.push_back(0);
  for (const auto& blob : blobs) {
    o.Raw(blob.data(), blob.size());
    while (o.b.size() % 32) o.b.push_back(0);
  }
  testing::WriteBytes(path, o.b);
  // Same order as pushed above.
  size_t i = 0;
  expected.token_embedding = deq[i++];
  expected.final_norm = deq[i++];
  for (int l = 0; l < c.n_layers; ++l) {
    model::LayerWeights& L = expected.layers[l];
    for (std::vector<float>* w : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down}) {
      *w = deq[i++];
    }
  }
  return expected;
}

std::vector<float> Logits(const Model& model) {
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 261, 300, 42, 7, 399, 12, 480};
  KvCache cache = KvCache::Allocate(model.config(), static_cast<int>(tokens.size()));
  std::vector<float> logits;
  EXPECT_TRUE(model.Forward(tokens, cache, &logits).ok());
  return logits;
}

TEST(GgufTypes, F32GgufMatchesTheLlama2cCheckpoint) {
  testing::TempDir dir;
  auto ref = model::LoadLlama2c(testing::SharedModel("stories260K"), "");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  WriteGguf(dir.path() + "/f32.gguf", *ref, /*quantize=*/false);
  auto from_bin = Model::Load(testing::SharedModel("stories260K"));
  auto from_gguf = Model::Load(dir.path() + "/f32.gguf");
  ASSERT_TRUE(from_bin.ok() && from_gguf.ok()) << from_gguf.status().ToString();
  EXPECT_EQ((*from_gguf)->config().rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(Logits(**from_bin), Logits(**from_gguf));
}

TEST(GgufTypes, QuantizedTensorsDecodeToTheBlockFormulas) {
  testing::TempDir dir;
  auto ref = model::LoadLlama2c(testing::SharedModel("stories260K"), "");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  model::LoadedModel dequantized;
  dequantized.config = ref->config;
  dequantized.weights = WriteGguf(dir.path() + "/quant.gguf", *ref, /*quantize=*/true);
  WriteGguf(dir.path() + "/dequant.gguf", dequantized, /*quantize=*/false);
  auto quant = Model::Load(dir.path() + "/quant.gguf");
  auto plain = Model::Load(dir.path() + "/dequant.gguf");
  ASSERT_TRUE(quant.ok() && plain.ok()) << quant.status().ToString();
  const std::vector<float> a = Logits(**quant), b = Logits(**plain), orig = Logits(**Model::Load(testing::SharedModel("stories260K")));
  EXPECT_EQ(a, b);
  // And quantization changed something, but not the model's mind much: same argmax at most positions.
  EXPECT_NE(a, orig);
  int agree = 0;
  const int vocab = ref->config.vocab_size, n = static_cast<int>(a.size()) / vocab;
  for (int i = 0; i < n; ++i) {
    agree += std::max_element(a.begin() + i * vocab, a.begin() + (i + 1) * vocab) - (a.begin() + i * vocab) ==
             std::max_element(orig.begin() + i * vocab, orig.begin() + (i + 1) * vocab) - (orig.begin() + i * vocab);
  }
  EXPECT_GE(agree, n / 2);
}

}  // namespace
}  // namespace kvstream
