// `kvstream bench pipeline` end to end on a chunk folder of stories260K's KV (written by `bench gpu
// --model`): the cpu rows pace every set at two rates in both send orders and decode it bit for bit; the
// cuda rows, where there is no GPU, fail in one clear line before anything runs. No timing is asserted.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvstream/cuda.h"
#include "tests/tools/json_lines.h"
#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::JsonLines;
using kvstream::testing::Refuses;
using kvstream::testing::RunShell;

class BenchPipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = (std::filesystem::temp_directory_path() / ("kvstream-bench-pipeline-" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(dir_);
    const std::string cli = KVSTREAM_CLI;
    std::string out;
    ASSERT_EQ(RunShell(cli + " profile --model stories260K --out " + dir_ + "/p.kvprofile --context-tokens 128 --contexts 2",
                       &out), 0) << out;
    ASSERT_EQ(RunShell(cli + " bench gpu --model stories260K --profile " + dir_ + "/p.kvprofile --context-tokens 256" +
                           " --passthrough-tokens 256 --chunk-tokens 64 --write-chunks " + dir_ + "/chunks",
                       &out), 0) << out;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string BenchPipeline::dir_;

TEST_F(BenchPipeline, CpuRowsCoverEverySetAndRateBitForBit) {
  std::string out;
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " bench pipeline --chunks " + dir_ +
                         "/chunks --device cpu --rates 1,25 --repetitions 1 --json", &out), 0) << out;
  const auto headers = JsonLines(out, "{\"header\"");
  ASSERT_EQ(headers.size(), 1u) << out;
  EXPECT_FALSE(headers[0]["cpu"].get<std::string>().empty());
  const auto rows = JsonLines(out, "{\"method\"");
  ASSERT_EQ(rows.size(), 2u * 2u * 6u) << out;  // 6 sets (fp16, int8, 4 channel-uniform), 2 orders, 2 rates
  for (const auto& row : rows) {
    EXPECT_EQ(row["device"], "cpu");
    EXPECT_EQ(row["path"], "host");
    EXPECT_EQ(row["tokens"], 256);
    EXPECT_TRUE(row["bit_identical"].get<bool>()) << row.dump();
    EXPECT_GT(row["kv_ready_ms"].get<double>(), 0.0);
    EXPECT_GE(row["kv_ready_ms"].get<double>(), row["last_byte_ms"].get<double>());
    if (row["order"] == "default") {
      EXPECT_EQ(row["first_layer_ms"], row["kv_ready_ms"]);  // every chunk holds every layer
    } else {
      EXPECT_EQ(row["order"], "layer-major");
      EXPECT_GT(row["first_layer_ms"].get<double>(), 0.0);
      EXPECT_LE(row["first_layer_ms"].get<double>(), row["kv_ready_ms"].get<double>());
    }
    EXPECT_GT(row["kv_ready_vs_int8"].get<double>(), 0.0);
  }
}

TEST_F(BenchPipeline, TheCudaDeviceWithoutAGpuIsOneClearError) {
  if (kvstream::GpuAvailable()) GTEST_SKIP() << "a GPU is present";
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) + " bench pipeline --chunks " + dir_ + "/chunks --device cuda",
                      "bench pipeline --device cuda:"));
  EXPECT_TRUE(Refuses(std::string(KVSTREAM_CLI) + " bench pipeline --chunks " + dir_ + "/chunks --device tpu",
                      "expected cuda, cpu or both"));
}

}  // namespace
