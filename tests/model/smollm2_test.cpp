// SmolLM2-135M-Instruct (GGUF, Q4_1/Q8_0): coherent greedy text. Skips when the model is not cached.
#include <gtest/gtest.h>

#include "kvstream/model.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

TEST(SmolLm2, GreedyAnswerIsCoherent) {
  const std::string path = testing::SmolLm2Path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 is not cached (run scripts/fetch_model.py smollm2)";
  LoadOptions options;
  options.threads = 2;
  auto model = Model::Load(path, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_EQ(c.rope_layout, RopeLayout::kInterleaved);

  const Tokenizer& tok = (*model)->tokenizer();
  const std::vector<int> prompt = tok.Encode("The capital of France is", tok.adds_bos());
  auto gen = GenerateGreedy(**model, prompt, 2);
  ASSERT_TRUE(gen.ok()) << gen.status().ToString();
  // Read and checked by hand: " Paris." (tokens 7042 " Paris", 30 ".").
  EXPECT_EQ(tok.Decode(*gen), " Paris.");
}

}  // namespace
}  // namespace kvstream
