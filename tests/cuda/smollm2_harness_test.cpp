// The GPU decoder's kernels on real SmolLM2 chunks, run on the CPU by the CPU launcher, against the CPU
// decoder byte for byte in every destination layout: every scheme (channel-uniform with profile tables
// and with in-chunk tables, transform, predicted), low, middle and top levels, with and without sink rows,
// with fine rows, and a batch of chunks in one launch sequence. The profile is learned here on the first
// 448 tokens; the chunks are later tokens (and, for sink rows, the first ones). Chunks are short: the CPU
// launcher is serial.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bench/gpu/gpu_chunk_set.h"
#include "codec/common/profile_data.h"
#include "cuda/testing/host_launch.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "tests/codec/kv_fixture.h"
#include "tests/cuda/layouts.h"
#include "tests/test_files.h"

namespace kvstream {
namespace {

constexpr int kSampleTokens = 448;  // the predicted scheme needs 384 past the sinks
constexpr int kChunkTokens = 24;

const testing::RealKv* Kv() {
  std::string error;
  const testing::RealKv* kv = testing::GetRealKv("smollm2", kSampleTokens + 2 * kChunkTokens, &error);
  EXPECT_NE(kv, nullptr) << error;
  return kv;
}

const Profile* LearnedProfile() {
  static const Profile* profile = [] {
    const testing::RealKv* kv = Kv();
    ProfileOptions options;
    options.model = "SmolLM2-135M";
    options.transform = true;
    options.predict = true;
    options.rope = kv->model->config().rope();
    ProfileBuilder builder(options);
    EXPECT_TRUE(builder.AddSample(SliceTokens(kv->cache.keys(), 0, kSampleTokens),
                                  SliceTokens(kv->cache.values(), 0, kSampleTokens)).ok());
    auto built = builder.Build();
    if (!built.ok()) std::fprintf(stderr, "profile: %s\n", built.status().ToString().c_str());
    return built.ok() ? new Profile(std::move(built).value()) : nullptr;
  }();
  return profile;
}

struct Case {
  std::string name;
  QuantScheme scheme;
  Level level;
  bool profile_tables;
  int64_t first_token;
  bool fine_rows;
};

std::vector<uint8_t> Encode(const Case& c, const Profile& profile) {
  const testing::RealKv* kv = Kv();
  ChunkInput in;
  in.keys = SliceTokens(kv->cache.keys(), c.first_token, kChunkTokens);
  in.values = SliceTokens(kv->cache.values(), c.first_token, kChunkTokens);
  in.token_begin = c.first_token;
  std::vector<float> importance(kChunkTokens, 0.0f);
  for (int t = 0; t < kChunkTokens; t += 5) importance[static_cast<size_t>(t)] = 1.0f;
  in.importance = importance.data();
  EncodeOptions eo;
  eo.level = c.level;
  eo.scheme = c.scheme;
  eo.profile = c.profile_tables ? &profile : nullptr;
  if (c.fine_rows) {
    eo.fine_min_importance = 0.5f;
    eo.fine_level = c.level - 2;
  }
  return EncodeChunk(in, eo).value();
}

TEST(GpuKernelsOnSmolLm2, EverySchemeAndLevelKindMatchesTheCpuDecoderInEveryLayout) {
  if (!testing::SmolLm2Cached()) GTEST_SKIP() << "SmolLM2 is not cached (scripts/fetch_model.py smollm2)";
  ASSERT_NE(Kv(), nullptr);
  ASSERT_NE(LearnedProfile(), nullptr);
  const Profile& profile = *LearnedProfile();
  const Level top = static_cast<Level>(profile.ladder().size());
  const int64_t later = kSampleTokens;
  const std::vector<Case> cases = {
      {"fp16", QuantScheme::kChannelUniform, kLevelFp16, false, later, false},
      {"int8", QuantScheme::kChannelUniform, kLevelInt8, false, later, false},
      {"channel-uniform L1", QuantScheme::kChannelUniform, 1, true, later, false},
      {"channel-uniform top", QuantScheme::kChannelUniform, top, true, later, false},
      {"channel-uniform L4 sinks", QuantScheme::kChannelUniform, 4, true, 0, false},
      {"channel-uniform in-chunk L3", QuantScheme::kChannelUniform, 3, false, later, false},
      {"transform L1", QuantScheme::kTransform, 1, true, later, false},
      {"transform L5 fine", QuantScheme::kTransform, 5, true, later, true},
      {"transform top sinks", QuantScheme::kTransform, top, true, 0, false},
      {"predicted L1", QuantScheme::kPredicted, 1, true, later, false},
      {"predicted L4 fine", QuantScheme::kPredicted, 4, true, later, true},
      {"predicted L6 fine sinks", QuantScheme::kPredicted, 6, true, 0, true},
      {"predicted top", QuantScheme::kPredicted, top, true, later + kChunkTokens, false},
  };
  const int64_t kv_heads = Kv()->model->config().n_kv_heads;
  for (const Case& c : cases) {
    const std::vector<uint8_t> bytes = Encode(c, profile);
    const ChunkInfo info = InspectChunk(bytes.data(), bytes.size()).value();
    const Profile* p = info.profile_hash ? &profile : nullptr;
    for (const char* kind : testing::kLayouts) {
      for (DType dtype : {DType::kF16, DType::kBF16}) {
        if (dtype == DType::kBF16 && std::string(kind) != "paged") continue;  // bf16's rounding: one layout is enough
        testing::Layout cpu = testing::MakeLayout(kind, dtype, info, kv_heads);
        testing::Layout gpu = testing::MakeLayout(kind, dtype, info, kv_heads);
        DecodeOptions options;
        options.profile = p;
        ASSERT_TRUE(DecodeChunkInto(bytes.data(), bytes.size(), options, cpu.destination).ok()) << c.name;
        const Status s = cuda::testing::DecodeChunksOnHost({{bytes.data(), bytes.size(), bytes.data(), bytes.size()}}, p,
                                                           gpu.destination);
        ASSERT_TRUE(s.ok()) << c.name << " " << cpu.name << ": " << s.ToString();
        for (size_t b = 0; b < cpu.storage.size(); ++b) {
          ASSERT_EQ(cpu.storage[b], gpu.storage[b]) << c.name << " " << cpu.name << " buffer " << b;
        }
      }
    }
    std::printf("%-28s %7zu bytes: bit-identical in every layout\n", c.name.c_str(), bytes.size());
  }
}

TEST(GpuKernelsOnSmolLm2, ABatchOfChunksOfSeveralSchemesDecodesInOneLaunchSequence) {
  if (!testing::SmolLm2Cached()) GTEST_SKIP() << "SmolLM2 is not cached (scripts/fetch_model.py smollm2)";
  ASSERT_NE(Kv(), nullptr);
  ASSERT_NE(LearnedProfile(), nullptr);
  const Profile& profile = *LearnedProfile();
  // Two consecutive chunks of one context, of different schemes, into one paged destination.
  const std::vector<uint8_t> first = Encode({"", QuantScheme::kPredicted, 3, true, kSampleTokens, true}, profile);
  const std::vector<uint8_t> second =
      Encode({"", QuantScheme::kChannelUniform, 2, true, kSampleTokens + kChunkTokens, false}, profile);
  const ChunkInfo a = InspectChunk(first.data(), first.size()).value();
  ChunkInfo whole = a;
  whole.tokens = 2 * kChunkTokens;
  const int64_t kv_heads = Kv()->model->config().n_kv_heads;
  testing::Layout cpu = testing::MakeLayout("paged", DType::kF16, whole, kv_heads);
  testing::Layout gpu = testing::MakeLayout("paged", DType::kF16, whole, kv_heads);
  DecodeOptions options;
  options.profile = &profile;
  for (const auto* bytes : {&first, &second}) {
    ASSERT_TRUE(DecodeChunkInto(bytes->data(), bytes->size(), options, cpu.destination).ok());
  }
  const Status s = cuda::testing::DecodeChunksOnHost(
      {{first.data(), first.size(), first.data(), first.size()}, {second.data(), second.size(), second.data(), second.size()}},
      &profile, gpu.destination);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(cpu.storage, gpu.storage);
}

// The chunk folder `kvstream bench gpu` carries to a GPU machine: written, read back, and every set's
// CPU hash is what the kernels decode it to.
TEST(GpuKernelsOnSmolLm2, BenchChunkFoldersHoldWhatTheKernelsDecode) {
  if (!testing::SmolLm2Cached()) GTEST_SKIP() << "SmolLM2 is not cached (scripts/fetch_model.py smollm2)";
  ASSERT_NE(LearnedProfile(), nullptr);
  const Profile& profile = *LearnedProfile();
  const testing::RealKv* kv = Kv();
  const TensorView keys = SliceTokens(kv->cache.keys(), 0, 2 * kChunkTokens);
  const TensorView values = SliceTokens(kv->cache.values(), 0, 2 * kChunkTokens);
  std::vector<float> importance = kv->cache.Importance();
  importance.resize(static_cast<size_t>(2 * kChunkTokens));
  bench::GpuChunkFolderOptions options;
  options.chunk_tokens = kChunkTokens;
  options.passthrough_tokens = kChunkTokens;
  const bench::GpuChunkFolder made = bench::MakeGpuChunkFolder(keys, values, importance, profile, options).value();
  testing::TempDir dir;
  ASSERT_TRUE(bench::WriteGpuChunkFolder(dir.path(), made).ok());
  const bench::GpuChunkFolder folder = bench::ReadGpuChunkFolder(dir.path()).value();
  ASSERT_EQ(folder.sets.size(), made.sets.size());
  EXPECT_EQ(folder.profile_bytes, profile.bytes());
  const int64_t L = keys.layers(), C = keys.channels();
  for (const bench::GpuChunkSet& set : folder.sets) {
    std::vector<uint16_t> kv16(static_cast<size_t>(2 * L * set.tokens * C));
    const KvDestination d = KvDestination::Contiguous(
        TensorView::Dense(kv16.data(), DType::kF16, L, set.tokens, C),
        TensorView::Dense(kv16.data() + kv16.size() / 2, DType::kF16, L, set.tokens, C), 1).value();
    std::vector<GpuChunk> chunks;
    for (const auto& c : set.chunks) chunks.push_back({c.data(), c.size(), c.data(), c.size()});
    ASSERT_TRUE(cuda::testing::DecodeChunksOnHost(chunks, &profile, d).ok()) << set.name;
    EXPECT_EQ(ProfileHash(reinterpret_cast<const uint8_t*>(kv16.data()), kv16.size() * 2), set.hash) << set.name;
  }
}

}  // namespace
}  // namespace kvstream
