// `bench codec`'s runner on real KV (stories260K): one window against several, the rows each gives and
// the texts too short for the windows asked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/codec_bench.h"

namespace kvstream::bench {
namespace {

CodecBenchOptions SmallRun(int windows) {
  CodecBenchOptions o;
  o.model = "stories260K";
  o.context_tokens = 128;
  o.eval_tokens = 32;
  o.chunk_tokens = 64;
  o.repetitions = 1;
  o.min_seconds = 0;
  o.windows = windows;
  return o;
}

Result<std::vector<CodecBenchRow>> Rows(const CodecBenchOptions& o, CodecBenchContext* context) {
  std::vector<CodecBenchRow> rows;
  Status st = RunCodecBench(o, nullptr, [&](const CodecBenchContext& c) { *context = c; },
                            [&](const CodecBenchRow& r) { rows.push_back(r); });
  if (!st.ok()) return st;
  return rows;
}

TEST(CodecBench, SeveralWindowsGiveTheSameRowsWithTheirMeanAndLowestTopOne) {
  CodecBenchContext one_context, three_context;
  auto one = Rows(SmallRun(1), &one_context);
  auto three = Rows(SmallRun(3), &three_context);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(three.ok()) << three.status().ToString();
  EXPECT_EQ(one_context.windows, 1);
  EXPECT_EQ(three_context.windows, 3);
  EXPECT_EQ(one_context.ppl_reference, three_context.ppl_reference);  // both the first window's
  ASSERT_EQ(one->size(), three->size());
  ASSERT_GE(one->size(), 5u);
  EXPECT_EQ((*one)[0].method, "fp16");
  EXPECT_EQ((*one)[1].method, "int8");
  for (size_t i = 0; i < one->size(); ++i) {
    const CodecBenchRow &a = (*one)[i], &b = (*three)[i];
    SCOPED_TRACE(a.method + " " + std::to_string(a.level));
    EXPECT_EQ(a.method, b.method);
    EXPECT_EQ(a.level, b.level);
    EXPECT_FALSE(a.top1_agreement_min.has_value());
    ASSERT_TRUE(b.top1_agreement_min.has_value());
    EXPECT_LE(*b.top1_agreement_min, b.top1_agreement);
    EXPECT_GE(*b.top1_agreement_min, 0.0);
    EXPECT_LE(b.top1_agreement, 1.0);
    EXPECT_GT(b.bits_per_value, 0.0);
    EXPECT_GT(b.encode_gbps_per_core, 0.0);
    EXPECT_GT(b.decode_gbps_per_core, 0.0);
  }
  // The ratios are against the fp16 and int8 rows of the same windows.
  for (const auto* rows : {&*one, &*three}) {
    EXPECT_DOUBLE_EQ((*rows)[0].ratio_vs_fp16, 1.0);
    EXPECT_DOUBLE_EQ((*rows)[1].ratio_vs_int8, 1.0);
    EXPECT_DOUBLE_EQ((*rows)[0].ratio_vs_int8, (*rows)[1].bits_per_value / (*rows)[0].bits_per_value);
    for (const CodecBenchRow& r : *rows) EXPECT_NEAR(r.ratio_vs_fp16, (*rows)[0].bits_per_value / r.bits_per_value, 1e-9);
  }
  // A lossy method's quality differs between the first window and the mean of three (the windows are
  // different text); fp16's is near exact in both.
  const CodecBenchRow &coarse_one = one->back(), &coarse_three = three->back();
  EXPECT_NE(coarse_one.kl_mean, coarse_three.kl_mean);
  EXPECT_GT((*three)[0].top1_agreement, 0.99);
}

TEST(CodecBench, RefusesWindowsTheTextCannotHold) {
  const std::string path = "/tmp/kvstream_codec_bench_short_" + std::to_string(::getpid()) + ".txt";
  {
    std::ofstream out(path);
    out << "Once upon a time there was a little dog. The dog liked to run in the park with its friends.\n";
  }
  CodecBenchOptions o = SmallRun(2);
  o.text = path;
  CodecBenchContext context;
  auto rows = Rows(o, &context);
  std::remove(path.c_str());
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().ToString().find("2 x (context + eval) + 1 = 321"), std::string::npos) << rows.status().ToString();
  o = SmallRun(0);
  rows = Rows(o, &context);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().ToString().find("windows must be >= 1"), std::string::npos) << rows.status().ToString();
}

}  // namespace
}  // namespace kvstream::bench
