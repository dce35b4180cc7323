// The rate-distortion study's schemes on real KV (stories260K): what they charge, and that the closed-loop
// predictor reconstructs within its quantiser's distortion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "lab/rd_schemes.h"
#include "common/half.h"
#include "kvstream/model.h"

namespace kvstream::lab {
namespace {

constexpr int kTokens = 400;  // two 256-token blocks in one chunk

class RdSchemesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load("stories260K");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    std::ifstream in("/usr/share/common-licenses/GPL-3");
    std::stringstream ss;
    ss << in.rdbuf();
    std::vector<int> tokens = (*model)->tokenizer().Encode(ss.str(), true);
    ASSERT_GE(tokens.size(), static_cast<size_t>(kTokens));
    tokens.resize(kTokens);
    config_ = new ModelConfig((*model)->config());
    cache_ = new KvCache(KvCache::Allocate(*config_, kTokens));
    ASSERT_TRUE((*model)->Forward(tokens, *cache_, nullptr).ok());
  }
  static void TearDownTestSuite() {
    delete cache_;
    cache_ = nullptr;
    delete config_;
    config_ = nullptr;
  }
  // A scheme calibrated on the cache and applied to a copy of it, with its tables learned on the cache.
  struct Applied {
    KvCache copy;
    double bits = 0;
    RdRate rate;
  };
  static Applied CalibrateAndApply(RdScheme& scheme) {
    Applied out;
    EXPECT_TRUE(scheme.Calibrate(*cache_).ok());
    auto tables = RdTables::Learn(scheme, *cache_);
    EXPECT_TRUE(tables.ok());
    if (!tables.ok()) return out;
    RdTransform t(scheme, *tables);
    out.copy = *cache_;
    auto bits = t.Apply(out.copy);
    EXPECT_TRUE(bits.ok());
    out.bits = bits.ok() ? *bits : 0;
    out.rate = t.last_rate();
    return out;
  }
  static KvCache* cache_;
  static ModelConfig* config_;
};
KvCache* RdSchemesTest::cache_ = nullptr;
ModelConfig* RdSchemesTest::config_ = nullptr;

TEST_F(RdSchemesTest, ChannelUniformSchemeChargesItsTablesAndSinks) {
  ChannelUniformOptions o;
  o.key_alpha = o.value_alpha = 0.5;
  o.channel_exponent = 0.0;
  o.sink_tokens = 2;
  auto scheme = MakeChannelUniformScheme(o);
  const Applied a = CalibrateAndApply(*scheme);
  ASSERT_EQ(a.copy.k.size(), cache_->k.size());
  // Calibrated on the same cache, the table cost is close to (and above) the self entropy.
  EXPECT_GT(a.bits, a.rate.self_entropy_per_value);
  EXPECT_LT(a.bits, a.rate.self_entropy_per_value + 0.2);
  EXPECT_GT(a.bits, 0.5);
  EXPECT_LT(a.bits, 8.0);
  // Sink positions pass through fp16 and are charged 16 bits.
  EXPECT_NEAR(a.rate.side_bits_per_value, 16.0 * 2 / kTokens, 1e-9);
  EXPECT_EQ(a.copy.k[0], HalfToFloat(FloatToHalf(cache_->k[0])));
}

// Closed loop: each slice is predicted from the reconstruction a decoder would hold, so its error is only
// its own residual's quantisation (kept components) and water-filling (dropped ones): at most about
// step^2 / 12 per component, whatever the prediction. An open-loop predictor, or one applied to the wrong
// rows, would add the inputs' errors on top, layer after layer.
TEST_F(RdSchemesTest, PredictiveSchemeReconstructsWithinTheQuantiserDistortion) {
  const int L = cache_->layers, C = cache_->kv_dim, T = cache_->tokens, sinks = 4;
  struct Variant {
    bool previous, from_keys;
    int rank;
  };
  for (const Variant& variant : {Variant{true, true, 0}, Variant{true, false, 0}, Variant{false, true, 0}, Variant{true, true, 4}}) {
    const auto [previous, from_keys, rank] = variant;
    SCOPED_TRACE(std::string("previous layer ") + (previous ? "yes" : "no") + ", values from keys " + (from_keys ? "yes" : "no") +
                 ", rank " + std::to_string(rank));
    PredictiveCodingOptions o;
    o.rank = rank;
    o.key_alpha = o.value_alpha = 0.2;
    o.sink_tokens = sinks;
    o.from_previous_layer = previous;
    o.values_from_keys = from_keys;
    o.rope.head_dim = config_->head_dim;
    o.rope.rope_theta = config_->rope_theta;
    o.rope.rope_layout = config_->rope_layout;
    auto scheme = MakePredictiveCodingScheme(o);
    const Applied a = CalibrateAndApply(*scheme);
    ASSERT_EQ(a.copy.k.size(), cache_->k.size());
    EXPECT_GT(a.bits, a.rate.self_entropy_per_value);
    EXPECT_NEAR(a.rate.side_bits_per_value, 16.0 * sinks / kTokens, 1e-9);
    for (int kv = 0; kv < 2; ++kv) {
      const std::vector<float>& x = kv == 0 ? cache_->k : cache_->v;
      const std::vector<float>& y = kv == 0 ? a.copy.k : a.copy.v;
      for (int l = 0; l < L; ++l) {
        std::vector<double> s1(static_cast<size_t>(C), 0), s2(static_cast<size_t>(C), 0);
        double error = 0;
        for (int tok = 0; tok < T; ++tok) {
          for (int c = 0; c < C; ++c) {
            const size_t i = (static_cast<size_t>(l) * cache_->capacity + tok) * C + c;
            if (tok < sinks) {
              ASSERT_EQ(y[i], HalfToFloat(FloatToHalf(x[i])));
              continue;
            }
            s1[c] += x[i], s2[c] += double{x[i]} * x[i];
            error += (double{y[i]} - x[i]) * (double{y[i]} - x[i]);
          }
        }
        // step = alpha * S, S the RMS over channels of the stored channels' stds (as the scheme computes it).
        const double rows = T - sinks;
        double variance = 0;
        for (int c = 0; c < C; ++c) variance += std::max(0.0, s2[c] / rows - (s1[c] / rows) * (s1[c] / rows));
        const double step = o.key_alpha * std::sqrt(variance / C);
        const double n = rows * C;
        EXPECT_LE(error / n, 1.5 * step * step / 12) << (kv == 0 ? "keys" : "values") << " of layer " << l;
        EXPECT_GT(error / n, 0.0);
      }
    }
  }
}

}  // namespace
}  // namespace kvstream::lab
