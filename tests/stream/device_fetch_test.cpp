// Fetches into KvDestinations on 127.0.0.1: in host memory (CPU decode, path "host") and through the
// device pipeline (path "staging") on the host test device, whose decodes run the GPU kernels' code through
// the CPU launcher. Every layout matches the CPU path bit for bit; the faults (corrupt payloads, a
// stalled sender, a killed sender, a full ring, text) end as they do on the host path.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

#include "cuda/testing/host_pipeline_device.h"
#include "stream/testing/fault_injection.h"
#include "stream/testing/receiver_test_peer.h"
#include "tests/cuda/layouts.h"
#include "tests/stream/stream_fixture.h"

namespace kvstream::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Sender> StartSender(FaultHook faults = nullptr) {
  auto sender = SenderTestPeer::StartWithFaults(TestSenderOptions(), std::move(faults));
  EXPECT_TRUE(sender.ok()) << sender.status().ToString();
  if (!sender.ok()) return nullptr;
  EXPECT_TRUE((*sender)->Register("gpl", SpecOf(StoriesKv())).ok());
  return std::move(*sender);
}

ChunkInfo ContextInfo() {
  ChunkInfo info;
  info.layers = StoriesKv().cache.layers;
  info.channels = StoriesKv().cache.kv_dim;
  info.tokens = kContextTokens;
  return info;
}

ReceiverTestPeer::MakeDevice HostDevice(int delay_ms = 0) {
  return [delay_ms]() -> Result<std::unique_ptr<cuda::PipelineDevice>> {
    cuda::testing::HostPipelineDeviceOptions o;
    o.delay_ms = delay_ms;
    return cuda::testing::MakeHostPipelineDevice(nullptr, o);
  };
}

Result<FetchResult> Fetch(int port, const KvDestination& d, Level level, bool device,
                          ReceiverOptions options = TestReceiverOptions(), int delay_ms = 0) {
  std::unique_ptr<Receiver> receiver;
  if (device) {
    KVSTREAM_ASSIGN_OR_RETURN(receiver, ReceiverTestPeer::ConnectWithDevice("127.0.0.1", port, std::move(options),
                                                                            HostDevice(delay_ms)));
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(receiver, Receiver::Connect("127.0.0.1", port, std::move(options)));
  }
  FixedLevelPolicy policy(level);
  return receiver->Fetch("gpl", d, 10.0, policy);
}

TEST(DeviceFetch, AHostDestinationIsDecodedOnTheCpuAsTheViewsAre) {
  auto sender = StartSender();
  Destination got(StoriesKv());
  auto d = KvDestination::Contiguous(got.keys, got.values, 1);
  ASSERT_TRUE(d.ok());
  auto result = Fetch(sender->port(), *d, 2, /*device=*/false);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->path, "host");
  EXPECT_TRUE(SameBytes(got, LocalDecode(StoriesKv(), 2)));
}

TEST(DeviceFetch, EveryLayoutThroughTheDevicePipelineMatchesTheCpuPath) {
  auto sender = StartSender();
  for (Level level : {kLevelInt8, Level{2}, Level{5}}) {
    for (const char* kind : kLayouts) {
      SCOPED_TRACE(std::string(kind) + " at " + LevelName(level));
      Layout cpu = MakeLayout(kind, DType::kF16, ContextInfo(), 1);
      Layout gpu = MakeLayout(kind, DType::kF16, ContextInfo(), 1);
      ASSERT_TRUE(Fetch(sender->port(), cpu.destination, level, false).ok());
      auto result = Fetch(sender->port(), gpu.destination, level, true);
      ASSERT_TRUE(result.ok()) << result.status().ToString();
      EXPECT_TRUE(result->complete);
      EXPECT_EQ(result->path, "staging");
      EXPECT_NE(result->device.find("host"), std::string::npos) << result->device;
      EXPECT_EQ(gpu.storage, cpu.storage);
      for (const ChunkTelemetry& t : result->chunks) EXPECT_GE(t.decode_s, 0.0);
    }
  }
}

TEST(DeviceFetch, AOneSlotRingOnASlowDeviceHoldsTheLinkBackAndCompletes) {
  auto sender = StartSender();
  Layout cpu = MakeLayout("paged", DType::kBF16, ContextInfo(), 1);
  Layout gpu = MakeLayout("paged", DType::kBF16, ContextInfo(), 1);
  ASSERT_TRUE(Fetch(sender->port(), cpu.destination, 3, false).ok());
  ReceiverOptions options = TestReceiverOptions();
  options.device_ring_slots = 1;
  options.max_inflight_chunks = 4;
  auto result = Fetch(sender->port(), gpu.destination, 3, true, options, /*delay_ms=*/20);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(gpu.storage, cpu.storage);
}

TEST(DeviceFetch, ACorruptPayloadIsRerequestedOnceAndTwiceFailsNamingTheCrc) {
  std::atomic<int> corrupted{0};
  auto once = StartSender([&](const ChunkRequest& r) {
    return r.chunk == 2 && corrupted.fetch_add(1) == 0 ? FaultAction::kCorrupt : FaultAction::kNone;
  });
  Layout cpu = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  Layout gpu = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  auto clean = StartSender();
  ASSERT_TRUE(Fetch(clean->port(), cpu.destination, 1, false).ok());
  auto result = Fetch(once->port(), gpu.destination, 1, true);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->retries, 1);
  EXPECT_EQ(gpu.storage, cpu.storage);

  auto always = StartSender([](const ChunkRequest& r) { return r.chunk == 3 ? FaultAction::kCorrupt : FaultAction::kNone; });
  Layout bad = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  auto failed = Fetch(always->port(), bad.destination, kLevelInt8, true);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kCorruptData);
  EXPECT_NE(failed.status().message().find("chunk 3"), std::string::npos) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("CRC32C mismatch"), std::string::npos);
}

TEST(DeviceFetch, AStalledSenderTimesOutAndAKilledOneFailsPromptly) {
  auto stalled = StartSender([](const ChunkRequest& r) { return r.chunk == 1 ? FaultAction::kDrop : FaultAction::kNone; });
  ReceiverOptions short_timeout = TestReceiverOptions();
  short_timeout.chunk_timeout_ms = 500;
  Layout a = MakeLayout("huggingface", DType::kF16, ContextInfo(), 1);
  auto timed_out = Fetch(stalled->port(), a.destination, 2, true, short_timeout);
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kTimeout) << timed_out.status().ToString();
  EXPECT_NE(timed_out.status().message().find("chunk 1"), std::string::npos);

  std::promise<void> reached;
  std::atomic<bool> first{false};
  auto doomed = StartSender([&](const ChunkRequest& r) {
    if (r.chunk != 2) return FaultAction::kNone;
    if (!first.exchange(true)) reached.set_value();
    return FaultAction::kDrop;
  });
  ReceiverOptions long_timeout = TestReceiverOptions();
  long_timeout.chunk_timeout_ms = 60000;  // the failure must come from the lost connection
  Layout b = MakeLayout("paged-joined", DType::kF16, ContextInfo(), 1);
  const int port = doomed->port();
  auto fetch = std::async(std::launch::async, [&] { return Fetch(port, b.destination, kLevelFp16, true, long_timeout); });
  ASSERT_EQ(reached.get_future().wait_for(20s), std::future_status::ready);
  doomed.reset();
  ASSERT_EQ(fetch.wait_for(20s), std::future_status::ready) << "fetch hangs after the sender died";
  auto result = fetch.get();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
}

TEST(DeviceFetch, TextIsRefusedWithAClearErrorAndAWrongShapeBeforeAnyRequest) {
  auto sender = StartSender();
  Layout d = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  auto text = Fetch(sender->port(), d.destination, kLevelText, true);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kUnsupported) << text.status().ToString();
  EXPECT_NE(text.status().message().find("text"), std::string::npos);

  ChunkInfo short_context = ContextInfo();
  short_context.tokens = kContextTokens - 10;
  Layout small = MakeLayout("contiguous", DType::kF16, short_context, 1);
  small.destination.positions = kContextTokens - 10;
  auto refused = Fetch(sender->port(), small.destination, kLevelInt8, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("positions"), std::string::npos);
}

TEST(DeviceFetch, OneReceiverFetchesTwiceOnItsDevice) {
  auto sender = StartSender();
  auto receiver = ReceiverTestPeer::ConnectWithDevice("127.0.0.1", sender->port(), TestReceiverOptions(), HostDevice());
  ASSERT_TRUE(receiver.ok());
  Layout cpu = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  ASSERT_TRUE(Fetch(sender->port(), cpu.destination, 4, false).ok());
  for (int i = 0; i < 2; ++i) {
    Layout gpu = MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
    FixedLevelPolicy policy(4);
    auto result = (*receiver)->Fetch("gpl", gpu.destination, 10.0, policy);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(gpu.storage, cpu.storage);
  }
}

}  // namespace
}  // namespace kvstream::testing
