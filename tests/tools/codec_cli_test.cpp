// `kvstream encode`, `inspect`, `decode` and `kv dump` as a user runs them, on the tiny real model: the fp16
// level's chunks decode to the dumped KV (read back with ReadKvDump) rounded to fp16 bit for bit, a lossy
// level's decode stays near it, inspect prints a chunk's header, and a damaged or cut chunk, a device and a
// folder are refused with what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "kvstream/kv_dump.h"
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
    auto read = kvstream::ReadKvDump(Path("kv.npz"));
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    ASSERT_EQ(read->dtype, kvstream::DType::kF32);
    ASSERT_EQ(read->keys.size(), static_cast<size_t>(kLayers * kTokens * kChannels) * 4);
    ASSERT_EQ(read->tokens, kTokens);
    k->resize(read->keys.size() / 4);
    v->resize(k->size());
    std::memcpy(k->data(), read->keys.data(), read->keys.size());
    std::memcpy(v->data(), read->values.data(), read->values.size());
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
          const size_t at = 2 * RawIndex(kv, l, t, c);
          const uint16_t got = static_cast<uint16_t>(raw[at] | raw[at + 1] << 8);
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

// A dump of the same KV encodes, without a model, to the same chunks as the prefill (flags that choose text
// to prefill are refused beside it); inspect describes the dump.
TEST_F(CodecCli, ADumpEncodesToTheSameChunksAsThePrefill) {
  std::vector<float> k, v;
  Dump(&k, &v);
  std::string out;
  const std::string encode = std::string(KVSTREAM_CLI) + " encode --kv-dump " + Path("kv.npz") + " --chunk-tokens 64 --level 3";
  ASSERT_EQ(RunShell(encode + " --out " + Path("from_dump"), &out), 0) << out;
  EXPECT_NE(out.find("tokens [128, 160)"), std::string::npos) << out;
  out.clear();
  const std::string prefill = std::string(KVSTREAM_CLI) + " encode" + kModel + " --chunk-tokens 64 --level 3";
  ASSERT_EQ(RunShell(prefill + " --out " + Path("from_prefill"), &out), 0) << out;
  for (const char* chunk : {"/chunk_00000.kvc", "/chunk_00001.kvc", "/chunk_00002.kvc"}) {
    EXPECT_EQ(ReadBytes(Path("from_dump") + chunk), ReadBytes(Path("from_prefill") + chunk)) << chunk;
  }
  EXPECT_TRUE(Refuses(encode + " --tokens 64 --out " + Path("x"), "--tokens chooses text to prefill"));
  out.clear();
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " inspect " + Path("kv.npz"), &out), 0) << out;
  EXPECT_NE(out.find("KV dump"), std::string::npos) << out;
  EXPECT_NE(out.find("f32, 5 layers x 160 tokens x 32 channels"), std::string::npos) << out;
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
