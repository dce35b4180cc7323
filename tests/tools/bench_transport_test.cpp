// `kvstream bench transport`'s ucx_raw rows end to end: the harness (our DataPlane in two processes, a
// window of sends kept full from completion callbacks, receives posted ahead) and the ucx_perftest
// baseline both complete and report positive throughputs. No timing is asserted, only that every message
// arrives: the harness once sent a message before its receive was posted ("No such element"), now and
// then, which only a run of the real command shows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/tools/json_lines.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::JsonLines;
using kvstream::testing::RunShell;

TEST(BenchTransport, RawRowsCompleteOnLoopback) {
  std::string which;
  if (RunShell("sh -c 'command -v ucx_perftest'", &which) != 0) GTEST_SKIP() << "ucx_perftest (Debian ucx-utils) is not installed";
  // Small messages (many per run, where a hand-off race would show) and one size that goes by rendezvous.
  std::string out;
  const int code = RunShell(std::string(KVSTREAM_CLI) +
                           " bench transport --skip-fetch --json --sizes 65536,1048576 --total-mb 64 --repetitions 2",
                       &out);
  ASSERT_EQ(code, 0) << out;
  // The header first: when, on what, with which UCX.
  const std::vector<nlohmann::json> headers = JsonLines(out, "{\"bench\"");
  ASSERT_EQ(headers.size(), 1u) << out;
  const nlohmann::json& header = headers[0];
  EXPECT_EQ(header["header"], true);
  EXPECT_EQ(header["bench"], "transport");
  EXPECT_FALSE(header["machine"]["cpu"].get<std::string>().empty());
  EXPECT_GT(header["machine"]["cores"].get<int>(), 0);
  EXPECT_FALSE(header["ucx"].get<std::string>().empty());
  EXPECT_TRUE(header["ucx_cuda"].is_boolean()) << header.dump();  // whether UCX moves CUDA memory
  const std::vector<nlohmann::json> rows = JsonLines(out, "{\"kind\"");
  ASSERT_EQ(rows.size(), 2u) << out;
  EXPECT_EQ(rows[0]["msg_bytes"], 65536);
  EXPECT_EQ(rows[1]["msg_bytes"], 1048576);
  for (const auto& row : rows) {
    EXPECT_EQ(row["kind"], "ucx_raw");
    EXPECT_GT(row["gbps_ours"].get<double>(), 0.0);
    EXPECT_GT(row["gbps_ucx_perftest"].get<double>(), 0.0);
    EXPECT_GT(row["ratio"].get<double>(), 0.0);
  }
}

}  // namespace
