// SmolLM2 on real prose (GPL-3, 1024 context tokens, 256 scored): a sane perplexity, fp16 nearly free,
// int8 a small cost. Skips when the model is not cached. Slow (about 10 s of CPU; more under ASan).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "measure/codec_quality.h"
#include "measure/kv_methods.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

TEST(SmolLm2Eval, Gpl3PerplexityAndInt8Cost) {
  const std::string path = testing::SmolLm2Path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 is not cached (run scripts/fetch_model.py smollm2)";
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  if (!in) GTEST_SKIP() << "/usr/share/common-licenses/GPL-3 is missing";
  std::stringstream text;
  text << in.rdbuf();
  LoadOptions options;
  options.threads = 2;
  auto model = Model::Load(path, options);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Tokenizer& tok = (*model)->tokenizer();
  std::vector<int> tokens = tok.Encode(text.str(), tok.adds_bos());
  ASSERT_GT(tokens.size(), 3000u);
  EXPECT_EQ(tok.Decode(tokens), text.str());

  auto meter = QualityMeter::Create(**model, std::move(tokens), QualityOptions{});
  ASSERT_TRUE(meter.ok()) << meter.status().ToString();
  auto fp16 = MeasureCodec(*meter, *MakeKvstreamLevelCodec(nullptr, kLevelFp16), kMethodChunkTokens);
  auto int8 = MeasureCodec(*meter, *MakeKvstreamLevelCodec(nullptr, kLevelInt8), kMethodChunkTokens);
  ASSERT_TRUE(fp16.ok() && int8.ok());
  // Measured 21.93 when this test was written; a 135M model on legal prose.
  EXPECT_TRUE(std::isfinite(fp16->ppl_reference));
  EXPECT_GT(fp16->ppl_reference, 5.0);
  EXPECT_LT(fp16->ppl_reference, 60.0);
  EXPECT_LT(std::fabs(fp16->ppl_delta_pct), 0.1);
  EXPECT_LT(fp16->kl_mean, 1e-5);
  EXPECT_GT(int8->kl_mean, fp16->kl_mean);
  EXPECT_LT(int8->kl_mean, 5e-3);
  EXPECT_LT(std::fabs(int8->ppl_delta_pct), 2.0);
  EXPECT_GE(int8->top1_agreement, 0.95);
}

}  // namespace
}  // namespace kvstream
