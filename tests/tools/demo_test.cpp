// `kvstream demo`, the README's main job, end to end on the tiny real model: a prefill node and a decode node
// stream two windows' contexts at every method and score each fetch; with a profile, the predicted scheme's levels; bad
// arguments refused with a message.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

#include "tests/test_files.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::Refuses;
using kvstream::testing::RunShell;
using kvstream::testing::TempDir;

const std::string kDemo = std::string(KVSTREAM_CLI) + " demo --model stories260K --tokens 96 --eval-tokens 32 --threads 1";

struct Row {
  unsigned long long bytes = 0;
  double kv_ready_ms = 0, last_byte_ms = 0, top1 = -1;
};

// The table's rows by method: "method bytes [vs_int8] kv_ready_ms last_byte_ms ppl_delta_% ±se kl_mean
// top1_agree ±se [negligible]" (int8's and fp16's vs_int8 column is empty; the ± columns and the verdict are
// skipped).
std::map<std::string, Row> Table(const std::string& out) {
  std::map<std::string, Row> rows;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string method;
    fields >> method;
    if (method != "fp16" && method != "int8" && method.rfind("kvstream-", 0) != 0) continue;
    std::string words[7];
    int n = 0;
    std::string word;
    while (n < 7 && fields >> word) {
      if (word.rfind("±", 0) != 0 && word != "negligible") words[n++] = word;
    }
    // Prose that starts with a method's name has no byte count after it.
    if (n < 6 || words[0].find_first_not_of("0123456789") != std::string::npos) continue;
    const int ready = n == 7 ? 2 : 1;
    rows[method] = {std::stoull(words[0]), std::stod(words[ready]), std::stod(words[ready + 1]), std::stod(words[n - 1])};
  }
  return rows;
}

TEST(Demo, StreamsEveryMethodAndScoresIt) {
  std::string out;
  ASSERT_EQ(RunShell(kDemo, &out), 0) << out;
  const std::map<std::string, Row> rows = Table(out);
  ASSERT_TRUE(rows.count("fp16") && rows.count("int8") && rows.count("kvstream-L1") && rows.count("kvstream-adaptive")) << out;
  int lossy = 0;
  for (const auto& [method, row] : rows) {
    EXPECT_GT(row.kv_ready_ms, 0.0) << method;
    EXPECT_GT(row.last_byte_ms, 0.0) << method;
    EXPECT_LE(row.last_byte_ms, row.kv_ready_ms) << method;
    EXPECT_GE(row.top1, 0.0) << method;
    EXPECT_LE(row.top1, 1.0) << method;
    if (method.rfind("kvstream-L", 0) == 0) {
      ++lossy;
      EXPECT_LT(row.bytes, rows.at("int8").bytes) << method;
    }
  }
  EXPECT_GE(lossy, 4) << out;
  EXPECT_GT(rows.at("fp16").bytes, rows.at("int8").bytes);
  EXPECT_GE(rows.at("fp16").top1, 0.96) << "fp16 is the model's own KV, rounded";
  EXPECT_NE(out.find("kvstream-adaptive chose per chunk: "), std::string::npos) << out;
  EXPECT_NE(out.find("Without --profile"), std::string::npos) << out;
  EXPECT_NE(out.find("prefilling window 2 of 2"), std::string::npos) << out;  // the harness's two windows
}

TEST(Demo, ServesAProfilesPredictedLevels) {
  const TempDir dir;
  const std::string profile = dir / "p.kvp";
  std::string out;
  const std::string learn = " profile --model stories260K --predict --contexts 2 --context-tokens 128 --threads 1 --out ";
  ASSERT_EQ(RunShell(KVSTREAM_CLI + learn + profile, &out), 0) << out;
  out.clear();
  const int status =
      RunShell(kDemo + " --profile " + profile + " --scheme predicted --fine-fraction 0.12 --decode-threads 2", &out);
  ASSERT_EQ(status, 0) << out;
  const std::map<std::string, Row> rows = Table(out);
  ASSERT_TRUE(rows.count("kvstream-predicted-L1") && rows.count("kvstream-predicted-L4")) << out;
  for (const auto& [method, row] : rows) {
    if (method.rfind("kvstream-predicted-", 0) == 0) {
      EXPECT_LT(row.bytes, rows.at("int8").bytes) << method;
    }
  }
  EXPECT_EQ(out.find("Without --profile"), std::string::npos) << out;
}

TEST(Demo, RefusesWhatItCannotRun) {
  EXPECT_TRUE(Refuses(kDemo + " --decode-threads 0", "--decode-threads = 0, expected 1..64"));
  EXPECT_TRUE(Refuses(kDemo + " --windows 0", "--windows = 0, expected 1..16"));
  EXPECT_TRUE(Refuses(kDemo + " --scheme predicted", "needs a profile"));
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) + " demo --model stories260K --tokens 4000", "max_seq_len"));
}

}  // namespace
