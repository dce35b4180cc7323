// Fine rows (docs/format.md, "Fine rows"): the tokens that received the most attention coded at a finer
// level inside a transform or predicted chunk. Each row decodes bit for bit as its own level's chunk
// decodes it (rows are independent in both schemes), every kernel agrees, the options are checked, and
// hostile maps and fine levels, truncations, bit flips and mutations behind valid CRCs are refused or
// decoded without harm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "chunk_crcs.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "test_views.h"
#include "transform_reference.h"

namespace kvstream {
namespace {

using testing::CopyOf;
using testing::Kv2;
using testing::Layout;
using testing::Tensor;

constexpr int kTokens = 160;
constexpr int kSampleTokens = 112;
constexpr double kFraction = 0.25;  // of the context's tokens
constexpr Level kFineLevel = 2;

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

const Profile& PredictedProfile() {
  static const Profile profile = [] {
    auto p = testing::LearnProfile(Kv(), kSampleTokens, /*transform=*/true, /*predict=*/true);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  }();
  return profile;
}

struct Chunk {
  Tensor k, v;
  std::vector<float> importance;
  int64_t t0 = 0;
};

// The threshold that makes kFraction of the whole context's tokens fine (most of them near its end: the
// few queries that see the last tokens attend to them heavily).
float ContextThreshold() {
  const std::vector<float> all = Kv().cache.Importance();
  return FineRowsThreshold(all.data(), static_cast<int64_t>(all.size()), kFraction);
}

// A threshold that makes about half of a chunk's coded rows fine.
float HalfOf(const Chunk& c) {
  std::vector<float> coded(c.importance.begin() + 4, c.importance.end());
  std::nth_element(coded.begin(), coded.begin() + coded.size() / 2, coded.end());
  return coded[coded.size() / 2];
}

Chunk ChunkOf(int64_t t0, int64_t n) {
  const auto& kv = Kv();
  Chunk c{CopyOf(kv.cache.keys(), DType::kF16, Layout::kDense, t0, n),
          CopyOf(kv.cache.values(), DType::kF16, Layout::kDense, t0, n), {}, t0};
  const std::vector<float> all = kv.cache.Importance();
  c.importance.assign(all.begin() + t0, all.begin() + t0 + n);
  return c;
}

// min_importance: EncodeOptions::fine_min_importance (infinity: no fine rows).
Result<std::vector<uint8_t>> Encode(const Chunk& c, QuantScheme scheme, Level level, float min_importance,
                                    bool with_importance = true, Level fine_level = kFineLevel) {
  ChunkInput in;
  in.keys = c.k.view;
  in.values = c.v.view;
  in.token_begin = c.t0;
  in.importance = with_importance ? c.importance.data() : nullptr;
  EncodeOptions eo;
  eo.level = level;
  eo.profile = &PredictedProfile();
  eo.scheme = scheme;
  eo.fine_min_importance = min_importance;
  eo.fine_level = fine_level;
  return EncodeChunk(in, eo);
}

constexpr float kNone = std::numeric_limits<float>::infinity();

std::vector<uint8_t> MustEncode(const Chunk& c, QuantScheme scheme, Level level, float min_importance) {
  auto r = Encode(c, scheme, level, min_importance);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

Kv2 Decode(const std::vector<uint8_t>& bytes) { return testing::DecodeWith(PredictedProfile(), bytes); }

void ExpectRowsEqual(const Kv2& got, const Kv2& want, int64_t t, const char* what) {
  const TensorView& shape = got.k.view;
  for (int64_t l = 0; l < shape.layers(); ++l) {
    for (int64_t c = 0; c < shape.channels(); ++c) {
      ASSERT_EQ(got.k.bits(l, t, c), want.k.bits(l, t, c)) << what << " keys " << l << "," << t << "," << c;
      ASSERT_EQ(got.v.bits(l, t, c), want.v.bits(l, t, c)) << what << " values " << l << "," << t << "," << c;
    }
  }
}

TEST(FineRows, EachRowDecodesAsItsOwnLevelsChunkDoes) {
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    for (int64_t t0 : {0, 64}) {  // with and without sink rows
      SCOPED_TRACE(std::string(SchemeName(scheme)) + " t0 " + std::to_string(t0));
      const Chunk c = ChunkOf(t0, 96);
      const float threshold = ContextThreshold();
      const std::vector<uint8_t> mixed = MustEncode(c, scheme, 4, threshold);
      const std::vector<uint8_t> coarse = MustEncode(c, scheme, 4, kNone);
      const std::vector<uint8_t> fine = MustEncode(c, scheme, kFineLevel, kNone);
      auto info = InspectChunk(mixed.data(), mixed.size());
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      EXPECT_EQ(info->fine_level, kFineLevel);
      ASSERT_EQ(info->fine_rows.size(), 96u);
      // Exactly the coded rows at or above the threshold.
      const int64_t sinks = info->sink_rows;
      for (int64_t t = 0; t < 96; ++t) EXPECT_EQ(info->fine_rows[t], t >= sinks && c.importance[t] >= threshold) << t;
      EXPECT_GT(std::count(info->fine_rows.begin(), info->fine_rows.end(), 1), 0);
      EXPECT_GT(mixed.size(), coarse.size());
      EXPECT_LT(mixed.size(), fine.size());
      const Kv2 got = Decode(mixed), at_coarse = Decode(coarse), at_fine = Decode(fine);
      for (int64_t t = 0; t < 96; ++t) ExpectRowsEqual(got, info->fine_rows[t] ? at_fine : at_coarse, t, "row");
      testing::ExpectEveryKernelDecodesTheSameBits(mixed, got, [](const std::vector<uint8_t>& b) { return Decode(b); });
    }
  }
}

TEST(FineRows, OptionsAreCheckedOrDoNotApply) {
  const Chunk c = ChunkOf(0, 48);
  const float threshold = ContextThreshold();
  auto no_importance = Encode(c, QuantScheme::kPredicted, 4, threshold, /*with_importance=*/false);
  ASSERT_FALSE(no_importance.ok());
  EXPECT_EQ(no_importance.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_importance.status().message().find("importance"), std::string::npos);
  EXPECT_EQ(Encode(c, QuantScheme::kTransform, 4, std::nanf("")).status().code(), StatusCode::kInvalidArgument);
  // Not finer than the level, another scheme, or no row at the threshold: a chunk without fine rows.
  const auto plain = MustEncode(c, QuantScheme::kPredicted, 2, kNone);
  EXPECT_EQ(MustEncode(c, QuantScheme::kPredicted, 2, threshold), plain);
  EXPECT_EQ(*Encode(c, QuantScheme::kChannelUniform, 4, threshold, false), *Encode(c, QuantScheme::kChannelUniform, 4, kNone));
  const float above_all = *std::max_element(c.importance.begin(), c.importance.end()) * 2.0f;
  EXPECT_EQ(MustEncode(c, QuantScheme::kTransform, 4, above_all), MustEncode(c, QuantScheme::kTransform, 4, kNone));
  // Every coded row fine: the fine level's rows under the coarse level's header.
  const auto all = MustEncode(c, QuantScheme::kTransform, 5, -kNone);
  const Kv2 got = Decode(all), want = Decode(MustEncode(c, QuantScheme::kTransform, kFineLevel, kNone));
  for (int64_t t = 0; t < 48; ++t) ExpectRowsEqual(got, want, t, "all fine");
}

TEST(FineRows, ThresholdSelectsTheFractionOfTheMostImportantTokens) {
  const float nan = std::nanf("");
  // Positions 0..3 (stored exactly) are not counted; NaN is the least important.
  const std::vector<float> importance = {100, 100, 100, 100, 5, 1, 9, nan, 3, 7};
  const auto threshold = [&](double fraction) { return FineRowsThreshold(importance.data(), 10, fraction); };
  EXPECT_EQ(threshold(0.5), 5.0f);   // 9, 7, 5
  EXPECT_EQ(threshold(0.17), 9.0f);  // round(1.02) = 1 token
  EXPECT_EQ(threshold(0.05), kNone);  // no token
  EXPECT_EQ(threshold(0.0), kNone);
  EXPECT_EQ(threshold(1.0), -kNone);  // every token, NaN included
  EXPECT_EQ(FineRowsThreshold(importance.data(), 4, 1.0), kNone);  // sinks only
}

// Byte offsets of the fine-rows fields (docs/format.md).
constexpr size_t kFlagsByte = 12, kFineLevelByte = 14, kSinkRowsByte = 13;
size_t MapOffset(const std::vector<uint8_t>& b) {
  uint32_t segments;
  std::memcpy(&segments, b.data() + 28, 4);
  return 64 + 24 * static_cast<size_t>(segments);
}

TEST(FineRows, HostileHeadersAreRefused) {
  const Chunk c = ChunkOf(0, 38);  // a map of 5 bytes, its last 2 bits padding
  const auto good = MustEncode(c, QuantScheme::kPredicted, 4, HalfOf(c));
  ASSERT_EQ(good[kSinkRowsByte], 4);
  ASSERT_TRUE(good[kFlagsByte] & codec::kChunkFlagFineRows);
  struct Case {
    const char* what;
    std::function<void(std::vector<uint8_t>*)> mutate;
    const char* message;
  };
  const Case cases[] = {
      {"fine level not finer", [](auto* b) { (*b)[kFineLevelByte] = 4; }, "fine level"},
      {"fine level 0", [](auto* b) { (*b)[kFineLevelByte] = 0; }, "fine level"},
      {"fine level without the flag", [](auto* b) { (*b)[kFlagsByte] &= ~codec::kChunkFlagFineRows; }, ""},
      {"sink row marked", [](auto* b) { (*b)[MapOffset(*b)] |= 1; }, "sink row"},
      {"padding bit marked", [](auto* b) { (*b)[MapOffset(*b) + 4] |= 0x80; }, "padding"},
      {"empty map", [](auto* b) { std::memset(b->data() + MapOffset(*b), 0, 5); }, "empty"},
      {"flag on channel-uniform", [](auto* b) { (*b)[9] = 1; }, "fine rows"},
  };
  Tensor dk(DType::kF16, c.k.view.layers(), 38, c.k.view.channels(), Layout::kDense), dv = dk;
  DecodeOptions o;
  o.profile = &PredictedProfile();
  for (const Case& tc : cases) {
    std::vector<uint8_t> b = good;
    tc.mutate(&b);
    testing::FixHeaderCrc(&b);
    Status st = DecodeChunk(b.data(), b.size(), o, dk.view, dv.view);
    ASSERT_FALSE(st.ok()) << tc.what;
    EXPECT_NE(st.message().find(tc.message), std::string::npos) << tc.what << ": " << st.ToString();
  }
}

TEST(FineRows, TruncatedAndBitFlippedChunksAreRefused) {
  const auto& kv = Kv();
  const std::vector<float> importance = kv.cache.Importance();
  testing::ExpectTruncatedAndFlippedChunksRefused(
      kv.cache,
      [&](const Tensor& k, const Tensor& v) {
        Chunk c{k, v, std::vector<float>(importance.begin(), importance.begin() + 40), 0};
        return MustEncode(c, QuantScheme::kPredicted, 4, HalfOf(c));
      },
      PredictedProfile());
}

TEST(FineRows, MutationsBehindValidCrcsNeverCrash) {
  const Chunk c = ChunkOf(8, 40);
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    const auto good = MustEncode(c, scheme, 4, HalfOf(c));
    ASSERT_TRUE(good[kFlagsByte] & codec::kChunkFlagFineRows);
    testing::ExpectMutationsBehindValidCrcsDecodeOrFail(good, PredictedProfile(), 11, 200);
  }
}

}  // namespace
}  // namespace kvstream
