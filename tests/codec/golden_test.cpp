// The golden chunk files (docs/format.md, "Golden files"): every file of the current format version decodes
// to exactly the values its MANIFEST recorded when it was written, and every file of a retired version is
// refused by its version. A change to the decoded bits of a format version fails here.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codec/common/container_format.h"
#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "tests/codec/golden/golden_manifest.h"

namespace kvstream::golden {
namespace {

namespace fs = std::filesystem;

std::string Folder(int version) { return std::string(KVSTREAM_GOLDEN_DIR) + "/v" + std::to_string(version); }

std::vector<uint8_t> MustRead(const std::string& path) {
  auto bytes = ReadWholeFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? std::move(bytes).value() : std::vector<uint8_t>{};
}

std::vector<Entry> MustReadManifest(int version) {
  std::vector<Entry> entries;
  std::string error;
  EXPECT_TRUE(ReadManifest(Folder(version) + "/MANIFEST", &entries, &error)) << error;
  return entries;
}

// The names of the folder's files that end in `suffix`.
std::set<std::string> FilesEndingIn(const std::string& folder, const std::string& suffix) {
  std::set<std::string> names;
  for (const fs::directory_entry& f : fs::directory_iterator(folder)) {
    const std::string name = f.path().filename().string();
    if (name.size() > suffix.size() && name.ends_with(suffix)) names.insert(name);
  }
  return names;
}

// The FNV-1a of what the chunk decodes to, as the MANIFEST defines it: dense fp16 keys then values, or
// a text chunk's u32 token ids.
Result<uint64_t> DecodedHash(const std::vector<uint8_t>& bytes, const ChunkInfo& info, const Profile* profile, int threads) {
  if (info.level == kLevelText) {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, DecodeChunkTokens(bytes.data(), bytes.size()));
    return Fnv1a64(ids.data(), ids.size() * sizeof(int32_t));
  }
  const size_t half = static_cast<size_t>(info.layers * info.tokens * info.channels);
  std::vector<uint16_t> decoded(2 * half);
  DecodeOptions options;
  options.profile = profile;
  options.threads = threads;
  const auto view = [&](uint16_t* data) {
    return TensorView::Dense(data, DType::kF16, info.layers, info.tokens, info.channels);
  };
  KVSTREAM_RETURN_IF_ERROR(DecodeChunk(bytes.data(), bytes.size(), options, view(decoded.data()), view(decoded.data() + half)));
  return Fnv1a64(decoded.data(), decoded.size() * sizeof(uint16_t));
}

TEST(Golden, CurrentVersionDecodesToItsManifest) {
  const std::string folder = Folder(codec::kChunkVersion);
  const std::vector<Entry> manifest = MustReadManifest(codec::kChunkVersion);
  ASSERT_FALSE(manifest.empty());
  std::set<std::string> listed;
  for (const Entry& e : manifest) {
    SCOPED_TRACE(e.name);
    listed.insert(e.name);
    EXPECT_EQ(e.version, codec::kChunkVersion);
    const std::vector<uint8_t> bytes = MustRead(folder + "/" + e.name);
    auto info = InspectChunk(bytes.data(), bytes.size());
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    EXPECT_EQ(info->version, e.version);
    EXPECT_EQ(LevelName(info->level), e.level);
    EXPECT_EQ(IsLossyLevel(info->level) ? SchemeName(info->scheme) : "none", e.scheme);
    uint32_t header_crc;
    std::memcpy(&header_crc, bytes.data() + info->header_bytes - 4, 4);
    EXPECT_EQ(Hex(header_crc, 8), Hex(e.header_crc, 8));
    ASSERT_EQ(info->segments.size(), e.segment_crcs.size());
    for (size_t i = 0; i < e.segment_crcs.size(); ++i) {
      EXPECT_EQ(Hex(info->segments[i].crc32c, 8), Hex(e.segment_crcs[i], 8)) << "segment " << i;
    }
    std::optional<Profile> profile;
    if (e.profile != "-") {
      const std::vector<uint8_t> p = MustRead(folder + "/" + e.profile);
      auto parsed = Profile::Parse(p.data(), p.size());
      ASSERT_TRUE(parsed.ok()) << e.profile << ": " << parsed.status().ToString();
      profile = std::move(parsed).value();
    }
    // One thread and several: the segments' grouping into tasks must not change a bit.
    for (int threads : {1, 3}) {
      auto hash = DecodedHash(bytes, *info, profile ? &*profile : nullptr, threads);
      ASSERT_TRUE(hash.ok()) << hash.status().ToString();
      EXPECT_EQ(Hex(*hash, 16), Hex(e.hash, 16)) << threads << " threads";
    }
  }
  EXPECT_EQ(FilesEndingIn(folder, ".kvck"), listed) << "every golden chunk is in the MANIFEST and vice versa";
}

// Each retired version's golden files fail by their version, not as corrupt data: chunks in DecodeChunk,
// DecodeChunkTokens and InspectChunk alike, profiles in Profile::Parse.
TEST(Golden, RetiredVersionsAreUnsupported) {
  for (int version = 6; version < codec::kChunkVersion; ++version) {
    const std::string folder = Folder(version);
    ASSERT_TRUE(fs::is_directory(folder)) << folder;
    const std::vector<Entry> manifest = MustReadManifest(version);
    ASSERT_FALSE(manifest.empty());
    std::set<std::string> listed, profiles;
    for (const Entry& e : manifest) {
      SCOPED_TRACE(folder + "/" + e.name);
      listed.insert(e.name);
      if (e.profile != "-") profiles.insert(e.profile);
      const std::vector<uint8_t> bytes = MustRead(folder + "/" + e.name);
      ASSERT_GE(bytes.size(), 6u);
      uint16_t stored;
      std::memcpy(&stored, bytes.data() + 4, 2);
      EXPECT_EQ(stored, version);
      // The version is the first thing read: destinations of any shape see the same error.
      uint16_t k = 0, v = 0;
      const Status decoded =
          e.level == "text" ? DecodeChunkTokens(bytes.data(), bytes.size()).status()
                            : DecodeChunk(bytes.data(), bytes.size(), {}, TensorView::Dense(&k, DType::kF16, 1, 1, 1),
                                          TensorView::Dense(&v, DType::kF16, 1, 1, 1));
      const Status outcomes[] = {InspectChunk(bytes.data(), bytes.size()).status(), decoded};
      for (const Status& st : outcomes) {
        EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
        EXPECT_NE(st.message().find("unsupported version"), std::string::npos) << st.ToString();
      }
    }
    EXPECT_EQ(FilesEndingIn(folder, ".kvck"), listed);
    EXPECT_EQ(FilesEndingIn(folder, ".kvpf"), profiles);
    for (const std::string& name : profiles) {
      SCOPED_TRACE(folder + "/" + name);
      const std::vector<uint8_t> bytes = MustRead(folder + "/" + name);
      auto parsed = Profile::Parse(bytes.data(), bytes.size());
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().code(), StatusCode::kUnsupported) << parsed.status().ToString();
      EXPECT_NE(parsed.status().message().find("unsupported version"), std::string::npos) << parsed.status().ToString();
    }
  }
}

}  // namespace
}  // namespace kvstream::golden
