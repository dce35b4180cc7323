// Integrity and faults on 127.0.0.1: a corrupted payload is re-requested once and then fails the fetch;
// a stalled sender, a killed sender and a vanished receiver end in errors within the configured timeouts,
// leave nothing pending, and do not disturb other sessions; 64 concurrent fetches stay within bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "stream/testing/fault_injection.h"
#include "tests/stream/stream_fixture.h"

namespace kvstream::testing {
namespace {

using namespace std::chrono_literals;

// A sender of StoriesKv() as "gpl", its chunk sends passed through `faults` (none by default).
std::unique_ptr<Sender> StartSender(SenderOptions options, FaultHook faults = nullptr) {
  auto sender = SenderTestPeer::StartWithFaults(std::move(options), std::move(faults));
  EXPECT_TRUE(sender.ok()) << sender.status().ToString();
  if (!sender.ok()) return nullptr;
  EXPECT_TRUE((*sender)->Register("gpl", SpecOf(StoriesKv())).ok());
  return std::move(*sender);
}

Result<FetchResult> FetchOnce(int port, Destination& d, Level level, ReceiverOptions options = TestReceiverOptions()) {
  KVSTREAM_ASSIGN_OR_RETURN(auto receiver, Receiver::Connect("127.0.0.1", port, std::move(options)));
  FixedLevelPolicy policy(level);
  return receiver->Fetch("gpl", d.keys, d.values, 10.0, policy);
}

// Waits (bounded) until `done` holds.
template <class F>
bool Eventually(F done) {
  for (int i = 0; i < 100; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return done();
}

TEST(Faults, CorruptedChunkIsRerequestedOnceAndThenArrivesIntact) {
  std::atomic<int> corrupted{0};
  SenderOptions options = TestSenderOptions();
  const FaultHook faults = [&](const ChunkRequest& r) {
    return r.chunk == 2 && corrupted.fetch_add(1) == 0 ? FaultAction::kCorrupt : FaultAction::kNone;
  };
  auto sender = StartSender(options, faults);
  Destination got(StoriesKv());
  auto result = FetchOnce(sender->port(), got, 1);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->retries, 1);
  EXPECT_TRUE(SameBytes(got, LocalDecode(StoriesKv(), 1)));
}

TEST(Faults, ChunkCorruptedTwiceFailsTheFetchNamingTheCrc) {
  SenderOptions options = TestSenderOptions();
  const FaultHook faults = [](const ChunkRequest& r) { return r.chunk == 3 ? FaultAction::kCorrupt : FaultAction::kNone; };
  auto sender = StartSender(options, faults);
  Destination got(StoriesKv());
  auto result = FetchOnce(sender->port(), got, kLevelInt8);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCorruptData);
  EXPECT_NE(result.status().message().find("chunk 3"), std::string::npos) << result.status().ToString();
  EXPECT_NE(result.status().message().find("CRC32C mismatch"), std::string::npos);
}

TEST(Faults, StalledSenderTimesOutWithoutDisturbingOtherSessions) {
  SenderOptions options = TestSenderOptions();
  const FaultHook faults = [](const ChunkRequest& r) { return r.level == 2 && r.chunk == 1 ? FaultAction::kDrop : FaultAction::kNone; };
  auto sender = StartSender(options, faults);
  ReceiverOptions short_timeout = TestReceiverOptions();
  short_timeout.chunk_timeout_ms = 500;
  Destination stalled(StoriesKv());
  auto stalled_fetch = std::async(std::launch::async, [&] { return FetchOnce(sender->port(), stalled, 2, short_timeout); });
  Destination healthy(StoriesKv());
  auto ok = FetchOnce(sender->port(), healthy, 1);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(SameBytes(healthy, LocalDecode(StoriesKv(), 1)));
  ASSERT_EQ(stalled_fetch.wait_for(20s), std::future_status::ready);
  auto result = stalled_fetch.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kTimeout) << result.status().ToString();
  EXPECT_NE(result.status().message().find("chunk 1"), std::string::npos);
  EXPECT_TRUE(Eventually([&] { return sender->stats().connections == 0 && sender->stats().sends_pending == 0; }));
}

TEST(Faults, SenderKilledMidStreamFailsTheFetchPromptly) {
  std::promise<void> reached;
  std::atomic<bool> once{false};
  SenderOptions options = TestSenderOptions();
  const FaultHook faults = [&](const ChunkRequest& r) {
    if (r.chunk != 2) return FaultAction::kNone;
    if (!once.exchange(true)) reached.set_value();
    return FaultAction::kDrop;
  };
  auto sender = StartSender(options, faults);
  ReceiverOptions long_timeout = TestReceiverOptions();
  long_timeout.chunk_timeout_ms = 60000;  // the failure must come from the lost connection, not a timeout
  Destination got(StoriesKv());
  const int port = sender->port();
  auto fetch = std::async(std::launch::async, [&] { return FetchOnce(port, got, kLevelFp16, long_timeout); });
  ASSERT_EQ(reached.get_future().wait_for(20s), std::future_status::ready);
  sender.reset();
  ASSERT_EQ(fetch.wait_for(20s), std::future_status::ready) << "fetch hangs after the sender died";
  auto result = fetch.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
}

TEST(Faults, VanishedReceiverIsCleanedUpAndOthersContinue) {
  SenderOptions options = TestSenderOptions();
  options.data.send_timeout_ms = 2000;
  auto sender = StartSender(options);
  for (int round = 0; round < 3; ++round) {
    // A receiver at the transport level that asks for a chunk and disappears before it arrives.
    auto plane = DataPlane::Create();
    ASSERT_TRUE(plane.ok());
    auto control = ConnectControl("127.0.0.1", sender->port(), TestReceiverOptions().control, (*plane)->address());
    ASSERT_TRUE(control.ok()) << control.status().ToString();
    (*control)->Start([](ControlMessage) {}, [](Status) {});
    for (int c = 0; c < 5; ++c) (*control)->Send(ChunkRequest{(*plane)->NewMessageId(), "gpl", c, kLevelFp16});
    if (round % 2 == 0) plane->reset();  // the data plane dies first, then the control connection
    control->reset();
    plane->reset();
  }
  EXPECT_TRUE(Eventually([&] { return sender->stats().connections == 0 && sender->stats().sends_pending == 0; }))
      << "connections " << sender->stats().connections << ", sends pending " << sender->stats().sends_pending;
  Destination got(StoriesKv());
  auto ok = FetchOnce(sender->port(), got, 1);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(SameBytes(got, LocalDecode(StoriesKv(), 1)));
}

TEST(Faults, SixtyFourConcurrentFetchesStayWithinTheConfiguredBounds) {
  SenderOptions options = TestSenderOptions();
  options.cache_bytes = 256 << 10;  // far less than one level of the context: most chunks encode on demand
  options.encode_threads = 2;
  auto sender = StartSender(options);
  auto shared_plane = DataPlane::Create();
  ASSERT_TRUE(shared_plane.ok());
  const Level levels[] = {1, 3, kLevelInt8, kLevelFp16};
  std::vector<Destination> expected;
  for (Level l : levels) expected.push_back(LocalDecode(StoriesKv(), l));

  constexpr int kFetches = 64;
  std::vector<std::unique_ptr<Receiver>> receivers;
  for (int i = 0; i < kFetches; ++i) {
    ReceiverOptions ro = TestReceiverOptions();
    ro.data_plane = *shared_plane;
    ro.chunk_timeout_ms = 30000;
    auto r = Receiver::Connect("127.0.0.1", sender->port(), ro);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    receivers.push_back(std::move(*r));
  }
  // Every destination before the first fetch starts: a fetch thread reads `dests` while this one would
  // otherwise still grow it (ThreadSanitizer caught the reallocation racing with the reads).
  std::vector<std::unique_ptr<Destination>> dests;
  for (int i = 0; i < kFetches; ++i) dests.push_back(std::make_unique<Destination>(StoriesKv()));
  std::vector<std::future<Result<FetchResult>>> fetches;
  for (int i = 0; i < kFetches; ++i) {
    fetches.push_back(std::async(std::launch::async, [&, i] {
      FixedLevelPolicy policy(levels[i % 4]);
      return receivers[i]->Fetch("gpl", dests[i]->keys, dests[i]->values, 60.0, policy);
    }));
  }
  uint64_t peak_cache = 0;
  for (int i = 0; i < kFetches; ++i) {
    while (fetches[i].wait_for(20ms) != std::future_status::ready) peak_cache = std::max(peak_cache, sender->stats().cache_bytes);
    auto result = fetches[i].get();
    ASSERT_TRUE(result.ok()) << i << ": " << result.status().ToString();
    EXPECT_TRUE(SameBytes(*dests[i], expected[i % 4])) << "fetch " << i;
  }
  EXPECT_LE(peak_cache, options.cache_bytes);
  EXPECT_EQ((*shared_plane)->stats().receives_posted, 0u);
  receivers.clear();
  EXPECT_TRUE(Eventually([&] { return sender->stats().connections == 0 && sender->stats().sends_pending == 0; }));
}

}  // namespace
}  // namespace kvstream::testing
