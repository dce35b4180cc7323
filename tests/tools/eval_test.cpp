// `kvstream eval` end to end on the tiny real model: several windows each scored, then their means, and
// the flags that need each other refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/tools/json_lines.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::JsonLines;
using kvstream::testing::Refuses;
using kvstream::testing::RunShell;

const std::string kEval =
    std::string(KVSTREAM_CLI) + " eval --model stories260K --context-tokens 96 --eval-tokens 32 --threads 1";

TEST(Eval, ScoresEachWindowThenTheirMeans) {
  std::string out;
  ASSERT_EQ(RunShell(kEval + " --windows 3 --methods int8,kvstream-L4 --json", &out), 0) << out;
  std::map<std::string, std::vector<nlohmann::json>> by_method;
  for (const nlohmann::json& row : JsonLines(out, "{\"method\"")) by_method[row["method"].get<std::string>()].push_back(row);
  ASSERT_EQ(by_method.size(), 2u) << out;
  for (const auto& [method, rows] : by_method) {
    ASSERT_EQ(rows.size(), 4u) << method;
    double top1 = 0, ppl_delta = 0, top1_var = 0;
    for (int w = 0; w < 3; ++w) {
      EXPECT_EQ(rows[w]["window"], std::to_string(w)) << method;
      const double p = rows[w]["top1_agreement"].get<double>();
      top1 += p / 3;
      ppl_delta += rows[w]["ppl_delta_pct"].get<double>() / 3;
      // Over the window's 32 scored tokens, each taken as independent.
      EXPECT_NEAR(rows[w]["top1_stderr"].get<double>(), std::sqrt(p * (1 - p) / 32), 1e-5) << method;
      top1_var += std::pow(rows[w]["top1_stderr"].get<double>(), 2);
      EXPECT_GE(rows[w]["ppl_delta_stderr"].get<double>(), 0.0) << method;
      EXPECT_EQ(rows[w]["windows"], 1) << method;
    }
    EXPECT_EQ(rows[3]["windows"], 3) << method;
    EXPECT_NEAR(rows[3]["top1_stderr"].get<double>(), std::sqrt(top1_var) / 3, 1e-5) << method;
    EXPECT_EQ(rows[3]["negligible"].get<bool>(),
              rows[3]["top1_agreement"].get<double>() >= 0.98 && rows[3]["ppl_delta_pct"].get<double>() <= 1.0) << method;
    EXPECT_EQ(rows[3]["window"], "mean") << method;
    EXPECT_NEAR(rows[3]["top1_agreement"].get<double>(), top1, 1e-5) << method;
    EXPECT_NEAR(rows[3]["ppl_delta_pct"].get<double>(), ppl_delta, 1e-5) << method;
    // The windows are different text, so their reference perplexities differ.
    EXPECT_NE(rows[0]["ppl_reference"], rows[1]["ppl_reference"]) << method;
  }
  EXPECT_GT(by_method["int8"][3]["bits_per_value"].get<double>(), by_method["kvstream-L4"][3]["bits_per_value"].get<double>());
}

TEST(Eval, RefusesWhatItCannotScore) {
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) +
                          " eval --model stories260K --context-tokens 4000 --eval-tokens 1000 --windows 64 --methods int8",
                      "64 windows of 5000 need 320001"));
  EXPECT_TRUE(Refuses(kEval + " --methods kvstream-L2 --scheme predicted", "needs a --profile"));
  EXPECT_TRUE(Refuses(kEval + " --windows 0", "--windows = 0, expected 1..64"));
  EXPECT_TRUE(Refuses(kEval + " --methods int8,", "unknown method ''"));
}

}  // namespace
