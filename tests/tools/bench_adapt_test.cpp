// `kvstream bench adapt` on a simulated link, as a user runs it: a header naming the machine, then one row
// per policy, each meeting the drop trace's deadlines it can.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/tools/json_lines.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::JsonLines;
using kvstream::testing::RunShell;

TEST(BenchAdapt, PrintsTheMachineThenARowPerPolicy) {
  std::string out;
  ASSERT_EQ(
      RunShell(std::string(KVSTREAM_CLI) + " bench adapt --trace drop10x --requests 4 --policies kvstream,fixed-L3 --json",
               &out),
      0)
      << out;
  const std::vector<nlohmann::json> lines = JsonLines(out, "{\"bench\"");
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[0]["header"], true);
  EXPECT_FALSE(lines[0]["machine"]["cpu"].get<std::string>().empty());
  EXPECT_FALSE(lines[0]["date"].get<std::string>().empty());
  EXPECT_EQ(lines[1]["policy"], "kvstream");
  EXPECT_EQ(lines[2]["policy"], "fixed-L3");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["requests"], 4);
    EXPECT_GE(lines[i]["slo_attainment"].get<double>(), 0.0);
    EXPECT_LE(lines[i]["slo_attainment"].get<double>(), 1.0);
  }
}

}  // namespace
