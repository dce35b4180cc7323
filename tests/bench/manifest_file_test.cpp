// Simulation manifests: the JSON round trip, and malformed files refused with the field named.
#include <gtest/gtest.h>

#include "bench/manifest_file.h"

namespace kvstream::bench {
namespace {

constexpr const char* kGood = R"({"model": "m", "source": "s",
  "levels": [{"level": "L2", "quality": 0.97, "s_per_token": 1e-5},
             {"level": "text", "quality": 1.0, "s_per_token": 1e-3}],
  "chunk_tokens": [256, 100],
  "bytes": [[1000, 1024], [400, 400]]})";

TEST(ManifestFile, ParsesAndRoundTrips) {
  auto f = ParseManifestJson(kGood, "good");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->manifest.num_chunks, 2);
  EXPECT_EQ(f->manifest.total_tokens, 356);
  EXPECT_EQ(f->manifest.levels[1].level, kLevelText);
  EXPECT_EQ(f->manifest.bytes[0][1], 1024u);
  EXPECT_DOUBLE_EQ(f->costs.s_per_token.at(2), 1e-5);
  auto again = ParseManifestJson(ManifestToJson(*f), "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->manifest.bytes, f->manifest.bytes);
  EXPECT_EQ(again->manifest.chunk_tokens, f->manifest.chunk_tokens);
  EXPECT_EQ(again->costs.s_per_token, f->costs.s_per_token);
}

TEST(ManifestFile, RefusesMalformedInput) {
  const struct {
    const char* json;
    const char* names;
  } cases[] = {
      {"not json", "not a JSON object"},
      {R"({"levels": [], "chunk_tokens": [], "bytes": []})", "levels"},
      {R"({"levels": [{"level": "L99", "quality": 1, "s_per_token": 0}], "chunk_tokens": [1], "bytes": [[1]]})", "levels[0].level"},
      {R"({"levels": [{"level": "L1", "quality": 2, "s_per_token": 0}], "chunk_tokens": [1], "bytes": [[1]]})", "quality"},
      {R"({"levels": [{"level": "L1", "quality": 1, "s_per_token": 0}], "chunk_tokens": [1, 2], "bytes": [[1]]})", "equal length"},
      {R"({"levels": [{"level": "L1", "quality": 1, "s_per_token": 0}], "chunk_tokens": [0], "bytes": [[1]]})", "chunk 0"},
      {R"({"levels": [{"level": "L1", "quality": 1, "s_per_token": 0}], "chunk_tokens": [4], "bytes": [[1, 2]]})", "one size per level"},
      {R"({"levels": [{"level": "L1", "quality": 1, "s_per_token": 0}], "chunk_tokens": [4], "bytes": [[-5]]})", "non-negative"},
  };
  for (const auto& c : cases) {
    auto f = ParseManifestJson(c.json, "bad");
    ASSERT_FALSE(f.ok()) << c.json;
    EXPECT_NE(f.status().message().find(c.names), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace kvstream::bench
