// A real fetch over a shaped link between two network namespaces whose rate falls tenfold mid-fetch: the
// kvstream policy must finish, deliver exactly what a local decode of the chosen levels gives, and pick
// smaller levels once the link has fallen. Skipped (with the reason) where namespaces cannot be made.
//
// The Sender runs in a child forked into namespace A, the Receiver in one forked into namespace B (both
// enter the namespace as `ip netns exec` does, so UCX sees only the veth); this process replays the
// trace with `tc qdisc change`. Every child wait is bounded and the namespaces go with the NetnsLink.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cluster/netns_link.h"
#include "bench/cluster/trace_player.h"
#include "kvstream/codec.h"
#include "kvstream/scheduler.h"
#include "kvstream/stream.h"
#include "tests/stream/stream_fixture.h"

namespace kvstream::testing {
namespace {

constexpr int kTokens = 512;       // stories260K's whole window
constexpr int kChunk = 32;         // 16 chunks of 20 KiB at fp16
constexpr double kRateBps = 2e6;   // the whole context at fp16 takes 1.3 s at this rate ...
constexpr double kDropAtS = 0.5;   // ... and the link falls to a tenth well before that
constexpr double kDeadlineS = 2.0;

void WriteLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  (void)!::write(fd, text.data(), text.size());
}

// The Sender's child: serve the context until killed (60 s at most).
int ServeChild(const cluster::NetnsLink& link, const RealKv& kv, int port, int out) {
  SenderOptions options = TestSenderOptions();
  options.listen_host = link.address(cluster::NetnsLink::kA);
  options.listen_port = port;
  options.chunk_tokens = kChunk;
  ContextSpec spec = SpecOf(kv);
  spec.token_ids.clear();  // no "text" level: the receiver holds no model to recompute with
  auto sender = Sender::Start(options);
  if (!sender.ok()) {
    WriteLine(out, "error " + sender.status().ToString());
    return 1;
  }
  Status s = (*sender)->Register("ctx", spec);
  if (!s.ok()) {
    WriteLine(out, "error " + s.ToString());
    return 1;
  }
  WriteLine(out, "serving");
  ::sleep(60);
  return 0;
}

// The Receiver's child: fetch with the kvstream policy, compare every chunk with a local encode+decode at
// the level it came at, and report "chunk <c> <level> <bytes>" lines and "done <complete> <mismatches>".
int FetchChild(const cluster::NetnsLink& link, const RealKv& kv, int port, int out) {
  ReceiverOptions options = TestReceiverOptions();
  options.chunk_timeout_ms = 20000;
  auto receiver = Receiver::Connect(link.address(cluster::NetnsLink::kA), port, options);
  if (!receiver.ok()) {
    WriteLine(out, "error " + receiver.status().ToString());
    return 1;
  }
  KvstreamPolicyOptions policy_options;
  policy_options.prior_bandwidth_bps = kRateBps;
  policy_options.min_sample_bytes = 2048;  // stories260K's chunks are small
  // Trusting the estimate, the policy starts with large chunks, so its reaction to the fall shows in the
  // levels. (With the default drop_factor it starts small and upgrades as slack builds up; that planning
  // is covered by the simulator tests in tests/scheduler.)
  policy_options.drop_factor = 1;
  auto policy = MakeKvstreamPolicy(policy_options);
  Destination dest(kv.cache.layers, kTokens, kv.cache.kv_dim);
  auto result = (*receiver)->Fetch("ctx", dest.keys, dest.values, kDeadlineS, *policy);
  if (!result.ok()) {
    WriteLine(out, "error " + result.status().ToString());
    return 1;
  }
  const ContextSpec spec = SpecOf(kv);
  Destination local(kv.cache.layers, kTokens, kv.cache.kv_dim);
  int mismatches = 0;
  for (const ChunkTelemetry& t : result->chunks) {
    const int64_t begin = static_cast<int64_t>(t.chunk) * kChunk;
    const int64_t n = std::min<int64_t>(kChunk, kTokens - begin);
    auto slice = [&](const TensorView& v) { return SliceTokens(v, begin, n); };
    ChunkInput in;
    in.keys = slice(spec.keys);
    in.values = slice(spec.values);
    in.token_begin = begin;
    EncodeOptions eo;
    eo.level = t.level;
    auto bytes = EncodeChunk(in, eo);
    if (!bytes.ok() || !DecodeChunk(bytes->data(), bytes->size(), {}, slice(local.keys), slice(local.values)).ok()) {
      ++mismatches;
      continue;
    }
    const size_t row = static_cast<size_t>(n * kv.cache.kv_dim) * sizeof(float);
    for (int64_t l = 0; l < kv.cache.layers; ++l) {
      const size_t at = static_cast<size_t>((l * kTokens + begin) * kv.cache.kv_dim);
      if (std::memcmp(&dest.k[at], &local.k[at], row) != 0 || std::memcmp(&dest.v[at], &local.v[at], row) != 0) {
        ++mismatches;
        break;
      }
    }
    WriteLine(out, "chunk " + std::to_string(t.chunk) + " " + std::to_string(t.level) + " " + std::to_string(t.bytes));
  }
  WriteLine(out, "done " + std::to_string(result->complete) + " " + std::to_string(mismatches));
  return 0;
}

TEST(NetnsFetch, RateDropMidFetchCompletesExactlyAndChoosesSmallerLevels) {
  std::string error;
  const RealKv* kv = GetRealKv("stories260K", kTokens, &error);
  ASSERT_NE(kv, nullptr) << error;

  cluster::NetnsLinkOptions link_options;
  link_options.rate_bps = kRateBps;
  link_options.burst = "4kb";  // a 256 kB bucket would carry most of this small context unshaped
  link_options.latency = "100ms";
  auto link = cluster::NetnsLink::Create(link_options);
  if (!link.ok()) GTEST_SKIP() << link.status().message();

  const int port = 17100 + ::getpid() % 800;
  auto server = (*link)->ForkIn(cluster::NetnsLink::kA, [&](int out) { return ServeChild(**link, *kv, port, out); });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto ready = cluster::ReadUntil(*server, "serving", 30);
  if (!ready.ok()) {
    const std::string out = cluster::Reap(*server, 1, true);
    FAIL() << ready.status().ToString() << out;
  }

  bench::LinkTrace trace{"drop10x-test", {0.0, kDropAtS}, {kRateBps, kRateBps / 10}};
  cluster::TracePlayer player(trace, [&](double bps) { return (*link)->SetRate(bps); });
  auto client = (*link)->ForkIn(cluster::NetnsLink::kB, [&](int out) { return FetchChild(**link, *kv, port, out); });
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  const Status started = player.Start();
  int code = -1;
  const std::string report = cluster::Reap(*client, 40, false, &code);
  player.Stop();
  cluster::Reap(*server, 5, true);
  ASSERT_TRUE(started.ok()) << started.ToString();
  ASSERT_TRUE(player.status().ok()) << player.status().ToString();
  ASSERT_EQ(code, 0) << report;
  ASSERT_GE(player.applied().size(), 2u) << "the rate drop was never applied; report:\n" << report;

  std::istringstream lines(report);
  std::vector<std::pair<int, uint64_t>> chosen;  // level, bytes per chunk in chunk order
  int complete = 0, mismatches = -1;
  for (std::string word; lines >> word;) {
    if (word == "chunk") {
      int c, level;
      uint64_t bytes;
      lines >> c >> level >> bytes;
      chosen.emplace_back(level, bytes);
    } else if (word == "done") {
      lines >> complete >> mismatches;
    }
  }
  std::string levels;
  for (const auto& [level, bytes] : chosen) levels += LevelName(level) + " ";
  std::printf("levels chosen, chunk by chunk (rate / 10 at %.1f s): %s\n", kDropAtS, levels.c_str());
  EXPECT_EQ(complete, 1) << report;
  EXPECT_EQ(mismatches, 0) << report;
  ASSERT_EQ(chosen.size(), static_cast<size_t>(kTokens / kChunk)) << report;
  // The first chunk is planned on a fast link, the last on one a tenth as fast.
  EXPECT_LT(chosen.back().second, chosen.front().second) << report;
  EXPECT_NE(chosen.back().first, chosen.front().first) << report;
}

}  // namespace
}  // namespace kvstream::testing
