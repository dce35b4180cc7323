// MakeTextRecomputer (kvstream/model.h): a chunk's KV recomputed on top of the earlier KV is the KV of
// one prefill of the whole text, in any destination dtype; views of another model's shape are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "kvstream/text_recomputer.h"

namespace kvstream {
namespace {

constexpr int kTokens = 40;
constexpr int kSplit = 24;  // rows [0, kSplit) come from the prefill, the rest are recomputed

struct Prefilled {
  std::unique_ptr<Model> model;
  std::vector<int32_t> ids;
  KvCache cache;
};

Prefilled Prefill() {
  Prefilled p;
  auto model = Model::Load("stories260K");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return p;
  p.model = std::move(*model);
  const std::vector<int> ids =
      p.model->tokenizer().Encode("Once upon a time there was a little dog who liked to run in the park.", true);
  for (int t = 0; t < kTokens; ++t) p.ids.push_back(ids[static_cast<size_t>(t) % ids.size()]);
  p.cache = KvCache::Allocate(p.model->config(), kTokens);
  EXPECT_TRUE(p.model->Forward(std::vector<int>(p.ids.begin(), p.ids.end()), p.cache, nullptr).ok());
  return p;
}

TEST(TextRecomputer, RecomputedRowsAreThoseOfOnePrefill) {
  Prefilled p = Prefill();
  ASSERT_TRUE(p.model);
  // The destination holds the first rows (fp32, as a receiver would after earlier chunks) and zeros after.
  KvCache dest = KvCache::Allocate(p.model->config(), kTokens);
  dest.tokens = kTokens;
  for (int l = 0; l < dest.layers; ++l) {
    for (int t = 0; t < kSplit; ++t) {
      for (int c = 0; c < dest.kv_dim; ++c) {
        const size_t i = (static_cast<size_t>(l) * dest.capacity + t) * dest.kv_dim + c;
        dest.k[i] = p.cache.k[i];
        dest.v[i] = p.cache.v[i];
      }
    }
  }
  const std::unique_ptr<TextRecomputer> recomputer = MakeTextRecomputer(*p.model);
  const std::vector<int32_t> tail(p.ids.begin() + kSplit, p.ids.end());
  ASSERT_TRUE(recomputer->Recompute(tail, kSplit, dest.keys(), dest.values()).ok());
  double worst = 0;
  for (size_t i = 0; i < dest.k.size(); ++i) {
    worst = std::max({worst, std::fabs(static_cast<double>(dest.k[i]) - p.cache.k[i]),
                      std::fabs(static_cast<double>(dest.v[i]) - p.cache.v[i])});
  }
  // Batched and split prefills sum attention in another order: equal up to fp32 rounding.
  EXPECT_LT(worst, 1e-4);
}

TEST(TextRecomputer, ViewsOfAnotherShapeOrTooFewTokensAreRefused) {
  Prefilled p = Prefill();
  ASSERT_TRUE(p.model);
  const std::unique_ptr<TextRecomputer> recomputer = MakeTextRecomputer(*p.model);
  const int64_t layers = p.cache.layers, channels = p.cache.kv_dim;
  std::vector<float> wide(static_cast<size_t>(layers * kTokens * (channels + 1)));
  const TensorView wrong = TensorView::Dense(wide.data(), DType::kF32, layers, kTokens, channels + 1);
  Status st = recomputer->Recompute({1, 2, 3}, 0, wrong, wrong);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_NE(st.message().find("channels"), std::string::npos) << st.ToString();
  st = recomputer->Recompute({1, 2, 3}, kTokens - 1, p.cache.keys(), p.cache.values());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
}

}  // namespace
}  // namespace kvstream
