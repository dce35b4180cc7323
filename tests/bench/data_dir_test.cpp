// Where the benchmarks find their traces: $KVSTREAM_BENCH_DATA first, else the installed layout beside the
// executable, else the build tree's; a clear error naming every folder searched when none holds traces/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "bench/data_dir.h"

namespace kvstream::bench {
namespace {

namespace fs = std::filesystem;

// A fresh empty folder under the temporary directory, removed at the end of the test.
class TempTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("kvstream_data_dir_test_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

using FindBenchDataDirTest = TempTree;

TEST_F(FindBenchDataDirTest, PrefersTheInstalledLayoutToTheBuildTree) {
  const fs::path exe = root_ / "prefix" / "bin" / "kvstream";
  fs::create_directories(root_ / "prefix" / "share" / "kvstream" / "bench" / "traces");
  fs::create_directories(root_ / "bench" / "traces");  // <exe>/../../bench
  auto dir = FindBenchDataDir(std::nullopt, exe);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, root_ / "prefix" / "share" / "kvstream" / "bench");
}

TEST_F(FindBenchDataDirTest, FallsBackToTheSourceTreeTwoFoldersAboveTheBinary) {
  const fs::path exe = root_ / "build" / "bin" / "kvstream";
  fs::create_directories(root_ / "bench" / "traces");
  auto dir = FindBenchDataDir(std::nullopt, exe);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, root_ / "bench");
}

TEST_F(FindBenchDataDirTest, SkipsAFolderWithoutTraces) {
  const fs::path exe = root_ / "build" / "bin" / "kvstream";
  fs::create_directories(root_ / "build" / "share" / "kvstream" / "bench");  // exists, but no traces/
  fs::create_directories(root_ / "bench" / "traces");
  auto dir = FindBenchDataDir(std::nullopt, exe);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, root_ / "bench");
}

TEST_F(FindBenchDataDirTest, NamesEverythingSearchedWhenNothingIsFound) {
  const fs::path exe = root_ / "build" / "bin" / "kvstream";
  auto dir = FindBenchDataDir(std::nullopt, exe);
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kNotFound);
  const std::string message = dir.status().message();
  EXPECT_NE(message.find((root_ / "build" / "share" / "kvstream" / "bench" / "traces").string()), std::string::npos) << message;
  EXPECT_NE(message.find((root_ / "bench" / "traces").string()), std::string::npos) << message;
  EXPECT_NE(message.find("KVSTREAM_BENCH_DATA"), std::string::npos) << message;
}

TEST_F(FindBenchDataDirTest, TheVariableWinsAndIsNotSearchedPast) {
  const fs::path exe = root_ / "build" / "bin" / "kvstream";
  fs::create_directories(root_ / "bench" / "traces");
  fs::create_directories(root_ / "mine" / "traces");
  auto dir = FindBenchDataDir((root_ / "mine").string(), exe);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, root_ / "mine");
  // Set but wrong: an error naming it, not the build tree's folder.
  auto wrong = FindBenchDataDir((root_ / "nowhere").string(), exe);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kNotFound);
  EXPECT_NE(wrong.status().message().find("KVSTREAM_BENCH_DATA = '" + (root_ / "nowhere").string() + "'"), std::string::npos)
      << wrong.status().message();
}

using BenchDataDirTest = TempTree;

TEST_F(BenchDataDirTest, HonoursTheEnvironmentVariable) {
  fs::create_directories(root_ / "traces");
  const char* before = std::getenv(kBenchDataEnv);
  const std::string saved = before ? before : "";
  ::setenv(kBenchDataEnv, root_.c_str(), 1);
  auto dir = BenchDataDir();
  ::setenv(kBenchDataEnv, (root_ / "missing").c_str(), 1);
  auto missing = BenchDataDir();
  if (before) {
    ::setenv(kBenchDataEnv, saved.c_str(), 1);
  } else {
    ::unsetenv(kBenchDataEnv);
  }
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_EQ(*dir, root_);
  EXPECT_FALSE(missing.ok());
}

TEST(ThisExecutable, IsTheRunningTestBinary) {
  auto self = ThisExecutable();
  ASSERT_TRUE(self.ok()) << self.status().ToString();
  EXPECT_EQ(self->filename(), "bench_data_dir_test");
  EXPECT_TRUE(fs::is_regular_file(*self));
}

}  // namespace
}  // namespace kvstream::bench
