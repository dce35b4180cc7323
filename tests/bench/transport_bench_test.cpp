// `bench transport`'s library: the options' ranges are refused naming the flag, and a run asked for
// neither kind of row measures nothing. (The rows themselves: tests/tools/bench_transport_test.cpp.)
#include <gtest/gtest.h>

#include <string>

#include "bench/transport_bench.h"

namespace kvstream::bench {
namespace {

void ExpectRefused(const TransportBenchOptions& o, const std::string& flag) {
  const Status s = CheckTransportBenchOptions(o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << flag;
  EXPECT_NE(s.message().find(flag), std::string::npos) << s.ToString();
}

TEST(TransportBenchOptions, DefaultsAreValid) { EXPECT_TRUE(CheckTransportBenchOptions({}).ok()); }

TEST(TransportBenchOptions, OutOfRangeValuesAreRefusedNamingTheFlag) {
  TransportBenchOptions o;
  o.window = 0;
  ExpectRefused(o, "--window");
  o = {};
  o.repetitions = 100;
  ExpectRefused(o, "--repetitions");
  o = {};
  o.link_gbps = 0;
  ExpectRefused(o, "--link-gbps");
  o = {};
  o.sizes = {uint64_t{1} << 31};
  ExpectRefused(o, "--sizes");
  o = {};
  o.levels = {kLevelText};
  ExpectRefused(o, "--levels");
  o = {};
  o.decode_threads = 65;
  ExpectRefused(o, "--decode-threads");
  o = {};
  o.fine_fraction = 1.5;
  ExpectRefused(o, "--fine-fraction");
  o = {};
  o.fine_level = 16;
  ExpectRefused(o, "--fine-level");
}

TEST(RunTransportBench, WithNeitherKindOfRowMeasuresNothing) {
  TransportBenchOptions o;
  o.raw = false;
  o.fetch = false;
  int called = 0;
  auto r = RunTransportBench(o, [&](const UcxRawRow&) { ++called; });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->raw.empty());
  EXPECT_TRUE(r->fetch.empty());
  EXPECT_TRUE(r->fetch_skipped.empty());
  EXPECT_EQ(called, 0);
}

}  // namespace
}  // namespace kvstream::bench
