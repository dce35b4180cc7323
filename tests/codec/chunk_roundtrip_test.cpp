// Chunk round trips on real KV: every level, scheme, dtype and stride pattern; chunk boundaries and
// random access; determinism across thread counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "codec/common/quantizer.h"
#include "common/half.h"
#include "common/int8_row.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "test_views.h"
#include "transform_reference.h"

namespace kvstream {
namespace {

using testing::CopyOf;
using testing::Layout;
using testing::Tensor;

constexpr int kTokens = 96;

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

ChunkInput InputOf(const Tensor& k, const Tensor& v, int64_t t0 = 0) {
  ChunkInput in;
  in.keys = k.view;
  in.values = v.view;
  in.token_begin = t0;
  return in;
}

std::vector<uint8_t> MustEncode(const ChunkInput& in, const EncodeOptions& o) {
  auto r = EncodeChunk(in, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

void MustDecode(const std::vector<uint8_t>& bytes, const DecodeOptions& o, Tensor* k, Tensor* v) {
  Status st = DecodeChunk(bytes.data(), bytes.size(), o, k->view, v->view);
  ASSERT_TRUE(st.ok()) << st.ToString();
}

// The in-chunk parameters of a channel-uniform segment, read as docs/format.md lays them out.
struct SegmentParams {
  float step;
  std::vector<float> means;
};
SegmentParams ReadInChunkParams(const std::vector<uint8_t>& chunk, const SegmentInfo& seg, int64_t channels,
                                int64_t sink_rows) {
  SegmentParams p;
  const size_t at = seg.offset + 8 + 2 * static_cast<size_t>(sink_rows * channels);
  std::memcpy(&p.step, chunk.data() + at, 4);
  for (int64_t c = 0; c < channels; ++c) {
    uint16_t h;
    std::memcpy(&h, chunk.data() + at + 4 + 2 * c, 2);
    p.means.push_back(HalfToFloat(h));
  }
  return p;
}

TEST(ChunkRoundTrip, ChannelUniformLevelsReproduceTheQuantizerReconstruction) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  const int64_t L = k.view.layers(), T = k.view.tokens(), C = k.view.channels();
  double previous_bits = 1e9;
  for (Level level = 1; level <= static_cast<Level>(DefaultLadder(static_cast<int>(L)).size()); ++level) {
    SCOPED_TRACE("level " + std::to_string(level));
    EncodeOptions eo;
    eo.level = level;
    const auto bytes = MustEncode(InputOf(k, v), eo);
    auto info = InspectChunk(bytes.data(), bytes.size());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_TRUE(info->in_chunk_tables);
    EXPECT_EQ(info->profile_hash, 0u);
    EXPECT_EQ(info->sink_rows, 4);
    Tensor dk(DType::kF32, L, T, C, Layout::kDense), dv = dk;
    MustDecode(bytes, {}, &dk, &dv);
    // The portable, AVX2 and AVX-512 dequantisation loops give the same bits, and so do the loops that
    // write dense fp16 rows directly: the f32 decode rounded once.
    for (DType dtype : {DType::kF32, DType::kF16}) {
      const testing::Kv2 want{CopyOf(dk.view, dtype, Layout::kDense), CopyOf(dv.view, dtype, Layout::kDense)};
      testing::ExpectEveryKernelDecodesTheSameBits(bytes, want, [&](const std::vector<uint8_t>& b) {
        testing::Kv2 got{Tensor(dtype, L, T, C, Layout::kDense), {}};
        got.v = got.k;
        MustDecode(b, {}, &got.k, &got.v);
        return got;
      });
    }
    int64_t escapes = 0;
    for (const SegmentInfo& seg : info->segments) {
      const Tensor& in = seg.tensor == SegmentTensor::kKeys ? k : v;
      const Tensor& out = seg.tensor == SegmentTensor::kKeys ? dk : dv;
      const SegmentParams p = ReadInChunkParams(bytes, seg, C, info->sink_rows);
      ASSERT_GT(p.step, 0.0f);
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < C; ++c) {
          const float x = in.at(seg.layer, t, c), y = out.at(seg.layer, t, c);
          if (t < info->sink_rows) {  // context positions 0..3 travel exact as fp16
            ASSERT_EQ(FloatBits(y), FloatBits(HalfToFloat(FloatToHalf(x))));
            continue;
          }
          const float qf = std::nearbyint((y - p.means[c]) / p.step);
          const float grid = codec::DequantChannelUniform(codec::QToSymbol(static_cast<int>(qf)), p.means[c], p.step);
          if (std::fabs(qf) <= 127 && FloatBits(grid) == FloatBits(y)) {
            ASSERT_LE(std::fabs(x - y), 0.5f * p.step * 1.001f + 1e-6f) << "layer " << seg.layer << " t " << t << " c " << c;
          } else {
            // An escape: the value travels as fp16.
            ASSERT_EQ(FloatBits(y), FloatBits(HalfToFloat(FloatToHalf(x))));
            ++escapes;
          }
        }
      }
    }
    EXPECT_LT(escapes, L * T * C / 100) << "escapes should be rare on real KV";
    const double bits = 8.0 * static_cast<double>(bytes.size()) / static_cast<double>(2 * L * T * C);
    EXPECT_LT(bits, previous_bits) << "higher levels must be smaller";
    previous_bits = bits;
    std::printf("stories260K %d tokens, level %d (in-chunk tables): %.3f bits/value\n", kTokens, level, bits);
  }
}

TEST(ChunkRoundTrip, Fp16PassthroughIsBitExact) {
  const auto& kv = Kv();
  for (DType dt : testing::kAllDTypes) {
    SCOPED_TRACE(DTypeName(dt));
    const Tensor k = CopyOf(kv.cache.keys(), dt, Layout::kPadded);
    const Tensor v = CopyOf(kv.cache.values(), dt, Layout::kPadded);
    EncodeOptions eo;
    eo.level = kLevelFp16;
    const auto bytes = MustEncode(InputOf(k, v), eo);
    const DType out_dt = dt == DType::kF32 ? DType::kF16 : dt;
    // Dense rows take the decoder's copy path, the other layouts its conversion path.
    for (Layout layout : testing::kAllLayouts) {
      SCOPED_TRACE(testing::LayoutName(layout));
      Tensor dk(out_dt, k.view.layers(), k.view.tokens(), k.view.channels(), layout), dv = dk;
      MustDecode(bytes, {}, &dk, &dv);
      for (int64_t l = 0; l < k.view.layers(); ++l)
        for (int64_t t = 0; t < k.view.tokens(); ++t)
          for (int64_t c = 0; c < k.view.channels(); ++c) {
            const uint32_t want_k = dt == DType::kF32 ? FloatToHalf(k.at(l, t, c)) : k.bits(l, t, c);
            const uint32_t want_v = dt == DType::kF32 ? FloatToHalf(v.at(l, t, c)) : v.bits(l, t, c);
            ASSERT_EQ(dk.bits(l, t, c), want_k);
            ASSERT_EQ(dv.bits(l, t, c), want_v);
          }
    }
  }
}

TEST(ChunkRoundTrip, Int8IsPerTokenSymmetric) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  EncodeOptions eo;
  eo.level = kLevelInt8;
  const auto bytes = MustEncode(InputOf(k, v), eo);
  const int64_t L = k.view.layers(), T = k.view.tokens(), C = k.view.channels();
  Tensor dk(DType::kF32, L, T, C, Layout::kDense), dv = dk;
  MustDecode(bytes, {}, &dk, &dv);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t t = 0; t < T; ++t) {
      float max_abs = 0;
      for (int64_t c = 0; c < C; ++c) max_abs = std::max(max_abs, std::fabs(k.at(l, t, c)));
      const float scale = HalfToFloat(FloatToHalf(max_abs / 127.0f));
      for (int64_t c = 0; c < C; ++c) {
        const float y = dk.at(l, t, c);
        const float q = std::nearbyint(y / scale);
        ASSERT_EQ(FloatBits(DequantizeInt8(static_cast<int8_t>(q), FloatToHalf(max_abs / 127.0f))), FloatBits(y));
        ASSERT_LE(std::fabs(k.at(l, t, c) - y), 0.5f * scale * 1.001f + 0.01f * max_abs);
      }
    }
  // 8 bits per value plus one fp16 scale per (layer, K/V, token) and the container.
  EXPECT_LT(bytes.size(), static_cast<size_t>(2 * L * T * (C + 2) + 4096));
}

// Every input dtype and layout gives the same chunk bytes as a dense copy of the same values, and every
// output dtype and layout receives the f32 decode rounded once.
TEST(ChunkRoundTrip, EveryDTypeAndStridePatternAgree) {
  const auto& kv = Kv();
  for (DType in_dt : testing::kAllDTypes) {
    const Tensor dense_k = CopyOf(kv.cache.keys(), in_dt, Layout::kDense);
    const Tensor dense_v = CopyOf(kv.cache.values(), in_dt, Layout::kDense);
    for (Level level : {1, 3, 6, kLevelInt8, kLevelFp16}) {
      EncodeOptions eo;
      eo.level = level;
      const auto reference = MustEncode(InputOf(dense_k, dense_v), eo);
      const int64_t L = dense_k.view.layers(), T = dense_k.view.tokens(), C = dense_k.view.channels();
      Tensor ref_k(DType::kF32, L, T, C, Layout::kDense), ref_v = ref_k;
      MustDecode(reference, {}, &ref_k, &ref_v);
      for (Layout layout : testing::kAllLayouts) {
        SCOPED_TRACE(std::string(DTypeName(in_dt)) + " " + testing::LayoutName(layout) + " level " + LevelName(level));
        const Tensor k = CopyOf(dense_k.view, in_dt, layout), v = CopyOf(dense_v.view, in_dt, layout);
        EXPECT_EQ(MustEncode(InputOf(k, v), eo), reference);
        for (DType out_dt : testing::kAllDTypes) {
          Tensor dk(out_dt, L, T, C, layout), dv = dk;
          MustDecode(reference, {}, &dk, &dv);
          Tensor expect(out_dt, 1, 1, 1, Layout::kDense);
          for (int64_t l = 0; l < L; ++l)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t c = 0; c < C; ++c) {
                StoreFromFloat(expect.view, 0, 0, 0, ref_k.at(l, t, c));
                ASSERT_EQ(dk.bits(l, t, c), expect.bits(0, 0, 0)) << DTypeName(out_dt);
                StoreFromFloat(expect.view, 0, 0, 0, ref_v.at(l, t, c));
                ASSERT_EQ(dv.bits(l, t, c), expect.bits(0, 0, 0)) << DTypeName(out_dt);
              }
        }
      }
    }
  }
}

TEST(ChunkRoundTrip, ThreadsAndPoolsGiveIdenticalBytes) {
  const auto& kv = Kv();
  ChunkInput in;
  in.keys = kv.cache.keys();
  in.values = kv.cache.values();
  EncodeOptions eo;
  eo.level = 2;
  const auto one = MustEncode(in, eo);
  eo.threads = 3;
  EXPECT_EQ(MustEncode(in, eo), one);
  eo.threads = 1;
  size_t calls = 0;
  eo.parallel_for = [&](size_t n, const std::function<void(size_t)>& task) {
    ++calls;
    for (size_t i = n; i-- > 0;) task(i);  // reverse order: results must not depend on it
  };
  EXPECT_EQ(MustEncode(in, eo), one);
  EXPECT_EQ(calls, 1u);
  const int64_t L = in.keys.layers(), T = in.keys.tokens(), C = in.keys.channels();
  Tensor a(DType::kF32, L, T, C, Layout::kDense), b = a, c = a, d = a;
  MustDecode(one, {}, &a, &b);
  DecodeOptions dopt;
  dopt.threads = 4;
  MustDecode(one, dopt, &c, &d);
  EXPECT_EQ(a.bytes, c.bytes);
  EXPECT_EQ(b.bytes, d.bytes);
}

// EncodeChunkInto writes the same bytes into the caller's memory, asking for it once; a caller that has
// none gets kResourceExhausted.
TEST(ChunkRoundTrip, EncodeIntoCallersMemoryGivesTheSameBytes) {
  const auto& kv = Kv();
  for (Level level : {kLevelFp16, kLevelInt8, Level{3}}) {
    EncodeOptions eo;
    eo.level = level;
    const ChunkInput in = {kv.cache.keys(), kv.cache.values()};
    const std::vector<uint8_t> expected = MustEncode(in, eo);
    std::vector<uint8_t> mine;
    int calls = 0;
    const Result<uint64_t> size = EncodeChunkInto(in, eo, [&](uint64_t n) {
      ++calls;
      mine.assign(n, 0xA5);
      return mine.data();
    });
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, expected.size());
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(mine, expected) << LevelName(level);
    const Result<uint64_t> none = EncodeChunkInto(in, eo, [](uint64_t) { return nullptr; });
    EXPECT_EQ(none.status().code(), StatusCode::kResourceExhausted);
  }
}

// A context split into chunks (the last one partial) decodes chunk by chunk, in any order, into the
// right place of one destination, and each chunk equals the same tokens encoded alone.
TEST(ChunkRoundTrip, ChunksDecodeIndependentlyInAnyOrder) {
  const auto& kv = Kv();
  const TensorView keys = kv.cache.keys(), values = kv.cache.values();
  const int64_t L = keys.layers(), T = keys.tokens(), C = keys.channels();
  const int64_t chunk_tokens = 40;  // 96 = 40 + 40 + 16
  std::vector<std::vector<uint8_t>> chunks;
  for (int64_t t0 = 0; t0 < T; t0 += chunk_tokens) {
    const int64_t n = std::min(chunk_tokens, T - t0);
    ChunkInput in;
    in.keys = SliceTokens(keys, t0, n);
    in.values = SliceTokens(values, t0, n);
    in.token_begin = t0;
    EncodeOptions eo;
    eo.level = 3;
    chunks.push_back(MustEncode(in, eo));
  }
  ASSERT_EQ(chunks.size(), 3u);
  Tensor all_k(DType::kF16, L, T, C, Layout::kPadded), all_v = all_k;
  std::vector<size_t> order = {2, 0, 1};
  for (size_t i : order) {
    auto info = InspectChunk(chunks[i].data(), chunks[i].size());
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->token_begin, static_cast<int64_t>(i) * chunk_tokens);
    EXPECT_EQ(info->tokens, i == 2 ? 16 : chunk_tokens);
    Status st = DecodeChunk(chunks[i].data(), chunks[i].size(), {}, SliceTokens(all_k.view, info->token_begin, info->tokens),
                            SliceTokens(all_v.view, info->token_begin, info->tokens));
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (size_t i = 0; i < chunks.size(); ++i) {
    auto info = InspectChunk(chunks[i].data(), chunks[i].size());
    Tensor k(DType::kF16, L, info->tokens, C, Layout::kDense), v = k;
    MustDecode(chunks[i], {}, &k, &v);
    for (int64_t l = 0; l < L; ++l)
      for (int64_t t = 0; t < info->tokens; ++t)
        for (int64_t c = 0; c < C; ++c) {
          ASSERT_EQ(all_k.bits(l, info->token_begin + t, c), k.bits(l, t, c));
          ASSERT_EQ(all_v.bits(l, info->token_begin + t, c), v.bits(l, t, c));
        }
  }
}

// Context positions 0..3 (attention sinks) travel exact as fp16 in channel-uniform chunks, with in-chunk
// tables and with a profile; a chunk that starts at position 4 or later has none; a chunk made only of
// sink rows codes no symbol at all.
TEST(ChunkRoundTrip, SinkRowsAreExactFp16AtTheContextStartOnly) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF16, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF16, Layout::kDense);
  const int64_t L = k.view.layers(), C = k.view.channels();
  ProfileBuilder builder({});
  ASSERT_TRUE(builder.AddSample(kv.cache.keys(), kv.cache.values()).ok());
  auto profile = builder.Build();
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  struct Case {
    int64_t t0, first, tokens, sinks;
  };
  // (position of the chunk, first row of the fixture it takes, tokens, expected sink rows)
  for (const Case& cs : {Case{0, 0, 40, 4}, Case{2, 2, 40, 2}, Case{3, 3, 1, 1}, Case{0, 0, 2, 2}, Case{4, 4, 40, 0},
                         Case{1000, 40, 40, 0}}) {
    const Profile* profiles[] = {nullptr, &profile.value()};
    for (const Profile* p : profiles) {
      SCOPED_TRACE("t0 " + std::to_string(cs.t0) + " tokens " + std::to_string(cs.tokens) + (p ? " profile" : " in-chunk"));
      ChunkInput in;
      in.keys = SliceTokens(k.view, cs.first, cs.tokens);
      in.values = SliceTokens(v.view, cs.first, cs.tokens);
      in.token_begin = cs.t0;
      EncodeStats stats;
      EncodeOptions eo;
      eo.level = 3;
      eo.profile = p;
      eo.stats = &stats;
      const auto bytes = MustEncode(in, eo);
      auto info = InspectChunk(bytes.data(), bytes.size());
      ASSERT_TRUE(info.ok()) << info.status().ToString();
      EXPECT_EQ(info->sink_rows, cs.sinks);
      EXPECT_EQ(bytes[13], cs.sinks);
      EXPECT_EQ(stats.sink_values, static_cast<uint64_t>(2 * L * cs.sinks * C));
      EXPECT_EQ(stats.coded_symbols, static_cast<uint64_t>(2 * L * (cs.tokens - cs.sinks) * C));
      Tensor dk(DType::kF16, L, cs.tokens, C, Layout::kDense), dv = dk;
      DecodeOptions o;
      o.profile = p;
      MustDecode(bytes, o, &dk, &dv);
      int64_t differ_first_row = 0;
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t t = 0; t < cs.tokens; ++t) {
          for (int64_t c = 0; c < C; ++c) {
            if (t < cs.sinks) {
              ASSERT_EQ(dk.bits(l, t, c), k.bits(l, cs.first + t, c)) << "layer " << l << " t " << t << " c " << c;
              ASSERT_EQ(dv.bits(l, t, c), v.bits(l, cs.first + t, c)) << "layer " << l << " t " << t << " c " << c;
            } else if (t == 0) {
              differ_first_row += dk.bits(l, t, c) != k.bits(l, cs.first + t, c);
            }
          }
        }
      }
      if (cs.sinks == 0) {
        EXPECT_GT(differ_first_row, 0) << "the first row of a chunk past position 3 is quantised";
      }
    }
  }
}

// The encoder's entropy-stage figures: the rANS streams against the ideal size under the same tables.
TEST(ChunkRoundTrip, EncodeStatsReportTheEntropyStage) {
  const auto& kv = Kv();
  const Tensor k = CopyOf(kv.cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(kv.cache.values(), DType::kF32, Layout::kDense);
  const int64_t L = k.view.layers(), T = k.view.tokens(), C = k.view.channels();
  EncodeStats stats;
  stats.escapes = 12345;  // overwritten
  EncodeOptions eo;
  eo.level = 2;
  eo.stats = &stats;
  const auto bytes = MustEncode(InputOf(k, v, 8), eo);
  EXPECT_EQ(stats.sink_values, 0u);
  EXPECT_EQ(stats.coded_symbols, static_cast<uint64_t>(2 * L * T * C));
  EXPECT_GT(stats.table_bytes, 0u);
  EXPECT_LT(stats.escapes, static_cast<uint64_t>(2 * L * T * C / 100));
  ASSERT_GT(stats.ideal_bits, 0.0);
  // Each stream's cost over the ideal is bounded by its final lane states (32 x 4 bytes) plus rounding.
  const double slack = static_cast<double>(2 * L) * 32 * 4 * 8;
  EXPECT_LE(stats.coded_bits, stats.ideal_bits * 1.01 + slack);
  EXPECT_GE(stats.coded_bits, stats.ideal_bits * 0.99 - slack);
  EXPECT_LT(stats.coded_bits, 8.0 * static_cast<double>(bytes.size()));
  std::printf("stories260K level 2: rANS %.0f bits, ideal %.0f bits (%+.2f %%)\n", stats.coded_bits, stats.ideal_bits,
              100.0 * (stats.coded_bits / stats.ideal_bits - 1.0));
  // Passthrough levels have no entropy stage.
  eo.level = kLevelInt8;
  MustEncode(InputOf(k, v), eo);
  EXPECT_EQ(stats.coded_symbols, 0u);
  EXPECT_EQ(stats.coded_bits, 0.0);
}

TEST(ChunkRoundTrip, SingleTokenAndSingleChannelEdges) {
  // Edge shapes that real models do not produce: one token, one channel, constant and non-finite data.
  std::vector<float> data = {1.5f, -2.0f, 0.0f, INFINITY, NAN, 65504.0f, 1e-8f, -7.25f};
  for (Level level : {1, 6, kLevelInt8, kLevelFp16}) {
    SCOPED_TRACE(LevelName(level));
    ChunkInput in;
    in.keys = TensorView::Dense(data.data(), DType::kF32, 2, 1, 4);
    in.values = TensorView::Dense(data.data(), DType::kF32, 8, 1, 1);
    EncodeOptions eo;
    eo.level = level;
    EXPECT_FALSE(EncodeChunk(in, eo).ok()) << "keys and values of different shapes must be refused";
    in.values = in.keys;
    const auto bytes = MustEncode(in, eo);
    Tensor k(DType::kF32, 2, 1, 4, Layout::kDense), v = k;
    MustDecode(bytes, {}, &k, &v);
    EXPECT_EQ(k.bytes, v.bytes);
    EXPECT_EQ(k.at(0, 0, 2), 0.0f);
    if (IsLossyLevel(level)) {
      EXPECT_TRUE(std::isinf(k.at(0, 0, 3))) << "non-finite values escape and survive";
      EXPECT_TRUE(std::isnan(k.at(1, 0, 0)));
    }
    std::vector<float> constant(6, 3.0f);
    in.keys = in.values = TensorView::Dense(constant.data(), DType::kF32, 1, 6, 1);
    const auto cbytes = MustEncode(in, eo);
    Tensor ck(DType::kF32, 1, 6, 1, Layout::kDense), cv = ck;
    MustDecode(cbytes, {}, &ck, &cv);
    for (int t = 0; t < 6; ++t) EXPECT_NEAR(ck.at(0, t, 0), 3.0f, 3.0f / 64) << t;
  }
}

TEST(ChunkRoundTrip, TextLevelCarriesTokenIds) {
  const auto& kv = Kv();
  std::vector<int32_t> ids(kv.tokens.begin(), kv.tokens.end());
  ChunkInput in;
  in.keys = kv.cache.keys();
  in.values = kv.cache.values();
  in.token_begin = 1000;
  EncodeOptions eo;
  eo.level = kLevelText;
  EXPECT_FALSE(EncodeChunk(in, eo).ok()) << "text without token ids must be refused";
  in.token_ids = ids.data();
  const auto bytes = MustEncode(in, eo);
  auto info = InspectChunk(bytes.data(), bytes.size());
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->level, kLevelText);
  EXPECT_EQ(info->token_begin, 1000);
  ASSERT_EQ(info->segments.size(), 1u);
  auto decoded = DecodeChunkTokens(bytes.data(), bytes.size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, ids);
  Tensor k(DType::kF32, in.keys.layers(), in.keys.tokens(), in.keys.channels(), Layout::kDense), v = k;
  Status st = DecodeChunk(bytes.data(), bytes.size(), {}, k.view, v.view);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("text"), std::string::npos) << st.message();
}

TEST(ChunkRoundTrip, WrongDestinationShapeNamesTheDimension) {
  const auto& kv = Kv();
  ChunkInput in;
  in.keys = kv.cache.keys();
  in.values = kv.cache.values();
  const auto bytes = MustEncode(in, {});
  const int64_t L = in.keys.layers(), T = in.keys.tokens(), C = in.keys.channels();
  struct Case {
    int64_t l, t, c;
    const char* dim;
  };
  for (const Case& cs : {Case{L + 1, T, C, "layers"}, Case{L, T - 1, C, "tokens"}, Case{L, T, C * 2, "channels"}}) {
    Tensor bad(DType::kF32, cs.l, cs.t, cs.c, Layout::kDense);
    Tensor good(DType::kF32, L, T, C, Layout::kDense);
    Status st = DecodeChunk(bytes.data(), bytes.size(), {}, good.view, bad.view);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find(std::string("values_out: ") + cs.dim), std::string::npos) << st.message();
    EXPECT_EQ(good.bytes, Tensor(DType::kF32, L, T, C, Layout::kDense).bytes) << "nothing written on a bad call";
  }
}

TEST(ChunkRoundTrip, SmolLm2SizesPerLevel) {
  if (!testing::SmolLm2Cached()) GTEST_SKIP() << "SmolLM2 is not cached (scripts/fetch_model.py smollm2)";
  std::string error;
  const testing::RealKv* kv = testing::GetRealKv("smollm2", 256, &error);
  ASSERT_NE(kv, nullptr) << error;
  ChunkInput in;
  in.keys = kv->cache.keys();
  in.values = kv->cache.values();
  const double values = 2.0 * static_cast<double>(in.keys.numel());
  double previous = 1e9;
  for (Level level = 1; level <= 6; ++level) {
    EncodeOptions eo;
    eo.level = level;
    eo.threads = 2;
    const auto bytes = MustEncode(in, eo);
    Tensor k(DType::kF16, in.keys.layers(), in.keys.tokens(), in.keys.channels(), Layout::kDense), v = k;
    MustDecode(bytes, {}, &k, &v);
    const double bits = 8.0 * static_cast<double>(bytes.size()) / values;
    std::printf("SmolLM2 256 tokens, level %d (in-chunk tables): %.3f bits/value\n", level, bits);
    EXPECT_LT(bits, previous);
    previous = bits;
  }
}

}  // namespace
}  // namespace kvstream
