// Soak: many sequential fetches on one connection and many concurrent ones on several, cycling through
// every KV level, each decoded byte compared with a local decode; afterwards nothing is left pending.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <thread>

#include "tests/stream/stream_fixture.h"

namespace kvstream::testing {
namespace {

TEST(Soak, SequentialAndConcurrentFetchesReproduceTheLocalDecodeExactly) {
  SenderOptions options = TestSenderOptions();
  options.cache_bytes = 1 << 20;  // forces a mix of cached and on-demand encodes
  options.encode_threads = 2;
  auto sender = Sender::Start(options);
  ASSERT_TRUE(sender.ok()) << sender.status().ToString();
  ASSERT_TRUE((*sender)->Register("gpl", SpecOf(StoriesKv())).ok());

  auto probe = Receiver::Connect("127.0.0.1", (*sender)->port(), TestReceiverOptions());
  ASSERT_TRUE(probe.ok());
  auto manifest = (*probe)->GetManifest("gpl");
  ASSERT_TRUE(manifest.ok());
  std::vector<Level> levels;
  std::map<Level, Destination> expected;
  for (const LevelInfo& info : manifest->manifest.levels) {
    if (info.level == kLevelText) continue;
    levels.push_back(info.level);
    expected.emplace(info.level, LocalDecode(StoriesKv(), info.level));
  }

  // Sequential: one connection, 3 passes over every level, alternating pipelined and not.
  int fetches = 0;
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < levels.size(); ++i) {
      Destination got(StoriesKv());
      FixedLevelPolicy policy(levels[i]);
      auto result = (*probe)->Fetch("gpl", got.keys, got.values, 10.0, policy);
      ASSERT_TRUE(result.ok()) << "pass " << pass << " " << LevelName(levels[i]) << ": " << result.status().ToString();
      ASSERT_TRUE(SameBytes(got, expected.at(levels[i]))) << "pass " << pass << " " << LevelName(levels[i]);
      ++fetches;
    }
  }

  // Concurrent: 8 connections with 8 fetches each, every thread walking the levels from its own offset.
  constexpr int kThreads = 8, kPerThread = 8;
  std::vector<std::future<std::string>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t]() -> std::string {
      ReceiverOptions ro = TestReceiverOptions();
      ro.max_inflight_chunks = 1 + t % 3;
      ro.decode_threads = 1 + t % 2;
      auto receiver = Receiver::Connect("127.0.0.1", (*sender)->port(), ro);
      if (!receiver.ok()) return receiver.status().ToString();
      for (int i = 0; i < kPerThread; ++i) {
        const Level level = levels[(t + i) % levels.size()];
        Destination got(StoriesKv());
        FixedLevelPolicy policy(level);
        auto result = (*receiver)->Fetch("gpl", got.keys, got.values, 10.0, policy);
        if (!result.ok()) return result.status().ToString();
        if (!SameBytes(got, expected.at(level))) return "thread " + std::to_string(t) + " level " + LevelName(level) + " differs";
      }
      return "";
    }));
  }
  for (auto& w : workers) {
    ASSERT_EQ(w.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    EXPECT_EQ(w.get(), "");
  }
  fetches += kThreads * kPerThread;
  EXPECT_EQ(fetches, 3 * static_cast<int>(levels.size()) + 64);
  probe->reset();
  for (int i = 0; i < 100 && ((*sender)->stats().connections > 0 || (*sender)->stats().sends_pending > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ((*sender)->stats().connections, 0);
  EXPECT_EQ((*sender)->stats().sends_pending, 0u);
  EXPECT_LE((*sender)->stats().cache_bytes, options.cache_bytes);
}

}  // namespace
}  // namespace kvstream::testing
