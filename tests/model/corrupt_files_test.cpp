// Every loader on truncated, bit-flipped and lying files: an error naming the file, never a crash (this
// suite also runs under AddressSanitizer). Corrupted copies of the real models go to a temporary folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kvstream/model.h"
#include "model/loaders.h"
#include "model/tokenizers.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

using testing::ReadBytes;
using testing::TempDir;
using testing::WriteBytes;

std::string Dir(const std::string& p) { return p.substr(0, p.find_last_of('/')); }

void PutI32(std::vector<uint8_t>& b, size_t at, int32_t v) { std::memcpy(b.data() + at, &v, 4); }
void PutU64(std::vector<uint8_t>& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); }

// Loads `path`, expecting a non-OK status whose message names the file.
void ExpectError(const std::string& path, const std::string& what) {
  auto m = Model::Load(path, {});
  ASSERT_FALSE(m.ok()) << what << ": loaded";
  EXPECT_NE(m.status().message().find(path.substr(path.find_last_of('/') + 1)), std::string::npos)
      << what << ": " << m.status().ToString();
}

class Llama2cFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bin = testing::SharedModel("stories260K");
    ASSERT_FALSE(bin.empty());
    model_ = ReadBytes(bin);
    tok_ = ReadBytes(Dir(bin) + "/tok512.bin");
    ASSERT_EQ(model_.size(), 1056540u);
    WriteBytes(dir_.path() + "/tokenizer.bin", tok_);
  }
  std::string Write(const std::vector<uint8_t>& b, size_t n) {
    const std::string p = dir_.path() + "/model.bin";
    WriteBytes(p, b.data(), n);
    return p;
  }
  TempDir dir_;
  std::vector<uint8_t> model_, tok_;
};

TEST_F(Llama2cFiles, TruncatedCheckpointsAreRejected) {
  for (size_t n : {size_t{0}, size_t{3}, size_t{27}, size_t{28}, size_t{1000}, model_.size() - 4, model_.size() - 1}) {
    ExpectError(Write(model_, n), "truncated at " + std::to_string(n));
  }
  EXPECT_TRUE(Model::Load(Write(model_, model_.size()), {}).ok());
}

TEST_F(Llama2cFiles, LyingHeadersAreRejected) {
  const std::pair<int, int32_t> lies[] = {{0, 0},        {0, 1 << 30}, {1, -5},      {2, 100000}, {3, 0},
                                          {4, 3},        {4, 16},      {5, INT32_MIN}, {5, 0},     {6, -1},
                                          {6, 1 << 30}, {0, 65},      {5, 1 << 24}};
  for (const auto& [field, value] : lies) {
    std::vector<uint8_t> b = model_;
    PutI32(b, 4 * field, value);
    ExpectError(Write(b, b.size()), "header field " + std::to_string(field) + " = " + std::to_string(value));
  }
}

TEST_F(Llama2cFiles, EveryHeaderBitFlipGivesAnErrorOrAModel) {
  for (size_t byte = 0; byte < 28; ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<uint8_t> b = model_;
      b[byte] ^= static_cast<uint8_t>(1u << bit);
      auto m = Model::Load(Write(b, b.size()), {});  // must return, whatever it says
      if (m.ok()) {
        EXPECT_GT((*m)->config().dim, 0);
      }
    }
  }
}

TEST_F(Llama2cFiles, BrokenTokenizersAreRejected) {
  const std::string model = Write(model_, model_.size());
  for (size_t n : {size_t{0}, size_t{2}, size_t{4}, size_t{100}, tok_.size() - 1}) {
    WriteBytes(dir_.path() + "/tokenizer.bin", tok_.data(), n);
    auto m = Model::Load(model, {});
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_NE(m.status().message().find("tokenizer.bin"), std::string::npos) << m.status().ToString();
  }
  std::vector<uint8_t> t = tok_;
  PutI32(t, 8, 1 << 30);  // first token's length
  WriteBytes(dir_.path() + "/tokenizer.bin", t);
  EXPECT_EQ(Model::Load(model, {}).status().code(), StatusCode::kCorruptData);
  std::system(("rm -f '" + dir_.path() + "/tokenizer.bin'").c_str());
  EXPECT_EQ(Model::Load(model, {}).status().code(), StatusCode::kNotFound);
}

class SafetensorsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string folder = testing::SharedModel("tinystories656k");
    ASSERT_FALSE(folder.empty());
    weights_ = ReadBytes(folder + "/model.safetensors");
    config_ = ReadBytes(folder + "/config.json");
    tokenizer_ = ReadBytes(folder + "/tokenizer.json");
    ASSERT_GT(weights_.size(), 2000u);
    Restore();
  }
  void Restore() {
    WriteBytes(dir_.path() + "/model.safetensors", weights_);
    WriteBytes(dir_.path() + "/config.json", config_);
    WriteBytes(dir_.path() + "/tokenizer.json", tokenizer_);
  }
  Status Load() { return Model::Load(dir_.path(), {}).status(); }
  void ExpectFails(const std::string& file, const std::string& what) {
    const Status s = Load();
    EXPECT_FALSE(s.ok()) << what;
    EXPECT_NE(s.message().find(file), std::string::npos) << what << ": " << s.ToString();
    Restore();
  }
  std::string Header() const {
    uint64_t n;
    std::memcpy(&n, weights_.data(), 8);
    return std::string(weights_.begin() + 8, weights_.begin() + 8 + static_cast<long>(n));
  }
  TempDir dir_;
  std::vector<uint8_t> weights_, config_, tokenizer_;
};

TEST_F(SafetensorsFiles, TheCopyLoads) { EXPECT_TRUE(Load().ok()) << Load().ToString(); }

TEST_F(SafetensorsFiles, TruncatedWeightsAreRejected) {
  for (size_t n : {size_t{0}, size_t{7}, size_t{8}, size_t{100}, size_t{2168}, weights_.size() / 2, weights_.size() - 1}) {
    WriteBytes(dir_.path() + "/model.safetensors", weights_.data(), n);
    ExpectFails("model.safetensors", "truncated at " + std::to_string(n));
  }
}

TEST_F(SafetensorsFiles, LyingHeadersAreRejected) {
  std::vector<uint8_t> b = weights_;
  PutU64(b, 0, uint64_t{1} << 62);
  WriteBytes(dir_.path() + "/model.safetensors", b);
  ExpectFails("model.safetensors", "huge header length");

  // Every bit flip of the JSON header must give an error or a model, never a crash.
  const std::string header = Header();
  for (size_t i = 0; i < header.size(); i += 29) {
    b = weights_;
    b[8 + i] ^= 0x04;
    WriteBytes(dir_.path() + "/model.safetensors", b);
    (void)Load();
  }
  Restore();

  // An offset pointing past the data, and a wrong dtype.
  std::string h = header;
  const size_t at = h.find("\"data_offsets\":[");
  ASSERT_NE(at, std::string::npos);
  h.replace(at, 16, "\"data_offsets\":[9999999999,");
  b.assign(8, 0);
  PutU64(b, 0, h.size());
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), weights_.begin() + 8 + static_cast<long>(header.size()), weights_.end());
  WriteBytes(dir_.path() + "/model.safetensors", b);
  ExpectFails("model.safetensors", "offset past the data");

  h = header;
  const size_t f32 = h.find("\"F32\"");
  ASSERT_NE(f32, std::string::npos);
  h.replace(f32, 5, "\"I64\"");
  b.assign(8, 0);
  PutU64(b, 0, h.size());
  b.insert(b.end(), h.begin(), h.end());
  b.insert(b.end(), weights_.begin() + 8 + static_cast<long>(header.size()), weights_.end());
  WriteBytes(dir_.path() + "/model.safetensors", b);
  ExpectFails("model.safetensors", "unsupported dtype");
}

TEST_F(SafetensorsFiles, BadConfigsAreRejected) {
  const std::string good(config_.begin(), config_.end());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    WriteBytes(dir_.path() + "/config.json", reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  with("\"hidden_size\": 128", "\"hidden_size\": \"128\"");
  ExpectFails("config.json", "string hidden_size");
  with("\"num_key_value_heads\": 4", "\"num_key_value_heads\": 3");
  ExpectFails("config.json", "kv heads not dividing heads");
  with("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3");
  ExpectFails("model.safetensors", "missing layer tensors");
  with("\"vocab_size\": 2048", "\"vocab_size\": 2047");
  ExpectFails("model.safetensors", "shape mismatch");
  with("\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}");
  ExpectFails("config.json", "rope scaling");
  WriteBytes(dir_.path() + "/config.json", config_.data(), config_.size() / 2);
  ExpectFails("config.json", "truncated JSON");
}

TEST_F(SafetensorsFiles, BrokenTokenizerJsonIsRejected) {
  for (size_t n : {size_t{0}, size_t{1}, tokenizer_.size() / 3, tokenizer_.size() - 2}) {
    WriteBytes(dir_.path() + "/tokenizer.json", tokenizer_.data(), n);
    ExpectFails("tokenizer.json", "truncated at " + std::to_string(n));
  }
  std::string t(tokenizer_.begin(), tokenizer_.end());
  t.replace(t.find("\"BPE\""), 5, "\"WordPiece\"");
  WriteBytes(dir_.path() + "/tokenizer.json", reinterpret_cast<const uint8_t*>(t.data()), t.size());
  ExpectFails("tokenizer.json", "unsupported model type");
}

// GGUF: corrupted copies of the real SmolLM2 file. Every case here fails before any tensor is dequantized.
class GgufFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = testing::SmolLm2Path();
    if (path_.empty()) GTEST_SKIP() << "SmolLM2 is not cached (run scripts/fetch_model.py smollm2)";
    bytes_ = ReadBytes(path_);
  }
  std::string Write(const std::vector<uint8_t>& b, size_t n) {
    const std::string p = dir_.path() + "/broken.gguf";
    WriteBytes(p, b.data(), n);
    return p;
  }
  TempDir dir_;
  std::string path_;
  std::vector<uint8_t> bytes_;
};

TEST_F(GgufFiles, TruncatedFilesAreRejected) {
  for (size_t n : {size_t{4}, size_t{8}, size_t{20}, size_t{24}, size_t{1000}, size_t{1} << 20, size_t{3} << 20,
                   bytes_.size() / 2, bytes_.size() - 1}) {
    ExpectError(Write(bytes_, n), "truncated at " + std::to_string(n));
  }
}

TEST_F(GgufFiles, LyingHeadersAreRejected) {
  std::vector<uint8_t> b = bytes_;
  b[0] = 'X';
  ExpectError(Write(b, 1 << 20), "bad magic");
  b = bytes_;
  PutI32(b, 4, 4);
  EXPECT_EQ(Model::Load(Write(b, 1 << 20), {}).status().code(), StatusCode::kUnsupported);
  b = bytes_;
  PutU64(b, 8, uint64_t{1} << 60);
  ExpectError(Write(b, 1 << 20), "huge tensor count");
  b = bytes_;
  PutU64(b, 16, uint64_t{1} << 60);
  ExpectError(Write(b, 1 << 20), "huge metadata count");
  b = bytes_;
  PutU64(b, 24, uint64_t{1} << 40);  // first key's length
  ExpectError(Write(b, 1 << 20), "huge key length");
}

TEST_F(GgufFiles, OtherArchitecturesAreUnsupported) {
  std::vector<uint8_t> b = bytes_;
  const std::string key = "general.architecture";
  auto it = std::search(b.begin(), b.end(), key.begin(), key.end());
  ASSERT_NE(it, b.end());
  const size_t value = static_cast<size_t>(it - b.begin()) + key.size() + 4 + 8;  // type, string length
  ASSERT_EQ(std::string(b.begin() + static_cast<long>(value), b.begin() + static_cast<long>(value) + 5), "llama");
  b[value] = 'x';
  const auto m = Model::Load(Write(b, b.size()), {});
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported) << m.status().ToString();
  EXPECT_NE(m.status().message().find("xlama"), std::string::npos);
}

TEST_F(GgufFiles, TokenizerAloneParsesWithoutTensors) {
  auto tok = model::LoadGgufTokenizer(path_);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->vocab_size(), 49152);
}

}  // namespace
}  // namespace kvstream
