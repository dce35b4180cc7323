// measure/ on real KV of the tiny stories260K model: kvstream's levels as KvCodecs, ApplyCodec and
// MeasureCodec, the named methods and per-slice sensitivity.
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "common/half.h"
#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "measure/codec_quality.h"
#include "measure/kv_methods.h"
#include "measure/kvstream_codec.h"
#include "measure/slice_sensitivity.h"

namespace kvstream {
namespace {

constexpr int kContext = 200, kEval = 48, kChunk = 64;

class MeasureTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load("stories260K");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = model->release();
    std::ifstream in("/usr/share/common-licenses/GPL-3");
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<int> tokens = model_->tokenizer().Encode(ss.str(), true);
    ASSERT_GE(tokens.size(), static_cast<size_t>(kContext + kEval + 1));
    tokens.resize(kContext + kEval + 1);
    QualityOptions options;
    options.context_tokens = kContext;
    options.eval_tokens = kEval;
    auto meter = QualityMeter::Create(*model_, tokens, options);
    ASSERT_TRUE(meter.ok()) << meter.status().ToString();
    meter_ = new QualityMeter(std::move(*meter));
  }
  static void TearDownTestSuite() {
    delete meter_;
    delete model_;
  }
  static Model* model_;
  static QualityMeter* meter_;
};
Model* MeasureTest::model_ = nullptr;
QualityMeter* MeasureTest::meter_ = nullptr;

TEST_F(MeasureTest, Fp16LevelRoundsToHalfAndChargesItsHeaders) {
  const auto codec = MakeKvstreamLevelCodec(nullptr, kLevelFp16);
  EXPECT_EQ(codec->name(), "kvstream-fp16");
  KvCache cache = meter_->context_cache();
  auto bits = ApplyCodec(*codec, kChunk, cache);
  ASSERT_TRUE(bits.ok()) << bits.status().ToString();
  EXPECT_GE(*bits, 16.0);
  EXPECT_LT(*bits, 17.0);
  const KvCache& original = meter_->context_cache();
  for (size_t i = 0; i < original.k.size(); i += 97) {
    ASSERT_EQ(cache.k[i], HalfToFloat(FloatToHalf(original.k[i]))) << i;
    ASSERT_EQ(cache.v[i], HalfToFloat(FloatToHalf(original.v[i]))) << i;
  }
  auto report = meter_->Measure(codec->name(), cache, *bits);
  ASSERT_TRUE(report.ok());
  EXPECT_GT(report->top1_agreement, 0.95);
}

TEST_F(MeasureTest, LossyLevelsCostFewerBitsAndMoreQualityTheCoarserTheyAre) {
  double previous_bits = 1e9, previous_kl = -1;
  for (Level level : {kLevelInt8, Level{1}, Level{3}}) {
    const auto codec = MakeKvstreamLevelCodec(nullptr, level);
    auto r = MeasureCodec(*meter_, *codec, kChunk);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->method, codec->name());
    EXPECT_LT(r->bits_per_value, previous_bits) << LevelName(level);
    EXPECT_GE(r->kl_mean, previous_kl) << LevelName(level);
    previous_bits = r->bits_per_value;
    previous_kl = r->kl_mean;
  }
}

TEST_F(MeasureTest, BadArgumentsAreErrorsNotCrashes) {
  const auto codec = MakeKvstreamLevelCodec(nullptr, kLevelInt8);
  KvCache cache = meter_->context_cache();
  EXPECT_EQ(ApplyCodec(*codec, 0, cache).status().code(), StatusCode::kInvalidArgument);
  KvCache shorter = meter_->context_cache();
  shorter.tokens -= 1;
  EXPECT_EQ(meter_->Measure("short", shorter, 8).status().code(), StatusCode::kInvalidArgument);
  // A scheme that needs a profile, without one.
  const auto predicted = MakeKvstreamLevelCodec(nullptr, 2, QuantScheme::kPredicted);
  EXPECT_FALSE(MeasureCodec(*meter_, *predicted, kChunk).ok());
}

TEST(KvMethods, NamesFp16FirstThenInt8ThenEveryLossyLevel) {
  const std::vector<KvMethod>& methods = KvMethods();
  ASSERT_GE(methods.size(), 3u);
  EXPECT_EQ(methods[0].name, "fp16");
  EXPECT_EQ(methods[1].name, "int8");
  EXPECT_EQ(methods[2].name, "kvstream-L1");
  auto all = SelectKvMethods({"all"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), methods.size());
  auto two = SelectKvMethods({"int8", "kvstream-L2"});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((*two)[1]->name, "kvstream-L2");
  auto unknown = SelectKvMethods({"int4"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("int4"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("kvstream-L1"), std::string::npos);
  EXPECT_FALSE(SelectKvMethods({}).ok());
}

TEST_F(MeasureTest, SliceSensitivitiesAreNonNegativeAndAddUpToAboutTheWhole) {
  const Level level = 4;  // coarse, so that every slice's KL is well above rounding
  auto shares = MeasureSliceSensitivity(*meter_, nullptr, QuantScheme::kChannelUniform, level, {}, kChunk);
  ASSERT_TRUE(shares.ok()) << shares.status().ToString();
  ASSERT_EQ(shares->size(), static_cast<size_t>(2 * meter_->context_cache().layers));
  double sum = 0;
  for (double s : *shares) {
    EXPECT_GE(s, 0.0);
    sum += s;
  }
  auto whole = MeasureCodec(*meter_, *MakeKvstreamLevelCodec(nullptr, level), kChunk);
  ASSERT_TRUE(whole.ok());
  ASSERT_GT(whole->kl_mean, 0.0);
  // KL is not additive over slices; on this model the shares stay within a factor of two of the whole.
  EXPECT_GT(sum, 0.5 * whole->kl_mean);
  EXPECT_LT(sum, 2.0 * whole->kl_mean);
}

}  // namespace
}  // namespace kvstream
