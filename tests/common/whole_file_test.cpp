// ReadWholeFile and ReadTextFile: a regular file whole, and every other path refused by name before anything
// is read.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "common/whole_file.h"
#include "tests/test_files.h"

namespace kvstream {
namespace {

TEST(WholeFile, ReadsARegularFileAndRefusesEverythingElse) {
  const testing::TempDir dir;
  const std::string file = dir / "bytes";
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
  refused(dir / "missing", 8, StatusCode::kNotFound, "missing: no such file");
  refused(dir.path(), 8, StatusCode::kInvalidArgument, dir.path() + ": not a regular file");
  refused("/dev/zero", 8, StatusCode::kInvalidArgument, "/dev/zero: not a regular file");
}

}  // namespace
}  // namespace kvstream
