// `kvstream encode`, `inspect`, `decode` and `kv dump` as a user runs them, on the tiny real model: the fp16
// level's chunks decode to the dumped KV rounded to fp16 bit for bit (docs/kv-dump-format.md's archive read
// back here), a lossy level's decode stays near it, inspect prints a chunk's header, and a damaged or cut
// chunk, a device and a folder are refused with what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/half.h"
#include "tests/test_files.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::ReadBytes;
using kvstream::testing::Refuses;
using kvstream::testing::RunShell;
using kvstream::testing::TempDir;
using kvstream::testing::WriteBytes;

constexpr int kLayers = 5, kTokens = 160, kChannels = 32;  // stories260K: 5 layers, kv_dim 32
const std::string kModel = " --model stories260K --tokens 160 --threads 1";

uint32_t Le(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// The members of a stored (uncompressed) ZIP archive, by name: what numpy.savez writes.
std::map<std::string, std::vector<uint8_t>> StoredZipMembers(const std::vector<uint8_t>& zip) {
  std::map<std::string, std::vector<uint8_t>> members;
  size_t at = 0;
  while (at + 30 <= zip.size() && Le(&zip[at], 4) == 0x04034b50) {
    EXPECT_EQ(Le(&zip[at + 8], 2), 0u) << "a member is compressed";
    const size_t size = Le(&zip[at + 18], 4), name = Le(&zip[at + 26], 2), extra = Le(&zip[at + 28], 2);
    const size_t data = at + 30 + name + extra;
    if (data + size > zip.size()) break;
    members[std::string(zip.begin() + static_cast<std::ptrdiff_t>(at + 30),
                        zip.begin() + static_cast<std::ptrdiff_t>(at + 30 + name))] =
        std::vector<uint8_t>(zip.begin() + static_cast<std::ptrdiff_t>(data),
                             zip.begin() + static_cast<std::ptrdiff_t>(data + size));
    at = data + size;
  }
  return members;
}

// The float32 data of a version 1.0 .npy member whose header names `shape`.
std::vector<float> NpyFloats(const std::vector<uint8_t>& npy, const std::string& shape) {
  if (npy.size() < 10 || std::memcmp(npy.data(), "\x93NUMPY\x01\x00", 8) != 0) return {};
  const size_t header = Le(&npy[8], 2);
  const std::string dict(npy.begin() + 10, npy.begin() + static_cast<std::ptrdiff_t>(10 + header));
  EXPECT_NE(dict.find("'descr': '<f4'"), std::string::npos) << dict;
  EXPECT_NE(dict.find("'shape': " + shape), std::string::npos) << dict;
  std::vector<float> out((npy.size() - 10 - header) / 4);
  std::memcpy(out.data(), npy.data() + 10 + header, out.size() * 4);
  return out;
}

class CodecCli : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_ / name; }
  // Encodes 160 tokens in chunks of 64 (the last 32) at `level` into folder `name`.
  void Encode(const std::string& level, const std::string& name) {
    std::string out;
    const std::string encode = " encode" + kModel + " --chunk-tokens 64 --level " + level + " --out " + Path(name);
    ASSERT_EQ(RunShell(KVSTREAM_CLI + encode, &out), 0) << out;
    EXPECT_NE(out.find("tokens [128, 160)"), std::string::npos) << out;
  }
  std::string Chunks(const std::string& name) const {
    return Path(name + "/chunk_00000.kvc") + " " + Path(name + "/chunk_00001.kvc") + " " + Path(name + "/chunk_00002.kvc");
  }
  // The dumped KV, keys then values, each [layers][tokens][channels].
  void Dump(std::vector<float>* k, std::vector<float>* v) {
    std::string out;
    const std::string dump = " kv dump" + kModel + " --text /usr/share/common-licenses/GPL-3 --out " + Path("kv.npz");
    ASSERT_EQ(RunShell(KVSTREAM_CLI + dump, &out), 0) << out;
    auto members = StoredZipMembers(ReadBytes(Path("kv.npz")));
    ASSERT_TRUE(members.count("k.npy") && members.count("v.npy") && members.count("config.npy")) << members.size();
    const std::string shape = "(5, 160, 32)";  // kLayers, kTokens, kChannels
    *k = NpyFloats(members["k.npy"], shape);
    *v = NpyFloats(members["v.npy"], shape);
    ASSERT_EQ(k->size(), static_cast<size_t>(kLayers * kTokens * kChannels));
    ASSERT_EQ(v->size(), k->size());
  }

  TempDir dir_;
};

// Where `kvstream decode --out` put a context value: per chunk (64, 64, 32 tokens) its keys, then its values,
// each [layers][chunk tokens][channels].
size_t RawIndex(int kv, int l, int t, int c) {
  const int chunk = t / 64, first = chunk * 64, n = std::min(64, kTokens - first);
  const size_t before = static_cast<size_t>(2 * kLayers * first * kChannels);
  return before + static_cast<size_t>(((kv * kLayers + l) * n + (t - first)) * kChannels + c);
}

TEST_F(CodecCli, Fp16ChunksDecodeToTheDumpedKvRounded) {
  Encode("fp16", "fp16");
  std::string out;
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " decode " + Chunks("fp16") + " --out " + Path("fp16.raw"), &out), 0) << out;
  const std::vector<uint8_t> raw = ReadBytes(Path("fp16.raw"));
  ASSERT_EQ(raw.size(), static_cast<size_t>(2 * kLayers * kTokens * kChannels * 2));
  std::vector<float> k, v;
  Dump(&k, &v);
  for (int kv = 0; kv < 2; ++kv) {
    for (int l = 0; l < kLayers; ++l) {
      for (int t = 0; t < kTokens; ++t) {
        for (int c = 0; c < kChannels; ++c) {
          const float want = (kv == 0 ? k : v)[static_cast<size_t>((l * kTokens + t) * kChannels + c)];
          const uint16_t got = static_cast<uint16_t>(Le(&raw[2 * RawIndex(kv, l, t, c)], 2));
          ASSERT_EQ(got, kvstream::FloatToHalf(want)) << kv << " " << l << " " << t << " " << c;
        }
      }
    }
  }
}

TEST_F(CodecCli, ALossyLevelDecodesNearTheKvAndInspects) {
  Encode("3", "l3");
  std::string out;
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " inspect " + Path("l3/chunk_00002.kvc"), &out), 0) << out;
  for (const char* line : {"level        L3", "tokens       [128, 160)", "CRC32C       header and every segment verified"}) {
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
  }
  out.clear();
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " decode " + Chunks("l3") + " --dtype f32 --out " + Path("l3.raw"), &out), 0)
      << out;
  const std::vector<uint8_t> raw = ReadBytes(Path("l3.raw"));
  ASSERT_EQ(raw.size(), static_cast<size_t>(2 * kLayers * kTokens * kChannels * 4));
  std::vector<float> k, v;
  Dump(&k, &v);
  double error = 0, energy = 0;
  for (int kv = 0; kv < 2; ++kv) {
    for (int l = 0; l < kLayers; ++l) {
      for (int t = 0; t < kTokens; ++t) {
        for (int c = 0; c < kChannels; ++c) {
          const float want = (kv == 0 ? k : v)[static_cast<size_t>((l * kTokens + t) * kChannels + c)];
          float got;
          std::memcpy(&got, &raw[4 * RawIndex(kv, l, t, c)], 4);
          ASSERT_TRUE(std::isfinite(got));
          error += (got - want) * (got - want);
          energy += want * want;
        }
      }
    }
  }
  EXPECT_LT(error, 0.05 * energy) << "L3's error is a few percent of the KV's energy";
  EXPECT_GT(error, 0.0) << "L3 is lossy";
}

TEST_F(CodecCli, DamagedAndCutChunksAreRefused) {
  Encode("3", "l3");
  std::vector<uint8_t> bytes = ReadBytes(Path("l3/chunk_00001.kvc"));
  bytes[bytes.size() / 2] ^= 0x10;
  WriteBytes(Path("flipped.kvc"), bytes);
  EXPECT_TRUE(Refuses(KVSTREAM_CLI + (" decode " + Path("flipped.kvc")), "does not match stored"));
  bytes = ReadBytes(Path("l3/chunk_00001.kvc"));
  bytes.resize(bytes.size() - 100);
  WriteBytes(Path("cut.kvc"), bytes);
  EXPECT_TRUE(Refuses(KVSTREAM_CLI + (" inspect " + Path("cut.kvc")), "but the buffer holds"));
  // A device without end, and a folder: refused before any read.
  for (const std::string& path : {std::string("/dev/zero"), dir_.path()}) {
    EXPECT_TRUE(Refuses(KVSTREAM_CLI + (" decode " + path), path + ": not a regular file"));
  }
}

}  // namespace
