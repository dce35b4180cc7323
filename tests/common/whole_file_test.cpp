// ReadWholeFile and ReadTextFile: a regular file whole, and every other path refused by name before anything
// is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/whole_file.h"

namespace kvstream {
namespace {

TEST(WholeFile, ReadsARegularFileAndRefusesEverythingElse) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvstream_whole_file_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "bytes").string();
  std::ofstream(file, std::ios::binary) << "kvstream";

  auto bytes = ReadWholeFile(file, 8);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "kvstream");
  auto text = ReadTextFile(file, 8);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "kvstream");
  EXPECT_EQ(ReadTextFile(file, 7).status().code(), StatusCode::kResourceExhausted);

  const auto refused = [](const std::string& path, uint64_t limit, StatusCode code, const std::string& message) {
    auto r = ReadWholeFile(path, limit);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().ToString();
  };
  refused(file, 7, StatusCode::kResourceExhausted, file + ": size 8 bytes exceeds the limit of 7");
  refused((dir / "missing").string(), 8, StatusCode::kNotFound, "missing: no such file");
  refused(dir.string(), 8, StatusCode::kInvalidArgument, dir.string() + ": not a regular file");
  refused("/dev/zero", 8, StatusCode::kInvalidArgument, "/dev/zero: not a regular file");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvstream
