// Tokenizers: pinned ids for known prompts, lossless round trips (UTF-8, digits, whitespace runs), and
// the GPT-2 pre-tokenizer split.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "model/loaders.h"
#include "model/tokenizers.h"
#include "model/unicode.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

const std::vector<std::string>& RoundTripTexts() {
  static const std::vector<std::string> texts = {
      "Once upon a time, there was a little girl named Lily.",
      "",
      " leading space and trailing space ",
      "multiple   spaces\tand\ttabs\n\nand blank lines\n   \n",
      "digits 0123456789 and 3.14159, 1,000,000 and x2y",
      "UTF-8: caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x98\x80 \xC3\x9C" "ber",
      "contractions: don't, it's, we're, they've, I'll, she'd, I'm",
      "punctuation!!! ... ??? (brackets) [x] {y} <0x41> <s> </s>",
  };
  return texts;
}

void ExpectRoundTrips(const Tokenizer& tok, const std::vector<std::string>& texts = RoundTripTexts()) {
  for (const std::string& text : texts) {
    const std::vector<int> ids = tok.Encode(text, /*add_bos=*/false);
    for (int id : ids) ASSERT_TRUE(id >= 0 && id < tok.vocab_size()) << id;
    EXPECT_EQ(tok.Decode(ids), text);
    EXPECT_EQ(tok.Decode(tok.Encode(text, /*add_bos=*/true)), text);
  }
}

TEST(Llama2cTokenizer, EncodesTheReferencePromptLikeLlama2c) {
  const std::string model = testing::SharedModel("stories260K");
  ASSERT_FALSE(model.empty());
  auto tok = model::LoadLlama2cTokenizer(model.substr(0, model.find_last_of('/')) + "/tok512.bin", 512);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
}

TEST(Llama2cTokenizer, RoundTrips) {
  const std::string model = testing::SharedModel("stories260K");
  auto tok = model::LoadLlama2cTokenizer(model.substr(0, model.find_last_of('/')) + "/tok512.bin", 512);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ExpectRoundTrips(**tok);
}

// A vocabulary without byte pieces (trained without byte fallback, e.g. character-level): it loads, a run
// of characters it lacks becomes one <unk>, and Decode drops it.
TEST(Llama2cTokenizer, WithoutBytePiecesUnknownCharactersBecomeUnk) {
  const std::string path = ::testing::TempDir() + "kvstream_char_tokenizer_" + std::to_string(::getpid()) + ".bin";
  const std::vector<std::pair<std::string, float>> vocab = {{"<unk>", 0}, {"<s>", 0}, {"</s>", 0}, {" ", 0}, {"a", 0},
                                                            {"b", 0}, {"c", 0}, {" a", 5}, {"ab", 3}};
  {
    std::ofstream out(path, std::ios::binary);
    const auto put = [&](auto v) { out.write(reinterpret_cast<const char*>(&v), sizeof v); };
    put(int32_t{5});  // max_token_length: "<unk>"
    for (const auto& [piece, score] : vocab) {
      put(score);
      put(static_cast<int32_t>(piece.size()));
      out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
    }
  }
  auto tok = model::LoadLlama2cTokenizer(path, static_cast<int>(vocab.size()));
  std::remove(path.c_str());
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  // " a" (score 5) merges before "ab" (3); the tab, tab, x and e-acute run is one <unk>.
  const std::vector<int> ids = (*tok)->Encode("ab\t\tx\xC3\xA9" "a", false);
  EXPECT_EQ(ids, (std::vector<int>{7, 5, 0, 4}));
  EXPECT_EQ((*tok)->Decode(ids), "aba");
  EXPECT_EQ((*tok)->Encode("cab", true), (std::vector<int>{1, 3, 6, 8}));
}

TEST(HfTokenizer, EncodesTheReferencePromptLikeTokenizersJson) {
  const std::string folder = testing::SharedModel("tinystories656k");
  auto tok = model::LoadHfTokenizer(folder + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->Encode("Once upon a time", true), (std::vector<int>{1, 80, 147, 201, 282, 57}));
  EXPECT_EQ((*tok)->bos_id(), 1);
}

// TinyStories' vocabulary is 78 characters with no byte pieces: round trips hold within that alphabet,
// and anything else becomes one <unk> per run of unknown characters (fuse_unk), as in Hugging Face.
TEST(HfTokenizer, RoundTripsWithinItsAlphabet) {
  auto tok = model::LoadHfTokenizer(testing::SharedModel("tinystories656k") + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ExpectRoundTrips(**tok, {"Once upon a time, there was a little girl named Lily.", "", " two  spaces  ", "Lily said: \"1, 2, 3!\"\n\nThe end.",
                           "don't stop; it's fun - isn't it?"});
  const std::vector<int> ids = (*tok)->Encode("a\t\tb \xC3\xA9", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 2) << "one <unk> for the tab run, one for the e-acute";
  EXPECT_EQ((*tok)->Decode(ids), "ab ");
}

TEST(ByteLevelTokenizer, SmolLm2RoundTripsAndSplitsDigits) {
  const std::string path = testing::SmolLm2Path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 is not cached (run scripts/fetch_model.py smollm2)";
  auto tok = model::LoadGgufTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  ExpectRoundTrips(**tok);
  // Pinned from this implementation; "Paris" follows this prompt in greedy generation (model test).
  EXPECT_EQ((*tok)->Encode("The capital of France is", false), (std::vector<int>{504, 3575, 282, 4649, 314}));
  // Every digit is its own token for SmolLM2's pre-tokenizer.
  EXPECT_EQ((*tok)->Encode("2024", false).size(), 4u);
  EXPECT_FALSE((*tok)->adds_bos());
}

TEST(ByteLevelTokenizer, SmolLm2ReadsItsChatTemplatesControlTokens) {
  const std::string path = testing::SmolLm2Path();
  if (path.empty()) GTEST_SKIP() << "SmolLM2 is not cached (run scripts/fetch_model.py smollm2)";
  auto tok = model::LoadGgufTokenizer(path);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const Tokenizer& t = **tok;
  const std::vector<int> start = t.Encode("<|im_start|>", false), end = t.Encode("<|im_end|>", false);
  ASSERT_EQ(start.size(), 1u);
  ASSERT_EQ(end.size(), 1u);
  EXPECT_NE(start[0], end[0]);
  // Between control tokens the text is coded as it would be alone; Decode drops the control tokens.
  std::vector<int> expected = start;
  for (int id : t.Encode("user\nHi there", false)) expected.push_back(id);
  expected.push_back(end[0]);
  for (int id : t.Encode("\n", false)) expected.push_back(id);
  expected.push_back(start[0]);
  EXPECT_EQ(t.Encode("<|im_start|>user\nHi there<|im_end|>\n<|im_start|>", false), expected);
  EXPECT_EQ(t.Decode(expected), "user\nHi there\n");
  // Text that only looks like one stays text.
  EXPECT_GT(t.Encode("<|im_start>", false).size(), 1u);
}

TEST(Gpt2Split, FollowsThePattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(model::SplitGpt2("Hello world", false), (V{"Hello", " world"}));
  EXPECT_EQ(model::SplitGpt2("it's 2024!", false), (V{"it", "'s", " 2024", "!"}));
  EXPECT_EQ(model::SplitGpt2("it's 2024!", true), (V{"it", "'s", " ", "2", "0", "2", "4", "!"}));
  // A run of spaces leaves its last space to the following word.
  EXPECT_EQ(model::SplitGpt2("a   b", false), (V{"a", "  ", " b"}));
  EXPECT_EQ(model::SplitGpt2("a\n\nb  ", false), (V{"a", "\n", "\n", "b", "  "}));
  EXPECT_EQ(model::SplitGpt2("caf\xC3\xA9 \xE2\x80\x94 ok", false), (V{"caf\xC3\xA9", " \xE2\x80\x94", " ok"}));
}

}  // namespace
}  // namespace kvstream
