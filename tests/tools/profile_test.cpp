// `kvstream profile --weigh-slices` end to end on the tiny real model: every slice measured and weighed
// within the clamps, and the weighed profile serves chunks that the quality meter scores.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/tools/run_shell.h"

namespace {

using kvstream::testing::RunShell;

const std::string kProfile = std::string(KVSTREAM_CLI) +
                             " profile --model stories260K --contexts 2 --context-tokens 128 --eval-tokens 32 "
                             "--predict --threads 1";

TEST(Profile, WeighSlicesMeasuresEverySliceAndScalesItsStep) {
  // Per process: the plain and sanitizer builds may run this test at the same time.
  const std::string stem = ::testing::TempDir() + "kvstream_profile_" + std::to_string(::getpid());
  const std::string flat_path = stem + "_flat", weighed_path = stem + "_weighed";
  std::string flat, weighed;
  ASSERT_EQ(RunShell(kProfile + " --out " + flat_path, &flat), 0) << flat;
  ASSERT_EQ(RunShell(kProfile + " --weigh-slices --out " + weighed_path, &weighed), 0) << weighed;
  EXPECT_EQ(flat.find("slice weights"), std::string::npos) << flat;
  const size_t table = weighed.find("slice weights (predicted L5 on the held-out context)");
  ASSERT_NE(table, std::string::npos) << weighed;

  // One line per layer (stories260K has 5): "layer  K <kl> x<scale>  V <kl> x<scale>".
  std::istringstream lines(weighed.substr(weighed.find('\n', table) + 1));
  int unit_scales = 0;
  for (int layer = 0; layer < 5; ++layer) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line));
    int l = -1;
    double kl[2], scale[2];
    ASSERT_EQ(std::sscanf(line.c_str(), " %d K %lf x%lf V %lf x%lf", &l, &kl[0], &scale[0], &kl[1], &scale[1]), 5)
        << line;
    EXPECT_EQ(l, layer);
    for (int kv = 0; kv < 2; ++kv) {
      EXPECT_GE(kl[kv], 0.0) << line;
      EXPECT_GE(scale[kv], 0.35) << line;
      EXPECT_LE(scale[kv], 2.0) << line;
      unit_scales += scale[kv] == 1.0;
    }
  }
  EXPECT_LT(unit_scales, 10) << "no slice was weighed: " << weighed;

  // Other steps make other profiles, and the weighed one codes chunks the meter can score.
  const auto hash = [](const std::string& out) { return out.substr(out.rfind("hash ")); };
  EXPECT_NE(hash(flat), hash(weighed));
  std::string eval;
  ASSERT_EQ(RunShell(std::string(KVSTREAM_CLI) + " eval --model stories260K --context-tokens 96 --eval-tokens 32 "
                         "--threads 1 --methods kvstream-L4 --scheme predicted --profile " + weighed_path + " --json",
                     &eval),
            0)
      << eval;
  EXPECT_NE(eval.find("\"method\": \"kvstream-L4\""), std::string::npos) << eval;
  std::remove(flat_path.c_str());
  std::remove(weighed_path.c_str());
}

TEST(Profile, LadderSetsTheLevelsAndRefusesBadLists) {
  const std::string path = ::testing::TempDir() + "kvstream_profile_ladder_" + std::to_string(::getpid());
  const std::string plain = std::string(KVSTREAM_CLI) + " profile --model stories260K --contexts 2 --context-tokens 128 "
                            "--threads 1 --out " + path;
  std::string out;
  ASSERT_EQ(RunShell(plain + " --ladder 0.1,0.2,0.3,0.42,0.5,0.7,1", &out), 0) << out;
  // Seven levels, none compared with in-chunk tables (those quantise with the default ladder).
  EXPECT_NE(out.find("  L7 "), std::string::npos) << out;
  EXPECT_EQ(out.find("  L8 "), std::string::npos) << out;
  EXPECT_NE(out.find("  L4     "), std::string::npos) << out;
  std::istringstream lines(out.substr(out.find("  L1 ")));
  std::string line;
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_NE(line.find(" -"), std::string::npos) << line;
  std::remove(path.c_str());
  for (const char* bad : {"0.2,0.1", "0.1,,0.2", "0.1,0.2,", "0", "-1", "0.1,x", "17"}) {
    ASSERT_NE(RunShell(plain + " --ladder '" + bad + "'", &out), 0) << bad;
    EXPECT_NE(out.find("ladder: "), std::string::npos) << bad << ": " << out;
  }
}

TEST(Profile, SeveralTextsShareTheWindowsAndEachMustHoldItsOwn) {
  const std::string path = ::testing::TempDir() + "kvstream_profile_texts_" + std::to_string(::getpid());
  const std::string short_text = path + "_short.txt";
  {
    std::ofstream out(short_text);
    out << "Once upon a time there was a little dog.\n";
  }
  const std::string base = std::string(KVSTREAM_CLI) + " profile --model stories260K --context-tokens 128 --threads 1 --out " + path;
  const std::string gpl3 = "/usr/share/common-licenses/GPL-3", gpl2 = "/usr/share/common-licenses/GPL-2";
  std::string one, two, out;
  ASSERT_EQ(RunShell(base + " --contexts 2 --text " + gpl3, &one), 0) << one;
  ASSERT_EQ(RunShell(base + " --contexts 2 --text " + gpl3 + "," + gpl2, &two), 0) << two;
  // Window 1 comes from GPL-2 instead of GPL-3: another profile, the same held-out window.
  const auto hash = [](const std::string& s) { return s.substr(s.rfind("hash ")); };
  EXPECT_NE(hash(one), hash(two));
  std::remove(path.c_str());

  ASSERT_NE(RunShell(base + " --contexts 2 --text " + gpl3 + "," + short_text, &out), 0);
  EXPECT_NE(out.find("text " + short_text + " has"), std::string::npos) << out;
  EXPECT_NE(out.find("its 1 contexts of 128 need 128"), std::string::npos) << out;
  ASSERT_NE(RunShell(base + " --contexts 2 --text " + short_text + "," + gpl3, &out), 0);
  EXPECT_NE(out.find("plus the held-out one"), std::string::npos) << out;
  ASSERT_NE(RunShell(base + " --contexts 1 --text " + gpl3 + "," + gpl2, &out), 0);
  EXPECT_NE(out.find("2 files for 1 contexts"), std::string::npos) << out;
  ASSERT_NE(RunShell(base + " --contexts 2 --text " + gpl3 + ",," + gpl2, &out), 0);
  EXPECT_NE(out.find("an empty file name"), std::string::npos) << out;
  ASSERT_NE(RunShell(base + " --contexts 2 --text " + gpl3 + ",", &out), 0);
  EXPECT_NE(out.find("an empty file name"), std::string::npos) << out;
  std::remove(short_text.c_str());
}

// Another engine's KV reaches the profile as dumps: a profile learned from a dump of GPL-2 sizes the levels
// on GPL-3's held-out window and serves the predicted scheme; --contexts beside it is refused.
TEST(Profile, LearnsFromKvDumps) {
  const std::string stem = ::testing::TempDir() + "kvstream_profile_dump_" + std::to_string(::getpid());
  std::string out;
  const std::string dump = std::string(KVSTREAM_CLI) + " kv dump --model stories260K --tokens 256 --threads 1 " +
                           "--text /usr/share/common-licenses/GPL-2 --out " + stem + ".npz";
  ASSERT_EQ(RunShell(dump, &out), 0) << out;
  const std::string profile = std::string(KVSTREAM_CLI) + " profile --model stories260K --kv-dump " + stem +
                              ".npz --context-tokens 128 --eval-tokens 32 --predict --threads 1 --out " + stem + ".kvp";
  out.clear();
  ASSERT_EQ(RunShell(profile, &out), 0) << out;
  EXPECT_NE(out.find("1 KV dumps of 256 tokens"), std::string::npos) << out;
  EXPECT_NE(out.find("predicted scheme"), std::string::npos) << out;
  out.clear();
  const std::string encode = std::string(KVSTREAM_CLI) + " encode --kv-dump " + stem + ".npz --profile " + stem +
                             ".kvp --scheme predicted --level 3 --out " + stem + "_chunks";
  ASSERT_EQ(RunShell(encode, &out), 0) << out;
  out.clear();
  ASSERT_NE(RunShell(profile + " --contexts 2", &out), 0);
  EXPECT_NE(out.find("with --kv-dump the dumps are the samples"), std::string::npos) << out;
  std::system(("rm -rf " + stem + ".npz " + stem + ".kvp " + stem + "_chunks").c_str());
}

}  // namespace
