// Profiles: learning from real KV, save/load, hashing, chunks that reference them, hash mismatch, and
// defensive parsing of corrupt profile bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "codec/common/crc32c.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "common/half.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "test_views.h"
#include "transform_reference.h"

namespace kvstream {
namespace {

using testing::Layout;
using testing::Tensor;

constexpr int kTokens = 128;
constexpr int kProfileTokens = 80;  // the profile learns from tokens [0, 80); chunks also cover unseen ones

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

Profile BuildProfile(int max_tables = 64, float exponent = 0.0f) {
  const auto& kv = Kv();
  ProfileOptions options;
  options.model = "stories260K";
  options.max_tables = max_tables;
  options.channel_exponent = exponent;
  ProfileBuilder builder(options);
  // Two samples, as `kvstream profile` adds one per context.
  constexpr int kHalf = kProfileTokens / 2;
  EXPECT_TRUE(builder.AddSample(SliceTokens(kv.cache.keys(), 0, kHalf), SliceTokens(kv.cache.values(), 0, kHalf)).ok());
  EXPECT_TRUE(
      builder.AddSample(SliceTokens(kv.cache.keys(), kHalf, kHalf), SliceTokens(kv.cache.values(), kHalf, kHalf)).ok());
  auto p = builder.Build();
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

const Profile& SharedProfile() {
  static const Profile p = BuildProfile();
  return p;
}

TEST(Profile, SaveLoadKeepsBytesAndHash) {
  const Profile& p = SharedProfile();
  EXPECT_EQ(p.model(), "stories260K");
  EXPECT_EQ(p.layers(), Kv().cache.layers);
  EXPECT_EQ(p.channels(), Kv().cache.kv_dim);
  EXPECT_EQ(p.ladder().size(), DefaultLadder(p.layers()).size());
  auto q = Profile::Parse(p.bytes().data(), p.bytes().size());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->bytes(), p.bytes());
  EXPECT_EQ(q->hash(), p.hash());
  EXPECT_NE(p.hash(), 0u);
  EXPECT_TRUE(std::isnan(q->quality()[0].top1_agreement));
  // Deterministic: the same samples give the same profile.
  EXPECT_EQ(BuildProfile().hash(), p.hash());
}

TEST(Profile, QualityIsRecordedAndChangesTheHash) {
  const Profile& p = SharedProfile();
  LevelQuality lq;
  lq.top1_agreement = 0.99;
  lq.ppl_delta_pct = 0.4;
  lq.kl_mean = 0.001;
  lq.bits_per_value = 1.7;
  auto q = p.WithQuality(2, lq);
  ASSERT_TRUE(q.ok());
  EXPECT_NE(q->hash(), p.hash());
  auto parsed = Profile::Parse(q->bytes().data(), q->bytes().size());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->quality()[1].top1_agreement, 0.99);
  EXPECT_EQ(parsed->quality()[1].bits_per_value, 1.7);
  EXPECT_FALSE(p.WithQuality(0, lq).ok());
  EXPECT_FALSE(p.WithQuality(99, lq).ok());
}

TEST(Profile, ChunksWithAProfileReproduceTheQuantizerGridAndAreSmaller) {
  const auto& kv = Kv();
  const Profile& p = SharedProfile();
  const ProfileData& d = DataOf(p);
  ChunkInput in;
  in.keys = SliceTokens(kv.cache.keys(), 64, 64);  // half seen by the profile, half not
  in.values = SliceTokens(kv.cache.values(), 64, 64);
  const int64_t L = in.keys.layers(), T = in.keys.tokens(), C = in.keys.channels();
  for (Level level = 1; level <= static_cast<Level>(p.ladder().size()); ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    EncodeOptions eo;
    eo.level = level;
    eo.profile = &p;
    auto bytes = EncodeChunk(in, eo);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    eo.profile = nullptr;
    auto own = EncodeChunk(in, eo);
    ASSERT_TRUE(own.ok());
    std::printf("level %d: profile %.3f bits/value, in-chunk tables %.3f bits/value\n", level,
                8.0 * bytes->size() / (2.0 * L * T * C), 8.0 * own->size() / (2.0 * L * T * C));
    auto info = InspectChunk(bytes->data(), bytes->size());
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->profile_hash, p.hash());
    EXPECT_FALSE(info->in_chunk_tables);
    Tensor k(DType::kF32, L, T, C, Layout::kDense), v = k;
    DecodeOptions dopt;
    dopt.profile = &p;
    Status st = DecodeChunk(bytes->data(), bytes->size(), dopt, k.view, v.view);
    ASSERT_TRUE(st.ok()) << st.ToString();
    for (int64_t l = 0; l < L; ++l)
      for (int kvi = 0; kvi < 2; ++kvi) {
        const TensorView& src = kvi == 0 ? in.keys : in.values;
        const Tensor& out = kvi == 0 ? k : v;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t c = 0; c < C; ++c) {
            const size_t i = d.Index(static_cast<int>(l), kvi, static_cast<int>(c));
            const float mean = d.means[i], step = d.levels[level - 1].steps[i];
            const float x = LoadAsFloat(src, l, t, c), y = out.at(l, t, c);
            const float q = std::nearbyint((y - mean) / step);
            const float grid = codec::DequantChannelUniform(codec::QToSymbol(static_cast<int>(q)), mean, step);
            if (std::fabs(q) <= 127 && FloatBits(grid) == FloatBits(y)) {
              ASSERT_LE(std::fabs(x - y), 0.5f * step * 1.001f + 1e-6f);
            } else {
              ASSERT_EQ(FloatBits(y), FloatBits(HalfToFloat(FloatToHalf(x))));
            }
          }
      }
  }
}

TEST(Profile, DecodingNeedsTheSameProfile) {
  const auto& kv = Kv();
  const Profile& p = SharedProfile();
  const Profile other = BuildProfile(4);
  ASSERT_NE(other.hash(), p.hash());
  ChunkInput in;
  in.keys = kv.cache.keys();
  in.values = kv.cache.values();
  EncodeOptions eo;
  eo.level = 3;
  eo.profile = &p;
  auto bytes = EncodeChunk(in, eo);
  ASSERT_TRUE(bytes.ok());
  Tensor k(DType::kF32, in.keys.layers(), in.keys.tokens(), in.keys.channels(), Layout::kDense), v = k;
  char want[20], have[20];
  std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(p.hash()));
  std::snprintf(have, sizeof have, "%016llx", static_cast<unsigned long long>(other.hash()));
  Status none = DecodeChunk(bytes->data(), bytes->size(), {}, k.view, v.view);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find(want), std::string::npos) << none.message();
  DecodeOptions dopt;
  dopt.profile = &other;
  Status wrong = DecodeChunk(bytes->data(), bytes->size(), dopt, k.view, v.view);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find(want), std::string::npos) << wrong.message();
  EXPECT_NE(wrong.message().find(have), std::string::npos) << wrong.message();
  // A profile of another shape is refused at encode time.
  in.keys = TensorView::Dense(const_cast<float*>(kv.cache.k.data()), DType::kF32, 1, 4, in.keys.channels());
  in.values = in.keys;
  EXPECT_EQ(EncodeChunk(in, eo).status().code(), StatusCode::kInvalidArgument);
  // Levels beyond the ladder are refused.
  eo.level = static_cast<Level>(p.ladder().size()) + 1;
  EXPECT_EQ(EncodeChunk(in, eo).status().code(), StatusCode::kInvalidArgument);
}

TEST(Profile, ChannelExponentGivesPerChannelSteps) {
  const Profile p = BuildProfile(16, 1.0f);
  const ProfileData& d = DataOf(p);
  int distinct = 0;
  for (int c = 1; c < d.channels; ++c) distinct += d.levels[0].steps[d.Index(0, 0, c)] != d.levels[0].steps[d.Index(0, 0, 0)];
  EXPECT_GT(distinct, 0);
  const ProfileData& flat = DataOf(SharedProfile());
  for (int c = 1; c < flat.channels; ++c) EXPECT_EQ(flat.levels[0].steps[flat.Index(0, 0, c)], flat.levels[0].steps[flat.Index(0, 0, 0)]);
}

TEST(Profile, LadderOfStepsGivesOneRungPerMultiplier) {
  const std::vector<LevelSpec> defaults = DefaultLadder(30);
  std::vector<float> multipliers;
  for (const LevelSpec& s : defaults) multipliers.push_back(s.step_multiplier[0]);
  const std::vector<LevelSpec> same = LadderOfSteps(30, multipliers);
  ASSERT_EQ(same.size(), defaults.size());
  for (size_t i = 0; i < same.size(); ++i) {
    EXPECT_EQ(same[i].level, defaults[i].level);
    EXPECT_EQ(same[i].step_multiplier[0], defaults[i].step_multiplier[0]);
    EXPECT_EQ(same[i].step_multiplier[1], defaults[i].step_multiplier[1]);
  }
  // Rungs in the given order, between and beyond the defaults' steps.
  const std::vector<LevelSpec> custom = LadderOfSteps(30, {0.05f, 0.35f, 0.43f, 0.5f});
  ASSERT_EQ(custom.size(), 4u);
  for (size_t i = 0; i < custom.size(); ++i) EXPECT_EQ(custom[i].level, static_cast<Level>(i + 1));
  EXPECT_EQ(custom[2].step_multiplier[0], 0.43f);
  EXPECT_EQ(custom[2].step_multiplier[1], 0.43f);
  EXPECT_EQ(custom[0].step_multiplier[0], 0.05f);

  // A profile learns and codes with it: each level at its own step.
  const auto& kv = Kv();
  ProfileOptions options;
  options.model = "stories260K";
  options.ladder = LadderOfSteps(kv.cache.layers, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.7f, 1.0f});
  ProfileBuilder builder(options);
  ASSERT_TRUE(builder.AddSample(SliceTokens(kv.cache.keys(), 0, kProfileTokens), SliceTokens(kv.cache.values(), 0, kProfileTokens)).ok());
  auto p = builder.Build();
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->ladder().size(), 7u);
  const ProfileData& d = DataOf(*p);
  for (size_t l = 1; l < d.levels.size(); ++l) {
    EXPECT_FLOAT_EQ(d.levels[l].steps[0] / d.levels[0].steps[0], options.ladder[l].step_multiplier[0] / 0.1f) << l;
  }
}

TEST(Profile, SliceStepScalesEqualiseKlPerBitWithinTheClamps) {
  // Sensitivities with mean 1: a slice 4x as sensitive halves its step, one 4x less doubles it; a slice 20x
  // as sensitive would take 0.22 and one that costs nothing measurable any step: the clamps hold them.
  std::vector<double> sensitivity(32, 0.0);
  sensitivity[0] = 4.0, sensitivity[1] = 0.25, sensitivity[2] = 1.0, sensitivity[3] = 20.0, sensitivity[4] = 6.75;
  const std::vector<float> g = SliceStepScales(sensitivity);
  ASSERT_EQ(g.size(), 32u);
  EXPECT_FLOAT_EQ(g[0], 0.5f);
  EXPECT_FLOAT_EQ(g[1], 2.0f);
  EXPECT_FLOAT_EQ(g[2], 1.0f);
  EXPECT_FLOAT_EQ(g[3], kMinSliceStepScale);
  EXPECT_FLOAT_EQ(g[4], static_cast<float>(std::sqrt(1.0 / 6.75)));
  EXPECT_FLOAT_EQ(g[5], kMaxSliceStepScale);
  for (float x : SliceStepScales({0.0, 0.0})) EXPECT_EQ(x, 1.0f);
  EXPECT_TRUE(SliceStepScales({}).empty());
}

// A profile's transform undoes one model's RoPE: KV rotated otherwise (another base, layout or head size,
// as a dump from another model may be) is refused by name; a profile without a transform takes any.
TEST(Profile, CheckRopeNamesBothRotations) {
  const RopeSpec rope = Kv().model->config().rope();
  auto p = testing::LearnProfile(Kv(), kTokens, /*transform=*/true, /*predict=*/false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->CheckRope(rope, "the dump").ok());
  RopeSpec other = rope;
  other.theta *= 2;
  Status st = p->CheckRope(other, "the dump");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("the dump rotates keys with head_dim " + std::to_string(other.head_dim)), std::string::npos)
      << st.ToString();
  other = rope;
  other.layout = RopeLayout::kRotateHalf;
  EXPECT_NE(p->CheckRope(other, "the dump").message().find("rotate-half"), std::string::npos);
  EXPECT_TRUE(SharedProfile().CheckRope(other, "the dump").ok());
}

TEST(Profile, SliceSensitivityScalesEachSlicesStepInEveryScheme) {
  const auto& kv = Kv();
  const int layers = kv.cache.layers;
  ProfileOptions options;
  options.transform = true;
  options.rope = kv.model->config().rope();
  const auto build = [&](std::vector<double> sensitivity) {
    ProfileBuilder builder(options);
    EXPECT_TRUE(builder.AddSample(kv.cache.keys(), kv.cache.values()).ok());
    builder.SetSliceSensitivity(std::move(sensitivity));
    auto p = builder.Build();
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  };
  const Profile flat = build({});
  std::vector<double> sensitivity(static_cast<size_t>(layers) * 2, 1.0);
  sensitivity[1] = 4.0;  // layer 0's values: the most sensitive slice
  const Profile weighed = build(sensitivity);
  const std::vector<float> g = SliceStepScales(sensitivity);
  ASSERT_LT(g[1], 1.0f);
  ASSERT_GT(g[0], 1.0f);
  const ProfileData &f = DataOf(flat), &w = DataOf(weighed);
  for (size_t i = 0; i < f.levels.size(); ++i) {
    for (int l = 0; l < layers; ++l) {
      for (int kv_index = 0; kv_index < 2; ++kv_index) {
        const size_t slice = static_cast<size_t>(l) * 2 + static_cast<size_t>(kv_index);
        const size_t c = f.Index(l, kv_index, 0);
        EXPECT_FLOAT_EQ(w.levels[i].steps[c], f.levels[i].steps[c] * g[slice]) << "level " << i + 1 << " slice " << slice;
        EXPECT_FLOAT_EQ(w.transform.levels[i].steps[slice], f.transform.levels[i].steps[slice] * g[slice]);
      }
    }
  }
  // A finer step keeps at least as many components.
  EXPECT_GE(w.transform.levels.back().kept[1], f.transform.levels.back().kept[1]);

  ProfileBuilder wrong_size(options);
  ASSERT_TRUE(wrong_size.AddSample(kv.cache.keys(), kv.cache.values()).ok());
  wrong_size.SetSliceSensitivity({1.0, 2.0, 3.0});
  EXPECT_EQ(wrong_size.Build().status().code(), StatusCode::kInvalidArgument);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    ProfileBuilder b(options);
    ASSERT_TRUE(b.AddSample(kv.cache.keys(), kv.cache.values()).ok());
    sensitivity[2] = bad;
    b.SetSliceSensitivity(sensitivity);
    EXPECT_EQ(b.Build().status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

// Rewrites the trailing CRC so that a patched field is what the parser trips on.
void FixProfileCrc(std::vector<uint8_t>* b) {
  const uint32_t crc = codec::Crc32c(b->data(), b->size() - 4);
  std::memcpy(b->data() + b->size() - 4, &crc, 4);
}

TEST(Profile, CorruptBytesAreRefusedWithoutCrashing) {
  const std::vector<uint8_t> good = SharedProfile().bytes();
  for (size_t n = 0; n < good.size(); n += (n < 256 ? 1 : 97)) {
    EXPECT_FALSE(Profile::Parse(good.data(), n).ok()) << "truncated to " << n;
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> b = good;
    const size_t pos = rng() % b.size();
    b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
    auto r = Profile::Parse(b.data(), b.size());
    EXPECT_FALSE(r.ok()) << "bit flip at " << pos;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
  }
  struct Lie {
    size_t offset;
    uint32_t value;
    const char* expect;
  };
  for (const Lie& lie : {Lie{8, 100000, "layers"}, Lie{12, 0, "channels"}, Lie{16, 0, "level count"},
                         Lie{16, 16, "level count"}, Lie{4, 9, "version"}}) {
    std::vector<uint8_t> b = good;
    if (lie.offset == 4) {
      const uint16_t v = static_cast<uint16_t>(lie.value);
      std::memcpy(b.data() + 4, &v, 2);
    } else {
      std::memcpy(b.data() + lie.offset, &lie.value, 4);
    }
    FixProfileCrc(&b);
    auto r = Profile::Parse(b.data(), b.size());
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find(lie.expect), std::string::npos) << r.status().message();
  }
  // Random mutations that keep the CRC valid reach the deeper checks; none may crash.
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> b = good;
    for (int j = 0; j < 4; ++j) b[8 + rng() % (b.size() - 12)] = static_cast<uint8_t>(rng());
    FixProfileCrc(&b);
    (void)Profile::Parse(b.data(), b.size());
  }
  ProfileLimits limits;
  limits.max_bytes = good.size() - 1;
  EXPECT_EQ(Profile::Parse(good.data(), good.size(), limits).status().code(), StatusCode::kResourceExhausted);
}

TEST(Profile, BuilderRefusesBadInput) {
  ProfileBuilder empty({});
  EXPECT_FALSE(empty.Build().ok());
  const auto& kv = Kv();
  ProfileBuilder b({});
  ASSERT_TRUE(b.AddSample(kv.cache.keys(), kv.cache.values()).ok());
  TensorView narrow = kv.cache.keys();
  narrow.shape[2] = 3;
  EXPECT_FALSE(b.AddSample(narrow, narrow).ok());
  ProfileOptions bad_ladder;
  bad_ladder.ladder = DefaultLadder(kv.cache.layers);
  bad_ladder.ladder[0].step_multiplier[1] = 0.0f;
  ProfileBuilder c(bad_ladder);
  ASSERT_TRUE(c.AddSample(kv.cache.keys(), kv.cache.values()).ok());
  EXPECT_FALSE(c.Build().ok());
}

}  // namespace
}  // namespace kvstream
