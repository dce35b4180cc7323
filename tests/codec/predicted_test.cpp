// The predicted scheme on real KV: its profile section (round trip, hostile values, the older profile
// version), and whole chunks: the decoder reproduces the normative reconstruction (written out here
// independently) bit for bit under every kernel, the encoder predicted from exactly what the decoder
// holds (every coded component within half a step), chunks decode like one whole context, every dtype
// and stride pattern agrees, and bad input (missing profiles, truncations, bit flips, mutations behind
// valid CRCs) is refused or decoded without harm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "codec/common/container_format.h"
#include "codec/common/crc32c.h"
#include "codec/common/key_rotation.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "common/half.h"
#include "chunk_crcs.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "test_views.h"
#include "transform_reference.h"

namespace kvstream {
namespace {

using testing::CodedSegment;
using testing::CopyOf;
using testing::Kv2;
using testing::Layout;
using testing::Tensor;

constexpr int kTokens = 160;
constexpr int kSampleTokens = 112;  // the profile learns from positions [0, 112); chunks also cover unseen ones

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

Result<Profile> BuildProfile(int sample_tokens, bool transform = true, bool byte_predictors = false) {
  return testing::LearnProfile(Kv(), sample_tokens, transform, /*predict=*/true, byte_predictors);
}

Profile Learned(bool byte_predictors) {
  auto p = BuildProfile(kSampleTokens, /*transform=*/true, byte_predictors);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

const Profile& PredictedProfile() {
  static const Profile profile = Learned(false);
  return profile;
}

// ProfileOptions::byte_predictors: the AMX kernel's byte paths.
const Profile& BytePredictedProfile() {
  static const Profile profile = Learned(true);
  return profile;
}

std::vector<uint8_t> EncodePredicted(const Tensor& k, const Tensor& v, int64_t t0, Level level, EncodeStats* stats = nullptr,
                                     int threads = 1, const Profile& profile = PredictedProfile()) {
  return testing::EncodeWith(profile, QuantScheme::kPredicted, k, v, t0, level, stats, threads);
}

Kv2 Decode(const std::vector<uint8_t>& bytes, DType dtype = DType::kF32, const Profile& profile = PredictedProfile()) {
  return testing::DecodeWith(profile, bytes, dtype);
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// docs/format.md, "Scheme 4", one position through every slice, written out independently of the codec:
// integer inputs by nearbyint (ties to even), int64 sums, each float operation rounded on its own.
class ReferenceDecoder {
 public:
  explicit ReferenceDecoder(const ProfileData& d) : d_(d), z_(static_cast<size_t>(2 * d.layers) * d.channels) {}

  // The prediction of `slice` at this position, from the slices reconstructed so far.
  std::vector<float> Predict(int slice) const {
    const int C = d_.channels;
    const ProfilePrediction& p = d_.prediction;
    std::vector<float> base(p.bias.begin() + slice * C, p.bias.begin() + (slice + 1) * C);
    int inputs[3];
    size_t block = 0;
    const int n = PredictorInputs(slice, inputs, &block);
    for (int b = 0; b < n; ++b, ++block) {
      const int32_t* z = z_.data() + inputs[b] * C;
      for (int c = 0; c < C; ++c) {
        int64_t acc = 0;
        for (int i = 0; i < C; ++i) acc += int64_t{z[i]} * p.weights[(block * C + i) * C + c];
        EXPECT_LT(std::llabs(acc), int64_t{1} << 31);
        const float term = static_cast<float>(acc) * p.weight_scales[block * C + c];
        base[c] = base[c] + term;
      }
    }
    return base;
  }

  // The slice's row from its kept components' symbols (0 = escape, its weight next in *escapes).
  std::vector<float> Reconstruct(int slice, const std::vector<float>& base, const uint8_t* symbols, uint32_t kept, float step,
                                 const float** escapes) {
    const int C = d_.channels;
    const int16_t* basis = d_.ResidualBasis(slice);
    const float scaled_step = step * (1.0f / 16384.0f);
    std::vector<std::pair<uint32_t, float>> escaped;
    for (uint32_t j = 0; j < kept; ++j) {
      if (symbols[j] == 0) escaped.push_back({j, *(*escapes)++});
    }
    std::vector<float> y(static_cast<size_t>(C));
    for (int c = 0; c < C; ++c) {
      int64_t acc = 0;
      for (uint32_t j = 0; j < kept; ++j) {
        if (symbols[j] != 0) acc += static_cast<int64_t>(symbols[j] - 128) * basis[j * C + c];
      }
      const float scaled = static_cast<float>(acc) * scaled_step;
      y[c] = base[c] + scaled;
      for (const auto& [j, w] : escaped) {
        const float term = (w * scaled_step) * static_cast<float>(basis[j * C + c]);
        y[c] = y[c] + term;
      }
    }
    const float* scale = d_.prediction.input_scales.data() + slice * C;
    for (int c = 0; c < C; ++c) {
      const float v = y[c] * scale[c];
      z_[static_cast<size_t>(slice * C + c)] = static_cast<int32_t>(std::clamp(std::nearbyint(v), -2047.0f, 2047.0f));
    }
    return y;
  }

 private:
  const ProfileData& d_;
  std::vector<int32_t> z_;  // [slice][channel] at this position
};

TEST(PredictedProfile, SavesLoadsAndRefusesCorruptSections) {
  const Profile& p = PredictedProfile();
  ASSERT_TRUE(p.Supports(QuantScheme::kTransform));
  ASSERT_TRUE(p.Supports(QuantScheme::kPredicted));
  const ProfileData& d = DataOf(p);
  const int C = p.channels();
  for (const ProfilePredictionLevel& level : d.prediction.levels) {
    for (uint32_t kept : level.kept) EXPECT_LE(kept, static_cast<uint32_t>(C));
  }
  for (float scale : d.prediction.input_scales) {
    int e = 0;
    EXPECT_EQ(std::frexp(scale, &e), 0.5f) << scale;
  }
  auto parsed = Profile::Parse(p.bytes().data(), p.bytes().size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->Supports(QuantScheme::kPredicted));
  EXPECT_EQ(parsed->hash(), p.hash());
  LevelQuality q;
  q.top1_agreement = 0.99;
  auto measured = p.WithQuality(3, q, QuantScheme::kPredicted);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  auto reparsed = Profile::Parse(measured->bytes().data(), measured->bytes().size());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(reparsed->QualityOf(QuantScheme::kPredicted)[2].top1_agreement, 0.99);
  EXPECT_TRUE(std::isnan(reparsed->QualityOf(QuantScheme::kTransform)[2].top1_agreement));

  // Hostile prediction sections, each behind a valid CRC.
  const auto refused = [](ProfileData bad, const std::string& why) {
    bad.Finalize();
    auto r = Profile::Parse(bad.bytes.data(), bad.bytes.size());
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().ToString();
  };
  ProfileData bad = d;
  bad.prediction.input_scales[7] = 3.0f;
  refused(bad, "input scale");
  bad = d;
  bad.prediction.weights[11] = static_cast<int16_t>(codec::MaxPredictorWeight(C) + 1);
  refused(bad, "predictor weight");
  bad = d;
  bad.prediction.bases[5] = -16385;
  refused(bad, "residual basis");
  bad = d;
  bad.prediction.levels[1].kept[3] = static_cast<uint32_t>(C) + 1;
  refused(bad, "kept");
  bad = d;
  bad.prediction.bias[2] = std::numeric_limits<float>::infinity();
  refused(bad, "bias");
  bad = d;
  bad.has_transform = false;  // a prediction needs the transform's rope and steps
  refused(bad, "prediction flag");
  for (size_t cut = 0; cut < p.bytes().size(); cut += 1009) EXPECT_FALSE(Profile::Parse(p.bytes().data(), cut).ok());

  // Only the current version parses: 2 to 4 had the cachegen-token fields in every level (docs/format.md,
  // "Version history"), so a profile of theirs is refused by its version, not misread.
  for (uint16_t version = 2; version < codec::kProfileVersion; ++version) {
    std::vector<uint8_t> bytes(d.bytes.begin(), d.bytes.end() - 4);
    std::memcpy(bytes.data() + 4, &version, 2);
    const uint32_t crc = codec::Crc32c(bytes.data(), bytes.size());
    bytes.insert(bytes.end(), reinterpret_cast<const uint8_t*>(&crc), reinterpret_cast<const uint8_t*>(&crc) + 4);
    auto older = Profile::Parse(bytes.data(), bytes.size());
    ASSERT_FALSE(older.ok()) << "version " << version;
    EXPECT_EQ(older.status().code(), StatusCode::kUnsupported);
    EXPECT_NE(older.status().message().find("unsupported version"), std::string::npos) << older.status().ToString();
  }
}

TEST(PredictedProfile, RecordsTheFineRowsItsQualitiesWereMeasuredWith) {
  const Profile& p = PredictedProfile();
  EXPECT_FALSE(p.measured_fine_rows().has_value()) << "a learned profile measured nothing yet";
  for (const MeasuredFineRows& fine : {MeasuredFineRows{0.08, 2}, MeasuredFineRows{0.0, 0}}) {
    auto recorded = p.WithMeasuredFineRows(fine);
    ASSERT_TRUE(recorded.ok()) << recorded.status().ToString();
    EXPECT_NE(recorded->hash(), p.hash());
    auto parsed = Profile::Parse(recorded->bytes().data(), recorded->bytes().size());
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ASSERT_TRUE(parsed->measured_fine_rows().has_value());
    EXPECT_EQ(parsed->measured_fine_rows()->fraction, fine.fraction);
    EXPECT_EQ(parsed->measured_fine_rows()->level, fine.level);
  }
  const Level levels = static_cast<Level>(p.ladder().size());
  for (const MeasuredFineRows& bad : {MeasuredFineRows{1.5, 2}, MeasuredFineRows{0.08, 0}, MeasuredFineRows{0.08, levels + 1},
                                      MeasuredFineRows{0.0, 2}, MeasuredFineRows{std::nan(""), 0}, MeasuredFineRows{-0.1, 2}}) {
    auto refused = p.WithMeasuredFineRows(bad);
    ASSERT_FALSE(refused.ok()) << bad.fraction << " at " << bad.level;
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    // The same values in the bytes are corrupt data.
    ProfileData data = DataOf(p);
    data.measured_fine_rows = bad;
    data.Finalize();
    auto parsed = Profile::Parse(data.bytes.data(), data.bytes.size());
    if (std::isnan(bad.fraction)) {
      EXPECT_TRUE(parsed.ok()) << "NaN at level 0 is 'not recorded'";
    } else {
      ASSERT_FALSE(parsed.ok()) << bad.fraction << " at " << bad.level;
      EXPECT_EQ(parsed.status().code(), StatusCode::kCorruptData);
      EXPECT_NE(parsed.status().message().find("fine rows"), std::string::npos) << parsed.status().ToString();
    }
  }
}

TEST(PredictedProfile, NeedsTheTransformAndEnoughSamples) {
  auto without_transform = BuildProfile(kSampleTokens, /*transform=*/false);
  ASSERT_FALSE(without_transform.ok());
  EXPECT_EQ(without_transform.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(without_transform.status().message().find("transform"), std::string::npos);
  auto too_few = BuildProfile(20);
  ASSERT_FALSE(too_few.ok());
  EXPECT_EQ(too_few.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_few.status().message().find("positions"), std::string::npos) << too_few.status().ToString();
}

// Every level of `profile` decodes as the reference decoder does, and every kernel encodes and decodes the
// same.
void ExpectTheNormativeReconstruction(const Profile& profile) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  const int64_t L = k.view.layers(), T = k.view.tokens(), C = k.view.channels();
  const ProfileData& d = DataOf(profile);
  const Level levels = static_cast<Level>(profile.ladder().size());
  double previous_bits = 1e9;
  for (Level level = 1; level <= levels; ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    EncodeStats stats;
    const auto bytes = EncodePredicted(k, v, 0, level, &stats, 1, profile);
    auto info = InspectChunk(bytes.data(), bytes.size());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->scheme, QuantScheme::kPredicted);
    EXPECT_EQ(info->sink_rows, 4);
    const Kv2 out = Decode(bytes, DType::kF32, profile);
    // Every segment's symbols, and the reference decoder run position by position through the slices.
    std::vector<CodedSegment> coded;
    std::vector<uint32_t> kept;
    std::vector<float> steps;
    for (const SegmentInfo& seg : info->segments) {
      const int slice = static_cast<int>(seg.layer) * 2 + (seg.tensor == SegmentTensor::kKeys ? 0 : 1);
      kept.push_back(d.prediction.levels[level - 1].kept[slice]);
      steps.push_back(d.transform.levels[level - 1].steps[slice]);
      const auto models = d.prediction.levels[level - 1].bank.ChannelModels(d.Index(slice / 2, slice % 2, 0), kept.back());
      coded.push_back(testing::ReadCodedSegment(bytes, seg, T, info->sink_rows, C, models));
    }
    std::vector<const float*> escapes;
    for (const CodedSegment& c : coded) escapes.push_back(c.escapes.data());
    const codec::RopeTable rope(d.transform.rope, 0, T);
    for (int64_t t = 0; t < T; ++t) {
      if (t < 4) {  // sink rows: exact fp16
        for (int64_t l = 0; l < L; ++l)
          for (int64_t c = 0; c < C; ++c) ASSERT_EQ(FloatBits(out.v.at(l, t, c)), FloatBits(HalfToFloat(FloatToHalf(v.at(l, t, c)))));
        continue;
      }
      ReferenceDecoder reference(d);
      for (int slice = 0; slice < 2 * L; ++slice) {
        const int layer = slice / 2, s = slice % 2;
        const std::vector<float> base = reference.Predict(slice);
        const uint8_t* symbols = coded[slice].symbols.data() + (t - 4) * kept[slice];
        std::vector<float> want = reference.Reconstruct(slice, base, symbols, kept[slice], steps[slice], &escapes[slice]);
        // The encoder quantised the input's residual from this same prediction: each coded component
        // within half a step.
        std::vector<float> input(static_cast<size_t>(C));
        for (int64_t c = 0; c < C; ++c) input[c] = (s == 0 ? k : v).at(layer, t, c);
        if (s == 0) rope.Unrotate(input.data(), t, static_cast<int>(C));
        const int16_t* basis = d.ResidualBasis(slice);
        for (uint32_t j = 0; j < kept[slice]; ++j) {
          if (symbols[j] == 0) continue;
          double w = 0;
          for (int64_t c = 0; c < C; ++c) w += basis[j * C + c] / 16384.0 * (double{input[c]} - base[c]);
          ASSERT_LE(std::fabs(w / steps[slice] - (symbols[j] - 128)), 0.5 + 1e-3) << "slice " << slice << " t " << t << " j " << j;
        }
        if (s == 0) testing::RotateReference(want, t, d.transform.rope);
        const Tensor& dec = s == 0 ? out.k : out.v;
        for (int64_t c = 0; c < C; ++c) {
          ASSERT_EQ(FloatBits(dec.at(layer, t, c)), FloatBits(want[c])) << "slice " << slice << " t " << t << " c " << c;
        }
      }
    }
    for (size_t i = 0; i < coded.size(); ++i) EXPECT_EQ(escapes[i], coded[i].escapes.data() + coded[i].escapes.size());
    // Every kernel encodes the same bytes and decodes the same bits, on one thread or several.
    std::vector<uint8_t> portable_bytes, avx2_bytes, avx512_bytes;
    testing::WithPortableKernels([&] { portable_bytes = EncodePredicted(k, v, 0, level, nullptr, 1, profile); });
    testing::WithKernelsDisabled("KVSTREAM_DISABLE_AVX512", [&] { avx2_bytes = EncodePredicted(k, v, 0, level, nullptr, 1, profile); });
    testing::WithKernelsDisabled("KVSTREAM_DISABLE_AMX", [&] { avx512_bytes = EncodePredicted(k, v, 0, level, nullptr, 1, profile); });
    EXPECT_EQ(portable_bytes, bytes);
    EXPECT_EQ(avx2_bytes, bytes);
    EXPECT_EQ(avx512_bytes, bytes);
    EXPECT_EQ(EncodePredicted(k, v, 0, level, nullptr, 3, profile), bytes);
    testing::ExpectEveryKernelDecodesTheSameBits(bytes, out, [&](const std::vector<uint8_t>& b) { return Decode(b, DType::kF32, profile); });
    testing::ExpectSmallerThanTheLevelBefore(bytes, k.view, "predicted", level, stats.escapes, &previous_bits);
  }
}

TEST(PredictedProfile, BytePredictorsKeepWeightsWithinInt8AtAboutTheSameSize) {
  const ProfileData& bytes = DataOf(BytePredictedProfile());
  const ProfileData& words = DataOf(PredictedProfile());
  for (int16_t w : bytes.prediction.weights) ASSERT_TRUE(w >= -127 && w <= 127) << w;
  // The int16 predictors use the room they have (else the option would change nothing).
  EXPECT_GT(*std::max_element(words.prediction.weights.begin(), words.prediction.weights.end()), 127);
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  // The bound leaves room for the KV itself: the model's OpenBLAS kernels differ between CPUs, and so do the
  // learned predictors (level 4: 1.031 on one Xeon host, below 1.03 on another).
  for (Level level : {Level{2}, Level{4}}) {
    const double coarse = static_cast<double>(EncodePredicted(k, v, 0, level, nullptr, 1, BytePredictedProfile()).size());
    const double fine = static_cast<double>(EncodePredicted(k, v, 0, level).size());
    EXPECT_LT(coarse / fine, 1.05) << "level " << level;
  }
}

TEST(PredictedChunk, DecoderReproducesTheNormativeReconstruction) {
  for (bool byte_predictors : {false, true}) {
    SCOPED_TRACE(byte_predictors ? "byte predictors" : "int16 predictors");
    ExpectTheNormativeReconstruction(byte_predictors ? BytePredictedProfile() : PredictedProfile());
  }
}
TEST(PredictedChunk, ChunksDecodeLikeTheWholeContextWhateverTheInputLayout) {
  testing::ExpectChunksDecodeLikeTheWholeContext(
      Kv().cache, [](const Tensor& k, const Tensor& v, int64_t t0) { return EncodePredicted(k, v, t0, 3); },
      [](const std::vector<uint8_t>& bytes) { return Decode(bytes); });
}

TEST(PredictedChunk, RefusesMissingAndWrongProfiles) {
  const auto& kv = Kv();
  // A profile with the transform but no prediction cannot code it.
  auto transform_only = testing::LearnProfile(kv, kTokens, /*transform=*/true, /*predict=*/false);
  ASSERT_TRUE(transform_only.ok());
  EXPECT_FALSE(transform_only->Supports(QuantScheme::kPredicted));
  EXPECT_TRUE(transform_only->QualityOf(QuantScheme::kPredicted).empty());
  EXPECT_FALSE(transform_only->WithQuality(1, LevelQuality{}, QuantScheme::kPredicted).ok());
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF16, Layout::kDense, 0, 32);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF16, Layout::kDense, 0, 32);
  testing::ExpectSchemeRefusedWithoutItsProfile(kv.cache, QuantScheme::kPredicted, *transform_only,
                                                EncodePredicted(k, v, 0, 2), "predict");
}

TEST(PredictedChunk, TruncatedAndBitFlippedChunksAreRefused) {
  testing::ExpectTruncatedAndFlippedChunksRefused(
      Kv().cache, [](const Tensor& k, const Tensor& v) { return EncodePredicted(k, v, 0, 4); }, PredictedProfile());
}

// Encoder and decoder run two parallel passes each (blocks of positions through every layer, and every
// segment); threads and a caller's pool running tasks in reverse order give the same bytes and bits.
TEST(PredictedChunk, ThreadsAndPoolsGiveIdenticalBytes) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  ChunkInput in;
  in.keys = k.view;
  in.values = v.view;
  EncodeOptions eo;
  eo.level = 2;
  eo.profile = &PredictedProfile();
  eo.scheme = QuantScheme::kPredicted;
  auto one = EncodeChunk(in, eo);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  size_t calls = 0;
  const ParallelFor reverse = [&](size_t n, const std::function<void(size_t)>& task) {
    ++calls;
    for (size_t i = n; i-- > 0;) task(i);  // reverse order: results must not depend on it
  };
  eo.parallel_for = reverse;
  auto pooled = EncodeChunk(in, eo);
  ASSERT_TRUE(pooled.ok()) << pooled.status().ToString();
  EXPECT_EQ(*pooled, *one);
  EXPECT_EQ(calls, 2u);
  const Kv2 want = Decode(*one);
  for (int threads : {1, 3}) {
    Kv2 got{Tensor(DType::kF32, k.view.layers(), k.view.tokens(), k.view.channels(), Layout::kDense), {}};
    got.v = got.k;
    DecodeOptions o;
    o.profile = &PredictedProfile();
    o.threads = threads;
    if (threads == 1) o.parallel_for = reverse;
    ASSERT_TRUE(DecodeChunk(one->data(), one->size(), o, got.k.view, got.v.view).ok());
    EXPECT_EQ(got.k.bytes, want.k.bytes) << threads;
    EXPECT_EQ(got.v.bytes, want.v.bytes) << threads;
  }
  EXPECT_EQ(calls, 4u);
}

// A profile at the format's bounds: every predictor weight at +-MaxPredictorWeight and every input
// saturated at kMaxPredictorInput (a huge bias, unit grids), so every block's int32 sums are
// +-channels x 2047 x MaxPredictorWeight, within one product of 2^31. Nothing overflows (UBSan watches the portable kernel in CI), and every kernel encodes
// and decodes the same bits.
TEST(PredictedChunk, SumsAtTheFormatsBoundsStayExact) {
  ProfileData extreme = DataOf(PredictedProfile());
  const int max_weight = codec::MaxPredictorWeight(extreme.channels);
  const size_t block_size = static_cast<size_t>(extreme.channels) * static_cast<size_t>(extreme.channels);
  ASSERT_LE(int64_t{extreme.channels} * codec::kMaxPredictorInput * max_weight, int64_t{INT32_MAX});
  // Blocks alternate all +max and all -max; every input is +2047 (the bias dwarfs everything else).
  for (size_t i = 0; i < extreme.prediction.weights.size(); ++i) {
    extreme.prediction.weights[i] = static_cast<int16_t>(i / block_size % 2 == 0 ? max_weight : -max_weight);
  }
  std::fill(extreme.prediction.bias.begin(), extreme.prediction.bias.end(), 1e7f);
  std::fill(extreme.prediction.input_scales.begin(), extreme.prediction.input_scales.end(), 1.0f);
  std::fill(extreme.prediction.weight_scales.begin(), extreme.prediction.weight_scales.end(), 1e-9f);
  extreme.Finalize();
  auto profile = Profile::Parse(extreme.bytes.data(), extreme.bytes.size());
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense, 0, 40);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense, 0, 40);
  const auto bytes = testing::EncodeWith(*profile, QuantScheme::kPredicted, k, v, 0, 3);
  std::vector<uint8_t> portable_bytes;
  testing::WithPortableKernels([&] { portable_bytes = testing::EncodeWith(*profile, QuantScheme::kPredicted, k, v, 0, 3); });
  EXPECT_EQ(portable_bytes, bytes);
  const auto decode = [&](const std::vector<uint8_t>& b) { return testing::DecodeWith(*profile, b); };
  testing::ExpectEveryKernelDecodesTheSameBits(bytes, decode(bytes), decode);
}

// Every input dtype and stride pattern codes the same bytes as its dense copy, and every output dtype
// and stride pattern holds the fp32 decode rounded once.
TEST(PredictedChunk, EveryDTypeAndStridePatternAgree) {
  const auto& kv = Kv();
  for (DType in_dt : testing::kAllDTypes) {
    const Tensor dense_k = CopyOf(kv.cache.keys(), in_dt, Layout::kDense, 0, 40);
    const Tensor dense_v = CopyOf(kv.cache.values(), in_dt, Layout::kDense, 0, 40);
    const auto reference = EncodePredicted(dense_k, dense_v, 0, 2);
    const Kv2 want = Decode(reference);
    const TensorView& shape = want.k.view;
    for (Layout layout : testing::kAllLayouts) {
      SCOPED_TRACE(std::string(DTypeName(in_dt)) + " " + testing::LayoutName(layout));
      EXPECT_EQ(EncodePredicted(CopyOf(dense_k.view, in_dt, layout), CopyOf(dense_v.view, in_dt, layout), 0, 2), reference);
      for (DType out_dt : testing::kAllDTypes) {
        Tensor dk(out_dt, shape.layers(), shape.tokens(), shape.channels(), layout), dv = dk;
        DecodeOptions o;
        o.profile = &PredictedProfile();
        ASSERT_TRUE(DecodeChunk(reference.data(), reference.size(), o, dk.view, dv.view).ok());
        Tensor expect(out_dt, 1, 1, 1, Layout::kDense);
        for (int64_t l = 0; l < shape.layers(); ++l)
          for (int64_t t = 0; t < shape.tokens(); ++t)
            for (int64_t c = 0; c < shape.channels(); ++c) {
              StoreFromFloat(expect.view, 0, 0, 0, want.k.at(l, t, c));
              ASSERT_EQ(dk.bits(l, t, c), expect.bits(0, 0, 0)) << DTypeName(out_dt);
              StoreFromFloat(expect.view, 0, 0, 0, want.v.at(l, t, c));
              ASSERT_EQ(dv.bits(l, t, c), expect.bits(0, 0, 0)) << DTypeName(out_dt);
            }
      }
    }
  }
}

// Mutated segments behind valid CRCs reach the entropy decoder and the reconstruction: a clear error or a
// decode, never a crash (the CI runs this under AddressSanitizer and UBSan).
TEST(PredictedChunk, MutationsBehindValidCrcsNeverCrash) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF16, Layout::kDense, 0, 40);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF16, Layout::kDense, 0, 40);
  testing::ExpectMutationsBehindValidCrcsDecodeOrFail(EncodePredicted(k, v, 0, 3), PredictedProfile(), 9, 300);
}

}  // namespace
}  // namespace kvstream
