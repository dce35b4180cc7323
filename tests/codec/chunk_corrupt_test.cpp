// Untrusted chunk bytes: truncation, bit flips, header and segment fields that lie (with their CRCs
// recomputed so the field check itself is what trips), and limits. Every case must give a clear error
// and never crash, read out of bounds or write outside the destination (run under ASan in CI).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "chunk_crcs.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "test_views.h"

namespace kvstream {
namespace {

using testing::FixAllCrcs;
using testing::FixHeaderCrc;
using testing::HeaderBytes;
using testing::Layout;
using testing::Tensor;

constexpr int kTokens = 48;

const testing::RealKv& Kv() { return testing::MustGetRealKv("stories260K", kTokens); }

std::vector<uint8_t> Encode(Level level) {
  const auto& kv = Kv();
  std::vector<int32_t> ids(kv.tokens.begin(), kv.tokens.end());
  ChunkInput in;
  in.keys = kv.cache.keys();
  in.values = kv.cache.values();
  in.token_ids = ids.data();
  EncodeOptions eo;
  eo.level = level;
  auto r = EncodeChunk(in, eo);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

// Decodes into correctly shaped destinations; returns the status.
Status Decode(const std::vector<uint8_t>& b, const DecodeLimits& limits = {}) {
  const auto& kv = Kv();
  Tensor k(DType::kF16, kv.cache.layers, kTokens, kv.cache.kv_dim, Layout::kDense), v = k;
  DecodeOptions o;
  o.limits = limits;
  if (b.size() >= 12 && static_cast<int8_t>(b[8]) == kLevelText) return DecodeChunkTokens(b.data(), b.size(), limits).status();
  return DecodeChunk(b.data(), b.size(), o, k.view, v.view);
}

template <typename T>
void Put(std::vector<uint8_t>* b, size_t offset, T value) {
  std::memcpy(b->data() + offset, &value, sizeof(T));
}

const std::vector<Level> kLevels = {1, 4, kLevelInt8, kLevelFp16, kLevelText};

TEST(ChunkCorrupt, TruncationAtAnyLengthFails) {
  for (Level level : kLevels) {
    const auto good = Encode(level);
    ASSERT_TRUE(Decode(good).ok());
    for (size_t n = 0; n < good.size(); n += (n < 400 ? 1 : 61)) {
      std::vector<uint8_t> b(good.begin(), good.begin() + static_cast<long>(n));
      Status st = Decode(b);
      ASSERT_FALSE(st.ok()) << LevelName(level) << " truncated to " << n;
      EXPECT_EQ(st.code(), StatusCode::kCorruptData) << st.ToString();
      EXPECT_FALSE(InspectChunk(b.data(), b.size()).ok());
    }
    std::vector<uint8_t> longer = good;
    longer.push_back(0);
    EXPECT_NE(Decode(longer).message().find("total bytes"), std::string::npos);
  }
}

TEST(ChunkCorrupt, EveryBitFlipIsDetected) {
  std::mt19937 rng(11);
  for (Level level : kLevels) {
    const auto good = Encode(level);
    for (int i = 0; i < 400; ++i) {
      std::vector<uint8_t> b = good;
      const size_t pos = i < 200 ? static_cast<size_t>(i) % b.size() : rng() % b.size();
      b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
      Status st = Decode(b);
      ASSERT_FALSE(st.ok()) << LevelName(level) << " flip at " << pos;
      EXPECT_FALSE(InspectChunk(b.data(), b.size()).ok());
    }
  }
}

struct Lie {
  size_t offset;
  int width;  // bytes
  uint64_t value;
  const char* expect;  // a word the error must contain
};

TEST(ChunkCorrupt, LyingHeaderFieldsAreNamed) {
  const auto good = Encode(2);
  const uint32_t hb = HeaderBytes(good);
  const std::vector<Lie> lies = {
      {0, 1, 'X', "magic"},
      {4, 2, 1, "version"},
      {4, 2, 2, "version"},  // version 2: 32-lane rANS streams
      {4, 2, 3, "version"},  // version 3: rANS states stored as uint32
      {4, 2, 6, "unsupported version"},  // version 6: the last with the cachegen-token scheme
      {6, 2, 65, "header size"},
      {8, 1, 99, "level"},
      {9, 1, 9, "scheme"},
      {9, 1, 2, "scheme"},  // cachegen-token, retired in version 7
      {10, 1, 7, "source dtype"},
      {11, 1, 1, "stored dtype"},
      {12, 1, 0x80, "flags"},
      {12, 1, 0, "profile hash"},
      {13, 1, 3, "sink rows"},               // a chunk at position 0 has 4 sink rows
      {13, 1, 0, "sink rows"},
      {32, 8, 4, "sink rows"},               // moved past the sinks but still claims 4
      {16, 4, 0, "layers = 0"},
      {16, 4, 5000, "layers = 5000 exceeds limit"},
      {16, 4, 6, "segment count"},
      {20, 4, 0xffffffffu, "tokens"},
      {24, 4, 1u << 20, "channels"},
      {28, 4, 0xffffffffu, "segment count"},
      {28, 4, 3, "segment count"},
      {32, 8, uint64_t{1} << 63, "token begin"},
      {40, 8, 0x1234, "profile hash"},
      {48, 8, 12345, "total bytes"},
      {56, 8, 1, "reserved"},
      {64, 8, 0, "offset"},                      // first segment's offset
      {64 + 8, 4, 0xfffffff0u, "size"},           // first segment's size
      {64 + 8, 4, 3, "offset"},                   // shorter: the next offset no longer follows
      {64 + 16, 4, 1, "out of order"},            // first segment claims layer 1
      {64 + 20, 1, 1, "out of order"},            // ... or values
      {64 + 21, 1, 1, "out of order"},            // reserved byte
  };
  for (const Lie& lie : lies) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + lie.offset, &lie.value, static_cast<size_t>(lie.width));
    if (lie.offset != 28) FixHeaderCrc(&b);
    Status st = Decode(b);
    ASSERT_FALSE(st.ok()) << "offset " << lie.offset;
    EXPECT_NE(st.message().find(lie.expect), std::string::npos) << "offset " << lie.offset << ": " << st.ToString();
  }
  // A stale header CRC is caught by itself.
  std::vector<uint8_t> b = good;
  b[hb - 1] ^= 1;
  EXPECT_NE(Decode(b).message().find("CRC32C"), std::string::npos);
}

TEST(ChunkCorrupt, LyingSegmentFieldsAreNamed) {
  const auto good = Encode(3);
  const uint32_t seg = HeaderBytes(good);  // the first segment's payload
  // Channel-uniform in-chunk segment: u32 stream bytes, u32 escapes, 4 fp16 sink rows (the chunk starts at
  // position 0), f32 step, fp16 means, bank.
  const int channels = Kv().cache.kv_dim;
  const size_t params = seg + 8 + 2 * 4 * channels;
  const size_t bank = params + 4 + 2 * channels;
  const Lie lies[] = {
      {seg, 4, 0xffffff00u, "rANS stream"},
      {seg, 4, 1, "left over"},
      {seg + 4, 4, 0x7fffffffu, "escape count"},
      {seg + 4, 4, 1, "escape"},
      {bank, 1, 0, "table count"},
      {bank + 1, 1, 0, "escape symbol"},   // first table's lo = 0
      {bank + 1, 2, 0x0180, "empty"},      // lo = 0x80, hi = 0x01
      {bank + 3, 2, 0x0fff, "4096"},       // escape frequency breaks the sum
      {params, 4, 0x7fc00000u, "step"},    // NaN
      {params, 4, 0xbf800000u, "step"},    // -1
      {params + 4, 2, 0x7c00, "mean"},     // +inf
  };
  for (const Lie& lie : lies) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + lie.offset, &lie.value, static_cast<size_t>(lie.width));
    FixAllCrcs(&b);
    Status st = Decode(b);
    ASSERT_FALSE(st.ok()) << "offset " << lie.offset - seg;
    EXPECT_EQ(st.code(), StatusCode::kCorruptData) << st.ToString();
    EXPECT_NE(st.message().find(lie.expect), std::string::npos) << "offset " << lie.offset - seg << ": " << st.ToString();
    EXPECT_NE(st.message().find("segment (layer 0, keys)"), std::string::npos) << st.ToString();
  }
}

// The sink-row count is fixed by the level and the token range: any other value is refused, on every
// level (non-lossy levels have none).
TEST(ChunkCorrupt, WrongSinkRowCountsAreRejected) {
  for (Level level : kLevels) {
    const auto good = Encode(level);
    ASSERT_EQ(good[13], IsLossyLevel(level) ? 4 : 0) << LevelName(level);
    for (uint8_t lie : {uint8_t{0}, uint8_t{1}, uint8_t{4}, uint8_t{5}, uint8_t{255}}) {
      if (lie == good[13]) continue;
      std::vector<uint8_t> b = good;
      b[13] = lie;
      FixHeaderCrc(&b);
      Status st = Decode(b);
      ASSERT_FALSE(st.ok()) << LevelName(level) << " sink rows " << int{lie};
      EXPECT_EQ(st.code(), StatusCode::kCorruptData) << st.ToString();
      EXPECT_NE(st.message().find("sink rows"), std::string::npos) << st.ToString();
      EXPECT_FALSE(InspectChunk(b.data(), b.size()).ok());
    }
  }
}

// Random byte mutations with every CRC recomputed reach the entropy decoder and the dequantiser; any
// outcome but a crash (or an ASan report) is acceptable, and a success still fills the destination.
TEST(ChunkCorrupt, RandomMutationsBehindValidCrcsNeverCrash) {
  std::mt19937 rng(5);
  for (Level level : kLevels) {
    const auto good = Encode(level);
    const uint32_t hb = HeaderBytes(good);
    int failures = 0;
    for (int i = 0; i < 250; ++i) {
      std::vector<uint8_t> b = good;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int j = 0; j < edits; ++j) {
        const size_t pos = (i % 5 == 0) ? rng() % hb : hb + rng() % (b.size() - hb);
        b[pos] = static_cast<uint8_t>(rng());
      }
      FixAllCrcs(&b);
      failures += !Decode(b).ok();
    }
    EXPECT_GT(failures, 0) << LevelName(level);
  }
}

// The decoder groups a chunk's segments by what the CPU's rANS kernel takes at once (two layers for
// AVX-512, one for AVX2 and portable). Every kernel and grouping gives the same bytes for a good chunk
// and, behind valid CRCs, the same verdict (and bytes) for mutated segments. The model's odd layer count
// leaves one group short.
TEST(ChunkCorrupt, EveryRansKernelGivesTheSameVerdict) {
  const auto& kv = Kv();
  ASSERT_EQ(kv.cache.layers % 2, 1);
  const auto good = Encode(3);
  const uint32_t hb = HeaderBytes(good);
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) {
    std::vector<uint8_t> b = good;
    if (i > 0) {
      b[hb + rng() % (b.size() - hb)] = static_cast<uint8_t>(rng());
      FixAllCrcs(&b);
    }
    auto decode = [&](const char* disable, Tensor* k, Tensor* v) {
      if (disable != nullptr) setenv(disable, "1", 1);
      const Status st = DecodeChunk(b.data(), b.size(), {}, k->view, v->view);
      if (disable != nullptr) unsetenv(disable);
      return st;
    };
    Tensor want_k(DType::kF16, kv.cache.layers, kTokens, kv.cache.kv_dim, Layout::kDense), want_v = want_k;
    const Status want = decode(nullptr, &want_k, &want_v);
    if (i == 0) {
      ASSERT_TRUE(want.ok()) << want.ToString();
    }
    for (const char* disable : {"KVSTREAM_DISABLE_AVX512", "KVSTREAM_DISABLE_AVX2"}) {
      SCOPED_TRACE(std::string(disable) + ", mutation " + std::to_string(i));
      Tensor k(DType::kF16, kv.cache.layers, kTokens, kv.cache.kv_dim, Layout::kDense), v = k;
      const Status st = decode(disable, &k, &v);
      EXPECT_EQ(st.ToString(), want.ToString());
      if (st.ok() && want.ok()) {
        EXPECT_EQ(k.bytes, want_k.bytes);
        EXPECT_EQ(v.bytes, want_v.bytes);
      }
    }
  }
}

TEST(ChunkCorrupt, LimitsAreEnforcedAndNamed) {
  const auto good = Encode(1);
  DecodeLimits limits;
  limits.max_layers = 2;
  Status st = Decode(good, limits);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("layers"), std::string::npos) << st.message();
  limits = {};
  limits.max_tokens = kTokens - 1;
  EXPECT_NE(Decode(good, limits).message().find("tokens"), std::string::npos);
  limits = {};
  limits.max_channels = 8;
  EXPECT_NE(Decode(good, limits).message().find("channels"), std::string::npos);
  limits = {};
  limits.max_values = 1000;
  EXPECT_EQ(Decode(good, limits).code(), StatusCode::kResourceExhausted);
  limits = {};
  limits.max_chunk_bytes = good.size() - 1;
  EXPECT_EQ(Decode(good, limits).code(), StatusCode::kResourceExhausted);
  limits = {};
  limits.max_segment_bytes = 16;
  EXPECT_EQ(Decode(good, limits).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(Decode(good).ok());
}

TEST(ChunkCorrupt, NullAndEmptyInput) {
  EXPECT_FALSE(InspectChunk(nullptr, 0).ok());
  Tensor k(DType::kF32, 1, 1, 1, Layout::kDense), v = k;
  EXPECT_FALSE(DecodeChunk(nullptr, 0, {}, k.view, v.view).ok());
  EXPECT_FALSE(DecodeChunkTokens(nullptr, 0).ok());
}

}  // namespace
}  // namespace kvstream
