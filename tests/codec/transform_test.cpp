// The transform scheme: its pieces (eigensolver, RoPE table, the shared matrix product) and whole chunks
// on real KV: the decoder reproduces the normative reconstruction bit for bit, the error stays within half
// a step per kept component, chunks decode like one whole context, and bad input is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "codec/common/cpu_features.h"
#include "codec/common/key_rotation.h"
#include "codec/compress/matrix_rows.h"
#include "codec/common/profile_data.h"
#include "codec/common/quantizer.h"
#include "codec/common/rans.h"
#include "codec/compress/symmetric_eigen.h"
#include "codec/common/transform_sum.h"
#include "common/half.h"
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
using testing::WithKernelsDisabled;
using testing::WithPortableKernels;

constexpr int kTokens = 160;
constexpr int kSampleTokens = 96;  // the profile learns from positions [0, 96); chunks also cover unseen ones

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

const Profile& TransformProfile() {
  static const Profile profile = [] {
    auto p = testing::LearnProfile(Kv(), kSampleTokens, /*transform=*/true, /*predict=*/false);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return std::move(p).value();
  }();
  return profile;
}

TEST(SymmetricEigen, FindsOrthonormalEigenvectorsByFallingValue) {
  std::mt19937 rng(7);
  std::normal_distribution<double> g;
  for (int n : {1, 2, 5, 33}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<double> b(static_cast<size_t>(n * n)), a(static_cast<size_t>(n * n), 0.0);
    for (double& x : b) x = g(rng);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j)
        for (int k = 0; k < n; ++k) a[i * n + j] += b[i * n + k] * b[j * n + k];
    const codec::Eigen e = codec::SymmetricEigen(a, n);
    ASSERT_EQ(e.values.size(), static_cast<size_t>(n));
    for (int j = 0; j + 1 < n; ++j) EXPECT_GE(e.values[j], e.values[j + 1]);
    for (int j = 0; j < n; ++j) {
      for (int k = 0; k < n; ++k) {
        double dot = 0;
        for (int c = 0; c < n; ++c) dot += e.vectors[j * n + c] * e.vectors[k * n + c];
        EXPECT_NEAR(dot, j == k ? 1.0 : 0.0, 1e-10);
      }
      // A u_j = lambda_j u_j.
      for (int r = 0; r < n; ++r) {
        double av = 0;
        for (int c = 0; c < n; ++c) av += a[r * n + c] * e.vectors[j * n + c];
        EXPECT_NEAR(av, e.values[j] * e.vectors[j * n + r], 1e-8 * (1 + std::fabs(e.values[0])));
      }
    }
  }
}

TEST(RopeTable, RotatesTheModelsPairsAndUndoesItself) {
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kRotateHalf}) {
    const RopeSpec spec{8, 10000.0f, layout};
    const codec::RopeTable table(spec, 1000, 3);
    // e_0 of head 1 turns by the position's angle into its pair partner (pair 0: frequency 1).
    std::vector<float> row(16, 0.0f);
    row[8] = 1.0f;
    table.Rotate(row.data(), 2, 16);
    const int partner = layout == RopeLayout::kInterleaved ? 9 : 12;
    EXPECT_NEAR(row[8], std::cos(1002.0), 1e-6);
    EXPECT_NEAR(row[partner], std::sin(1002.0), 1e-6);
    for (int c = 0; c < 16; ++c) {
      if (c != 8 && c != partner) {
        EXPECT_EQ(row[c], 0.0f) << c;
      }
    }
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-4, 4);
    std::vector<float> x(16), y;
    for (float& v : x) v = u(rng);
    y = x;
    table.Unrotate(y.data(), 1, 16);
    table.Rotate(y.data(), 1, 16);
    for (int c = 0; c < 16; ++c) EXPECT_NEAR(y[c], x[c], 1e-5f);
  }
  // Position 0 is no rotation at all, bit for bit.
  const codec::RopeTable zero(RopeSpec{8, 500000.0f, RopeLayout::kInterleaved}, 0, 1);
  std::vector<float> row = {1.5f, -2.25f, 3, 4, 5, 6, 7, 8};
  const std::vector<float> before = row;
  zero.Rotate(row.data(), 0, 8);
  EXPECT_EQ(row, before);
}

TEST(MultiplyRows, EveryKernelSumsInOrderWithFusedMultiplyAdds) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::uniform_int_distribution<int> q(-3, 3);
  struct Shape {
    int rows, inner, cols;
  };
  // Shapes that reach every tile of the vector kernels: 8, 4 and 1 rows (AVX-512), full and masked
  // column tails.
  for (const Shape& shape : {Shape{1, 1, 1}, {3, 7, 9}, {5, 192, 192}, {4, 33, 71}, {2, 190, 130}, {13, 50, 50},
                             {19, 192, 187}}) {
    const int rows = shape.rows, inner = shape.inner, cols = shape.cols;
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(inner) + "x" + std::to_string(cols));
    std::vector<float> a(static_cast<size_t>(rows * inner)), b(static_cast<size_t>(inner * cols));
    for (float& x : a) x = static_cast<float>(q(rng));  // many zeros, as quantised weights have
    a[0] = 0.3f;                                        // and an escape-like fraction
    for (float& x : b) x = u(rng);
    std::vector<float> reference(static_cast<size_t>(rows * cols));
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        float acc = 0.0f;
        for (int k = 0; k < inner; ++k) acc = std::fma(a[r * inner + k], b[k * cols + c], acc);
        reference[r * cols + c] = acc;
      }
    }
    std::vector<float> fast(reference.size()), avx2(reference.size()), portable(reference.size());
    codec::MultiplyRows(a.data(), rows, inner, b.data(), cols, fast.data());
    WithKernelsDisabled("KVSTREAM_DISABLE_AVX512", [&] { codec::MultiplyRows(a.data(), rows, inner, b.data(), cols, avx2.data()); });
    WithPortableKernels([&] { codec::MultiplyRows(a.data(), rows, inner, b.data(), cols, portable.data()); });
    for (size_t i = 0; i < reference.size(); ++i) {
      ASSERT_EQ(FloatBits(fast[i]), FloatBits(reference[i])) << i;
      ASSERT_EQ(FloatBits(avx2[i]), FloatBits(reference[i])) << i;
      ASSERT_EQ(FloatBits(portable[i]), FloatBits(reference[i])) << i;
    }
  }
}

TEST(SumComponents, EveryKernelGivesTheExactIntegerSums) {
  std::mt19937 rng(13);
  // matrix_rows: the rows packed, as the decoder packs a whole basis and sums a level's first kept rows
  // (0: kept).
  struct Shape {
    int rows, kept, cols, matrix_rows = 0;
  };
  // The transform's weights (within int8) against a basis, a predictor's inputs (int16) against a block
  // at its bound, and against a block of bytes (as kvstream's profiles make them) with inputs of int16 or
  // within int8: the AMX kernel takes int8 factors as bytes and splits the others.
  struct Range {
    const char* name;
    int weight, matrix;
  };
  for (const Range& range : {Range{"transform", codec::kMaxAbsQ, 1 << codec::kBasisScaleBits},
                             Range{"predictor", codec::kMaxPredictorInput, 0},
                             Range{"predictor of bytes", codec::kMaxPredictorInput, 127},
                             Range{"bytes", 127, 127}}) {
    for (const Shape& shape :
         {Shape{1, 1, 16}, {3, 7, 16}, {5, 192, 192}, {6, 33, 40}, {2, 0, 32}, {9, 190, 8}, {7, 65, 48}, {37, 192, 192},
          {13, 141, 192, 192}, {3, 6, 64, 9}}) {
      SCOPED_TRACE(std::string(range.name) + " " + std::to_string(shape.rows) + "x" + std::to_string(shape.kept) + "x" +
                   std::to_string(shape.cols));
      const int matrix_bound = range.matrix > 0 ? range.matrix : static_cast<int>(codec::MaxPredictorWeight(std::max(shape.kept, 1)));
      std::uniform_int_distribution<int> matrix_value(-matrix_bound, matrix_bound), weight(-range.weight, range.weight);
      const int64_t stride = codec::WeightStride(shape.kept);
      const int matrix_rows = std::max(shape.kept, shape.matrix_rows);
      std::vector<int16_t> q(static_cast<size_t>(shape.rows * stride), 0), basis(static_cast<size_t>(matrix_rows * shape.cols));
      for (int r = 0; r < shape.rows; ++r)
        for (int j = 0; j < shape.kept; ++j) q[r * stride + j] = static_cast<int16_t>(weight(rng));
      if (!q.empty()) q[0] = static_cast<int16_t>(range.weight);
      for (int16_t& b : basis) b = static_cast<int16_t>(matrix_value(rng));
      if (!basis.empty()) basis[0] = static_cast<int16_t>(matrix_bound);
      // The largest sum the bounds allow, in the first row: every product at its maximum.
      if (shape.kept > 0 && shape.cols > 1) {
        for (int j = 0; j < shape.kept; ++j) {
          q[j] = static_cast<int16_t>(range.weight);
          basis[j * shape.cols + 1] = static_cast<int16_t>(matrix_bound);
        }
      }
      const size_t n = static_cast<size_t>(shape.rows * shape.cols);
      const codec::PackedMatrix packed = codec::PackedMatrix::Pack(basis.data(), matrix_rows, shape.cols);
      // Without AMX (there, or on a CPU that has none) the matrix is packed for AVX-512 VNNI.
      codec::PackedMatrix vnni;
      WithKernelsDisabled("KVSTREAM_DISABLE_AMX",
                          [&] { vnni = codec::PackedMatrix::Pack(basis.data(), matrix_rows, shape.cols); });
      const auto within_int8 = [](int16_t x) { return x >= -128 && x <= 127; };
      const bool matrix_of_bytes = std::all_of(basis.begin(), basis.end(), within_int8);
      if (codec::Avx512VnniEnabled() && shape.cols % 16 == 0 && matrix_rows > 0) {
        using Layout = codec::PackedMatrix::Layout;
        EXPECT_EQ(vnni.layout, matrix_of_bytes ? Layout::kVnniBytes : Layout::kVnniPairs);
      } else {
        EXPECT_TRUE(vnni.empty());
      }
      // Each run gives the sums of the columns [0, columns); SumComponents covers them all.
      struct Run {
        std::string kernel;
        std::vector<int32_t> sums;
        int64_t columns;
      };
      std::vector<Run> runs;
      auto sum_components = [&](const std::string& kernel) {
        std::vector<int32_t> sums(n);
        codec::SumComponents(q.data(), shape.rows, shape.kept, basis.data(), shape.cols, sums.data(), &packed);
        runs.push_back({kernel, std::move(sums), shape.cols});
      };
      sum_components("best");
      WithKernelsDisabled("KVSTREAM_DISABLE_AMX", [&] { sum_components("best without AMX"); });
      WithKernelsDisabled("KVSTREAM_DISABLE_AMX", [&] {
        std::vector<int32_t> sums(n);
        codec::SumComponents(q.data(), shape.rows, shape.kept, basis.data(), shape.cols, sums.data(), &vnni);
        runs.push_back({"best, packed without AMX", std::move(sums), shape.cols});
      });
      WithKernelsDisabled("KVSTREAM_DISABLE_AVX512", [&] { sum_components("AVX2 or portable"); });
      WithPortableKernels([&] { sum_components("portable"); });
      // The AVX-512 kernels one by one where the CPU runs them (the best one hides the other).
      if (codec::Avx512Enabled()) {
        std::vector<int32_t> sums(n);
        const int64_t columns = codec::SumComponentsAvx512(q.data(), shape.rows, shape.kept, basis.data(), shape.cols, sums.data());
        runs.push_back({"AVX-512", std::move(sums), columns});
      }
      if (codec::Avx512VnniEnabled()) {
        std::vector<int32_t> sums(n);
        const int64_t columns =
            codec::SumComponentsAvx512Vnni(q.data(), shape.rows, shape.kept, basis.data(), shape.cols, sums.data());
        runs.push_back({"AVX-512 VNNI", std::move(sums), columns});
      }
      if (!vnni.empty()) {
        // Against bytes it takes only weights within int8 (else SumComponents falls back, run above).
        const bool weights_of_bytes = std::all_of(q.begin(), q.end(), within_int8);
        std::vector<int32_t> sums(n);
        const int64_t columns =
            codec::SumComponentsAvx512VnniPacked(q.data(), shape.rows, shape.kept, vnni, sums.data());
        EXPECT_EQ(columns, vnni.layout == codec::PackedMatrix::Layout::kVnniBytes && !weights_of_bytes ? 0 : shape.cols);
        runs.push_back({"AVX-512 VNNI, packed", std::move(sums), columns});
      }
      if (codec::AmxEnabled() && shape.cols % 16 == 0 && shape.kept > 0) {
        ASSERT_FALSE(packed.empty());
        std::vector<int32_t> sums(n);
        const int64_t columns = codec::SumComponentsAmx(q.data(), shape.rows, shape.kept, packed, sums.data());
        EXPECT_EQ(columns, shape.cols);
        runs.push_back({"AMX", std::move(sums), columns});
      }
      for (const Run& run : runs) {
        SCOPED_TRACE(run.kernel);
        for (int r = 0; r < shape.rows; ++r) {
          for (int c = 0; c < run.columns; ++c) {
            int64_t want = 0;
            for (int j = 0; j < shape.kept; ++j) want += int64_t{q[r * stride + j]} * basis[j * shape.cols + c];
            ASSERT_EQ(run.sums[r * shape.cols + c], want) << r << "," << c;
          }
        }
      }
    }
  }
}

TEST(TransformProfile, SavesLoadsAndRefusesCorruptSections) {
  const Profile& p = TransformProfile();
  ASSERT_TRUE(p.Supports(QuantScheme::kTransform));
  const ProfileData& d = DataOf(p);
  EXPECT_EQ(d.transform.rope.head_dim, Kv().model->config().rope().head_dim);
  for (const ProfileTransformLevel& level : d.transform.levels) {
    for (uint32_t kept : level.kept) EXPECT_LE(kept, static_cast<uint32_t>(p.channels()));
  }
  // Coarser levels keep fewer components.
  uint64_t previous = UINT64_MAX;
  for (const ProfileTransformLevel& level : d.transform.levels) {
    uint64_t kept = 0;
    for (uint32_t k : level.kept) kept += k;
    EXPECT_LE(kept, previous);
    previous = kept;
  }
  auto parsed = Profile::Parse(p.bytes().data(), p.bytes().size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->Supports(QuantScheme::kTransform));
  EXPECT_EQ(parsed->hash(), p.hash());
  // Each scheme keeps its own measured quality.
  LevelQuality q;
  q.top1_agreement = 0.97;
  q.bits_per_value = 3.5;
  auto measured = p.WithQuality(2, q, QuantScheme::kTransform);
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  auto reparsed = Profile::Parse(measured->bytes().data(), measured->bytes().size());
  ASSERT_TRUE(reparsed.ok()) << reparsed.status().ToString();
  EXPECT_EQ(reparsed->QualityOf(QuantScheme::kTransform)[1].top1_agreement, 0.97);
  EXPECT_EQ(reparsed->QualityOf(QuantScheme::kTransform)[1].bits_per_value, 3.5);
  EXPECT_TRUE(std::isnan(reparsed->quality()[1].top1_agreement));
  EXPECT_NE(reparsed->hash(), p.hash());

  // Hostile transform sections, each with a valid CRC: an odd head_dim, a kept count beyond the channels.
  ProfileData bad = d;
  bad.transform.rope.head_dim = 3;
  bad.Finalize();
  auto r = Profile::Parse(bad.bytes.data(), bad.bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruptData);
  EXPECT_NE(r.status().message().find("head_dim"), std::string::npos) << r.status().ToString();
  bad = d;
  bad.transform.levels[0].kept[0] = static_cast<uint32_t>(p.channels()) + 1;
  bad.Finalize();
  r = Profile::Parse(bad.bytes.data(), bad.bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kept"), std::string::npos) << r.status().ToString();
  bad = d;
  bad.transform.bases[5] = 16385;
  bad.Finalize();
  r = Profile::Parse(bad.bytes.data(), bad.bytes.size());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("basis"), std::string::npos) << r.status().ToString();
  bad = d;
  bad.transform.levels[1].steps[2] = -1.0f;
  bad.Finalize();
  EXPECT_FALSE(Profile::Parse(bad.bytes.data(), bad.bytes.size()).ok());
  // Every truncation is refused cleanly.
  for (size_t cut = 0; cut < p.bytes().size(); cut += 997) EXPECT_FALSE(Profile::Parse(p.bytes().data(), cut).ok());
}

std::vector<uint8_t> EncodeTransform(const Tensor& k, const Tensor& v, int64_t t0, Level level, EncodeStats* stats = nullptr) {
  return testing::EncodeWith(TransformProfile(), QuantScheme::kTransform, k, v, t0, level, stats);
}

Kv2 Decode(const std::vector<uint8_t>& bytes, DType dtype = DType::kF32) {
  return testing::DecodeWith(TransformProfile(), bytes, dtype);
}

// One (layer, K/V) row of a tensor, as floats.
std::vector<float> RowOf(const Tensor& t, int64_t l, int64_t token) {
  std::vector<float> row(static_cast<size_t>(t.view.channels()));
  for (int64_t c = 0; c < t.view.channels(); ++c) row[c] = t.at(l, token, c);
  return row;
}

// What the profile holds for one (layer, K/V) at one level.
struct Slice {
  int channels;
  float step;
  uint32_t kept;
  const float* mean;
  const int16_t* basis;  // B = round(u * 2^14)
};
Slice SliceOf(int layer, int kv, Level level) {
  const ProfileData& d = DataOf(TransformProfile());
  const ProfileTransformLevel& lvl = d.transform.levels[level - 1];
  const size_t slice = static_cast<size_t>(layer) * 2 + kv;
  return {d.channels, lvl.steps[slice], lvl.kept[slice], d.transform.means.data() + d.Index(layer, kv, 0), d.Basis(layer, kv)};
}

// Component weights u_j . (y - mean) / step of a row y (de-rotated for keys), with u = B / 2^14, in double.
std::vector<double> Weights(std::vector<float> row, int layer, int kv, int64_t position, Level level) {
  const Slice s = SliceOf(layer, kv, level);
  const int C = s.channels;
  const codec::RopeTable rope(DataOf(TransformProfile()).transform.rope, position, 1);
  if (kv == 0) rope.Unrotate(row.data(), 0, C);
  std::vector<double> w(static_cast<size_t>(C));
  for (int j = 0; j < C; ++j) {
    double dot = 0;
    for (int c = 0; c < C; ++c) dot += static_cast<double>(s.basis[j * C + c]) / 16384.0 * (double{row[c]} - s.mean[c]);
    w[j] = dot / s.step;
  }
  return w;
}

CodedSegment ReadSegment(const std::vector<uint8_t>& chunk, const SegmentInfo& seg, int64_t tokens, int64_t sink_rows,
                         Level level) {
  const ProfileData& d = DataOf(TransformProfile());
  const int kv = seg.tensor == SegmentTensor::kKeys ? 0 : 1;
  const Slice s = SliceOf(static_cast<int>(seg.layer), kv, level);
  const auto models = d.transform.levels[level - 1].bank.ChannelModels(d.Index(static_cast<int>(seg.layer), kv, 0), s.kept);
  return testing::ReadCodedSegment(chunk, seg, tokens, sink_rows, s.channels, models);
}

// The normative reconstruction (docs/format.md, "Scheme 3") of one coded row, written out independently
// of the decoder: exact integer sums, then the mean and step, the escaped components in order, RoPE.
std::vector<float> Reconstruct(const uint8_t* symbols, const CodedSegment& coded, size_t* next_escape, int layer, int kv,
                               int64_t position, Level level) {
  const ProfileData& d = DataOf(TransformProfile());
  const Slice s = SliceOf(layer, kv, level);
  const int C = s.channels;
  const float scaled_step = s.step * (1.0f / 16384.0f);
  std::vector<std::pair<uint32_t, float>> escaped;
  std::vector<float> y(static_cast<size_t>(C));
  for (uint32_t j = 0; j < s.kept; ++j) {
    if (symbols[j] == 0) escaped.push_back({j, coded.escapes.at((*next_escape)++)});
  }
  for (int c = 0; c < C; ++c) {
    int64_t acc = 0;
    for (uint32_t j = 0; j < s.kept; ++j) {
      if (symbols[j] != 0) acc += static_cast<int64_t>(symbols[j] - 128) * s.basis[j * C + c];
    }
    EXPECT_LT(std::llabs(acc), int64_t{1} << 31);
    const float scaled = static_cast<float>(acc) * scaled_step;
    y[c] = s.mean[c] + scaled;
    for (const auto& [j, w] : escaped) {
      const float term = (w * scaled_step) * static_cast<float>(s.basis[j * C + c]);
      y[c] = y[c] + term;
    }
  }
  if (kv == 0) testing::RotateReference(y, position, d.transform.rope);
  return y;
}

TEST(TransformChunk, DecoderReproducesTheNormativeReconstruction) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  const int64_t L = k.view.layers(), T = k.view.tokens(), C = k.view.channels();
  const Level levels = static_cast<Level>(TransformProfile().ladder().size());
  double previous_bits = 1e9;
  for (Level level = 1; level <= levels; ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    EncodeStats stats;
    const auto bytes = EncodeTransform(k, v, 0, level, &stats);
    // The profile learned from 96 positions; the context has 160, so some components leave its range.
    EXPECT_GT(stats.escapes, 0u) << "the escape path should be exercised";
    EXPECT_LT(stats.escapes, stats.coded_symbols / 50) << "escapes should be rare on real KV";
    auto info = InspectChunk(bytes.data(), bytes.size());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->scheme, QuantScheme::kTransform);
    EXPECT_EQ(info->sink_rows, 4);
    EXPECT_EQ(info->profile_hash, TransformProfile().hash());
    const Kv2 out = Decode(bytes);
    for (const SegmentInfo& seg : info->segments) {
      const int layer = static_cast<int>(seg.layer), s = seg.tensor == SegmentTensor::kKeys ? 0 : 1;
      const Tensor& in = s == 0 ? k : v;
      const Tensor& dec = s == 0 ? out.k : out.v;
      const CodedSegment coded = ReadSegment(bytes, seg, T, info->sink_rows, level);
      const uint32_t kept = SliceOf(layer, s, level).kept;
      size_t next_escape = 0;
      for (int64_t t = 0; t < T; ++t) {
        if (t < 4) {  // sink rows: exact fp16
          for (int64_t c = 0; c < C; ++c) ASSERT_EQ(FloatBits(dec.at(layer, t, c)), FloatBits(HalfToFloat(FloatToHalf(in.at(layer, t, c)))));
          continue;
        }
        const uint8_t* symbols = coded.symbols.data() + (t - 4) * kept;
        const std::vector<float> want = Reconstruct(symbols, coded, &next_escape, layer, s, t, level);
        for (int64_t c = 0; c < C; ++c) {
          ASSERT_EQ(FloatBits(dec.at(layer, t, c)), FloatBits(want[c])) << "layer " << layer << " kv " << s << " t " << t << " c " << c;
        }
        // Each coded component within half a step of the input's; a dropped one is not coded (its
        // decoded weight is 0 up to the basis's rounding).
        const std::vector<double> exact = Weights(RowOf(in, layer, t), layer, s, t, level);
        const std::vector<double> got = Weights(RowOf(dec, layer, t), layer, s, t, level);
        for (uint32_t j = 0; j < kept; ++j) {
          if (symbols[j] != 0) {
            ASSERT_LE(std::fabs(exact[j] - (symbols[j] - 128)), 0.5 + 1e-3) << "component " << j;
          }
        }
        for (int64_t j = kept; j < C; ++j) ASSERT_NEAR(got[j], 0.0, 0.25) << "dropped component " << j;
      }
      EXPECT_EQ(next_escape, coded.escapes.size());
    }
    // The AVX2 and portable kernels decode the same bits; fp16 output is the fp32 output rounded once.
    testing::ExpectEveryKernelDecodesTheSameBits(bytes, out, [](const std::vector<uint8_t>& b) { return Decode(b); });
    const Kv2 half = Decode(bytes, DType::kF16);
    for (int layer = 0; layer < L; ++layer) {
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < C; ++c) ASSERT_EQ(half.k.bits(layer, t, c), FloatToHalf(out.k.at(layer, t, c)));
      }
    }
    testing::ExpectSmallerThanTheLevelBefore(bytes, k.view, "transform", level, stats.escapes, &previous_bits);
  }
}

TEST(TransformChunk, ChunksDecodeLikeTheWholeContextWhateverTheInputLayout) {
  testing::ExpectChunksDecodeLikeTheWholeContext(
      Kv().cache, [](const Tensor& k, const Tensor& v, int64_t t0) { return EncodeTransform(k, v, t0, 3); },
      [](const std::vector<uint8_t>& bytes) { return Decode(bytes); });
}

TEST(TransformChunk, RefusesMissingAndWrongProfiles) {
  const auto& kv = Kv();
  // A profile learned without the transform cannot code it.
  ProfileBuilder builder(ProfileOptions{});
  ASSERT_TRUE(builder.AddSample(kv.cache.keys(), kv.cache.values()).ok());
  auto without = builder.Build();
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->Supports(QuantScheme::kTransform));
  EXPECT_TRUE(without->QualityOf(QuantScheme::kTransform).empty());
  EXPECT_FALSE(without->WithQuality(1, LevelQuality{}, QuantScheme::kTransform).ok());
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF16, Layout::kDense, 0, 32);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF16, Layout::kDense, 0, 32);
  testing::ExpectSchemeRefusedWithoutItsProfile(kv.cache, QuantScheme::kTransform, *without, EncodeTransform(k, v, 0, 2),
                                                "transform");
}

TEST(TransformChunk, TruncatedAndBitFlippedChunksAreRefused) {
  testing::ExpectTruncatedAndFlippedChunksRefused(
      Kv().cache, [](const Tensor& k, const Tensor& v) { return EncodeTransform(k, v, 0, 4); }, TransformProfile());
}

TEST(TransformChunk, ALevelThatKeepsNoComponentDecodesToTheMeans) {
  const auto& kv = Kv();
  ProfileOptions options;
  options.transform = true;
  options.rope = Kv().model->config().rope();
  options.ladder = DefaultLadder(kv.cache.layers);
  options.ladder.resize(2);
  options.ladder[1].step_multiplier[0] = options.ladder[1].step_multiplier[1] = 1e4f;  // above every variance
  ProfileBuilder builder(options);
  ASSERT_TRUE(builder.AddSample(SliceTokens(kv.cache.keys(), 0, kSampleTokens), SliceTokens(kv.cache.values(), 0, kSampleTokens)).ok());
  auto profile = builder.Build();
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  for (uint32_t kept : DataOf(*profile).transform.levels[1].kept) ASSERT_EQ(kept, 0u);
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense, 8, 24);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense, 8, 24);
  ChunkInput in;
  in.keys = k.view;
  in.values = v.view;
  in.token_begin = 8;
  EncodeOptions eo;
  eo.level = 2;
  eo.profile = &*profile;
  eo.scheme = QuantScheme::kTransform;
  auto bytes = EncodeChunk(in, eo);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  Tensor dk(DType::kF32, k.view.layers(), 24, k.view.channels(), Layout::kDense), dv = dk;
  DecodeOptions o;
  o.profile = &*profile;
  ASSERT_TRUE(DecodeChunk(bytes->data(), bytes->size(), o, dk.view, dv.view).ok());
  const ProfileData& d = DataOf(*profile);
  for (int64_t l = 0; l < k.view.layers(); ++l) {
    for (int64_t c = 0; c < k.view.channels(); ++c) {
      // Values: exactly mean + step * 0. Keys: the de-rotated mean, rotated to the row's position.
      EXPECT_EQ(dv.at(l, 5, c), d.transform.means[d.Index(static_cast<int>(l), 1, static_cast<int>(c))]);
    }
  }
}

}  // namespace
}  // namespace kvstream
