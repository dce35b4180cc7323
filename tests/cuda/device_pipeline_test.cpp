// The device pipeline (kvstream/device_pipeline.h) on the host test device: a real context's chunks
// (stories260K) through a small ring into every destination layout, bit-identical to the CPU decoder;
// the CRC check, backpressure on a full ring, refused and damaged chunks, readiness and its bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "codec/common/crc32c.h"
#include "cuda/testing/host_pipeline_device.h"
#include "kvstream/codec.h"
#include "kvstream/device_pipeline.h"
#include "tests/codec/golden_chunks.h"
#include "tests/codec/kv_fixture.h"
#include "tests/cuda/layouts.h"

namespace kvstream {
namespace {

constexpr int kTokens = 200;
constexpr int kChunkTokens = 64;  // 4 chunks, the last one short

const testing::RealKv& Kv() {
  std::string error;
  const testing::RealKv* kv = testing::GetRealKv("stories260K", kTokens, &error);
  EXPECT_NE(kv, nullptr) << error;
  return *kv;
}

// The context's chunks at `level` (in-chunk tables: no profile).
std::vector<std::vector<uint8_t>> Chunks(Level level) {
  const testing::RealKv& kv = Kv();
  TensorView keys = const_cast<KvCache&>(kv.cache).keys(), values = const_cast<KvCache&>(kv.cache).values();
  std::vector<std::vector<uint8_t>> out;
  for (int64_t begin = 0; begin < kTokens; begin += kChunkTokens) {
    ChunkInput in;
    in.keys = SliceTokens(keys, begin, std::min<int64_t>(kChunkTokens, kTokens - begin));
    in.values = SliceTokens(values, begin, std::min<int64_t>(kChunkTokens, kTokens - begin));
    in.token_begin = begin;
    EncodeOptions options;
    options.level = level;
    auto bytes = EncodeChunk(in, options);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    out.push_back(std::move(*bytes));
  }
  return out;
}

ChunkInfo ContextInfo() {
  ChunkInfo info;
  info.layers = Kv().cache.layers;
  info.channels = Kv().cache.kv_dim;
  info.token_begin = 0;
  info.tokens = kTokens;
  return info;
}

struct Done {
  std::mutex mu;
  std::vector<int> order;
  std::vector<Status> status;
};

DevicePipeline::ChunkDone Record(Done& done) {
  return [&done](int chunk, const Status& s, double decode_s) {
    std::lock_guard lock(done.mu);
    done.order.push_back(chunk);
    done.status.push_back(s);
    EXPECT_GE(decode_s, 0.0);
  };
}

std::shared_ptr<cuda::PipelineDevice> HostDevice(int delay_ms = 0) {
  cuda::testing::HostPipelineDeviceOptions o;
  o.delay_ms = delay_ms;
  return cuda::testing::MakeHostPipelineDevice(nullptr, o);
}

Status Feed(DevicePipeline& p, int chunk, const std::vector<uint8_t>& bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(DevicePipeline::Slot slot, p.Acquire());
  std::memcpy(slot.data, bytes.data(), bytes.size());
  return p.Submit(slot, chunk, bytes.size(), codec::Crc32c(bytes.data(), bytes.size()));
}

TEST(DevicePipeline, AContextThroughATwoSlotRingMatchesTheCpuDecoderInEveryLayout) {
  for (Level level : {kLevelInt8, Level{2}, Level{5}}) {
    const auto chunks = Chunks(level);
    for (const char* kind : testing::kLayouts) {
      SCOPED_TRACE(std::string(kind) + " at " + LevelName(level));
      testing::Layout expected = testing::MakeLayout(kind, DType::kF16, ContextInfo(), 1);
      testing::Layout got = testing::MakeLayout(kind, DType::kF16, ContextInfo(), 1);
      for (const auto& c : chunks) ASSERT_TRUE(DecodeChunkInto(c.data(), c.size(), {}, expected.destination).ok());

      DevicePipelineOptions options;
      options.ring_slots = 2;
      options.max_chunk_bytes = 1 << 20;
      Done done;
      auto p = DevicePipeline::Create(options, HostDevice(), got.destination, static_cast<int>(chunks.size()), Record(done));
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      for (size_t c = 0; c < chunks.size(); ++c) ASSERT_TRUE(Feed(**p, static_cast<int>(c), chunks[c]).ok());
      ASSERT_TRUE((*p)->Finish().ok());
      ASSERT_TRUE((*p)->WaitLayer(0).ok());
      EXPECT_TRUE(*(*p)->LayerReady(Kv().cache.layers - 1));
      for (size_t c = 0; c < chunks.size(); ++c) EXPECT_TRUE(*(*p)->ChunkReady(static_cast<int>(c)));
      EXPECT_EQ(got.storage, expected.storage);
      std::lock_guard lock(done.mu);
      EXPECT_EQ(done.order, (std::vector<int>{0, 1, 2, 3}));  // in submission order
      for (const Status& s : done.status) EXPECT_TRUE(s.ok()) << s.ToString();
    }
  }
}

TEST(DevicePipeline, ChunksMaySubmitOutOfOrder) {
  const auto chunks = Chunks(Level{3});
  testing::Layout expected = testing::MakeLayout("paged", DType::kBF16, ContextInfo(), 1);
  testing::Layout got = testing::MakeLayout("paged", DType::kBF16, ContextInfo(), 1);
  for (const auto& c : chunks) ASSERT_TRUE(DecodeChunkInto(c.data(), c.size(), {}, expected.destination).ok());
  auto p = DevicePipeline::Create({}, HostDevice(), got.destination, 4);
  ASSERT_TRUE(p.ok());
  for (int c : {2, 0, 3, 1}) ASSERT_TRUE(Feed(**p, c, chunks[c]).ok());
  ASSERT_TRUE((*p)->Finish().ok());
  EXPECT_EQ(got.storage, expected.storage);
}

TEST(DevicePipeline, ACorruptPayloadIsRefusedBeforeUseAndItsSlotIsFreeAgain) {
  const auto chunks = Chunks(Level{4});
  testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  testing::Layout expected = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  for (const auto& c : chunks) ASSERT_TRUE(DecodeChunkInto(c.data(), c.size(), {}, expected.destination).ok());
  DevicePipelineOptions options;
  options.ring_slots = 1;
  Done done;
  auto p = DevicePipeline::Create(options, HostDevice(), got.destination, 4, Record(done));
  ASSERT_TRUE(p.ok());
  for (int c = 0; c < 4; ++c) {
    auto slot = (*p)->Acquire();
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    std::memcpy(slot->data, chunks[c].data(), chunks[c].size());
    const uint32_t crc = codec::Crc32c(chunks[c].data(), chunks[c].size());
    slot->data[chunks[c].size() / 2] ^= 0x10;  // damaged on the wire
    const Status bad = (*p)->Submit(*slot, c, chunks[c].size(), crc);
    EXPECT_EQ(bad.code(), StatusCode::kCorruptData) << bad.ToString();
    EXPECT_NE(bad.message().find("CRC32C"), std::string::npos);
    ASSERT_TRUE(Feed(**p, c, chunks[c]).ok());  // the re-request, into the one slot, now free again
  }
  ASSERT_TRUE((*p)->Finish().ok());
  EXPECT_EQ(got.storage, expected.storage);
  std::lock_guard lock(done.mu);
  EXPECT_EQ(done.order.size(), 4u);  // the payloads refused for their CRC are Submit's errors, not ChunkDone's
}

TEST(DevicePipeline, AFullRingHoldsBackAcquireUntilASlotIsDecoded) {
  const auto chunks = Chunks(kLevelInt8);
  testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  DevicePipelineOptions options;
  options.ring_slots = 1;
  options.wait_timeout_ms = 20;
  auto p = DevicePipeline::Create(options, HostDevice(/*delay_ms=*/300), got.destination, 4);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(Feed(**p, 0, chunks[0]).ok());
  auto blocked = (*p)->Acquire();  // chunk 0 still on the slow device
  ASSERT_EQ(blocked.status().code(), StatusCode::kTimeout) << blocked.status().ToString();
  EXPECT_NE(blocked.status().message().find("ring full"), std::string::npos);
  EXPECT_FALSE(*(*p)->LayerReady(0));
  Status finished = (*p)->Finish();
  for (int i = 0; i < 200 && finished.code() == StatusCode::kTimeout; ++i) finished = (*p)->Finish();  // each 20 ms
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  EXPECT_TRUE(*(*p)->ChunkReady(0));
  EXPECT_FALSE(*(*p)->ChunkReady(1));
  EXPECT_TRUE((*p)->Acquire().ok());  // free once decoded
  // A chunk never submitted: the wait is bounded.
  EXPECT_EQ((*p)->WaitChunk(1).code(), StatusCode::kTimeout);
  EXPECT_EQ((*p)->WaitLayer(0).code(), StatusCode::kTimeout);
  EXPECT_EQ((*p)->LayerEvent(0), nullptr);
}

TEST(DevicePipeline, ADamagedChunkWithAGoodCrcFailsAloneAndTheOthersAreWritten) {
  auto chunks = Chunks(Level{3});
  testing::Layout got = testing::MakeLayout("huggingface", DType::kF16, ContextInfo(), 1);
  testing::Layout expected = testing::MakeLayout("huggingface", DType::kF16, ContextInfo(), 1);
  for (int c : {0, 2, 3}) ASSERT_TRUE(DecodeChunkInto(chunks[c].data(), chunks[c].size(), {}, expected.destination).ok());
  // Chunk 1's last segment is damaged after the sender stamped its CRC: the CRC passes, a kernel refuses.
  std::vector<uint8_t>& bad = chunks[1];
  for (size_t i = bad.size() - 64; i < bad.size() - 8; ++i) bad[i] ^= 0x5a;
  Done done;
  auto p = DevicePipeline::Create({}, HostDevice(), got.destination, 4, Record(done));
  ASSERT_TRUE(p.ok());
  for (int c = 0; c < 4; ++c) ASSERT_TRUE(Feed(**p, c, chunks[c]).ok());
  const Status finished = (*p)->Finish();
  ASSERT_FALSE(finished.ok());
  EXPECT_NE(finished.ToString().find("chunk"), std::string::npos) << finished.ToString();
  EXPECT_FALSE((*p)->ChunkReady(1).ok());
  EXPECT_FALSE((*p)->LayerReady(0).ok());
  EXPECT_FALSE((*p)->WaitLayer(0).ok());
  for (int c : {0, 2, 3}) EXPECT_TRUE(*(*p)->ChunkReady(c));
  {
    std::lock_guard lock(done.mu);
    ASSERT_EQ(done.status.size(), 4u);
    EXPECT_FALSE(done.status[1].ok());
  }
  // Every position outside chunk 1 holds exactly the CPU decoder's values.
  const int64_t layers = Kv().cache.layers, head_dim = Kv().cache.kv_dim;
  for (int64_t l = 0; l < layers; ++l) {
    for (size_t b = 0; b < 2; ++b) {
      const auto& g = got.storage[b * layers + l];
      const auto& e = expected.storage[b * layers + l];
      const size_t row = static_cast<size_t>(head_dim) * 2, batch_row = g.size() / 2;  // the context in row 1
      for (int64_t t = 0; t < kTokens; ++t) {
        if (t >= kChunkTokens && t < 2 * kChunkTokens) continue;
        ASSERT_EQ(0, std::memcmp(g.data() + batch_row + t * row, e.data() + batch_row + t * row, row)) << "token " << t;
      }
    }
  }
}

// Layers [begin, end) of a chunk as one byte range (its first part from 0: the header too).
struct PartRange {
  uint64_t offset, size;
};
PartRange RangeOf(const std::vector<uint8_t>& chunk, int64_t begin, int64_t end) {
  const ChunkInfo info = InspectChunk(chunk.data(), chunk.size()).value();
  const uint64_t from = begin == 0 ? 0 : info.segments[static_cast<size_t>(2 * begin)].offset;
  const SegmentInfo& last = info.segments[static_cast<size_t>(2 * end - 1)];
  return {from, last.offset + last.size - from};
}

Status FeedPart(DevicePipeline& p, const DevicePipeline::Slot& slot, int chunk, const std::vector<uint8_t>& bytes,
                int64_t begin, int64_t end) {
  const PartRange r = RangeOf(bytes, begin, end);
  std::memcpy(slot.data + r.offset, bytes.data() + r.offset, r.size);
  return p.SubmitPart(slot, chunk, bytes.size(), r.offset, r.size, codec::Crc32c(bytes.data() + r.offset, r.size), begin, end);
}

TEST(DevicePipeline, LayerMajorPartsMakeLayersReadyFirstLayersFirst) {
  for (Level level : {kLevelInt8, Level{3}}) {
    SCOPED_TRACE(LevelName(level));
    const auto chunks = Chunks(level);
    const int64_t L = Kv().cache.layers;
    testing::Layout expected = testing::MakeLayout("paged", DType::kF16, ContextInfo(), 1);
    testing::Layout got = testing::MakeLayout("paged", DType::kF16, ContextInfo(), 1);
    for (const auto& c : chunks) ASSERT_TRUE(DecodeChunkInto(c.data(), c.size(), {}, expected.destination).ok());
    Done done;
    auto p = DevicePipeline::Create({}, HostDevice(), got.destination, 4, Record(done));
    ASSERT_TRUE(p.ok());
    // Layer 0 of every chunk first, then the rest of each chunk.
    std::vector<DevicePipeline::Slot> slots;
    for (int c = 0; c < 4; ++c) {
      auto slot = (*p)->Acquire();
      ASSERT_TRUE(slot.ok());
      slots.push_back(*slot);
      ASSERT_TRUE(FeedPart(**p, *slot, c, chunks[c], 0, 1).ok());
    }
    ASSERT_TRUE((*p)->WaitLayer(0).ok());
    EXPECT_TRUE(*(*p)->LayerReady(0));
    EXPECT_FALSE(*(*p)->LayerReady(L - 1));
    EXPECT_FALSE(*(*p)->ChunkReady(0));
    {
      std::lock_guard lock(done.mu);
      EXPECT_TRUE(done.order.empty());  // no chunk is whole yet
    }
    for (int c = 0; c < 4; ++c) ASSERT_TRUE(FeedPart(**p, slots[c], c, chunks[c], 1, L).ok());
    ASSERT_TRUE((*p)->Finish().ok());
    for (int64_t l = 0; l < L; ++l) EXPECT_TRUE(*(*p)->LayerReady(static_cast<int>(l)));
    EXPECT_EQ(got.storage, expected.storage);
    std::lock_guard lock(done.mu);
    EXPECT_EQ(done.order.size(), 4u);  // once per chunk
  }
}

TEST(DevicePipeline, PartsOfEveryGoldenKindDecodeAsTheWholeChunk) {
  for (const char* name : testing::kKvGoldenChunks) {
    SCOPED_TRACE(name);
    const testing::Golden g = testing::LoadGolden(name);
    testing::Layout expected = testing::MakeLayout("contiguous", DType::kF16, g.info, testing::HeadsOf(g.info));
    testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, g.info, testing::HeadsOf(g.info));
    DecodeOptions options;
    options.profile = g.profile ? &*g.profile : nullptr;
    ASSERT_TRUE(DecodeChunkInto(g.bytes.data(), g.bytes.size(), options, expected.destination).ok());
    std::shared_ptr<const Profile> profile;
    if (g.profile) profile = std::make_shared<const Profile>(*g.profile);
    auto p = DevicePipeline::Create({}, cuda::testing::MakeHostPipelineDevice(profile), got.destination, 1);
    ASSERT_TRUE(p.ok());
    auto slot = (*p)->Acquire();
    ASSERT_TRUE(slot.ok());
    const int64_t L = g.info.layers;
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 2}, {2, 3}, {3, L}}) {
      ASSERT_TRUE(FeedPart(**p, *slot, 0, g.bytes, begin, end).ok()) << begin;
    }
    ASSERT_TRUE((*p)->Finish().ok());
    EXPECT_EQ(got.storage, expected.storage);
  }
}

TEST(DevicePipeline, PartsOutOfTurnAreRefusedAndABadPartIsRerequested) {
  const auto chunks = Chunks(Level{2});
  const int64_t L = Kv().cache.layers;
  testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  testing::Layout expected = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  for (const auto& c : chunks) ASSERT_TRUE(DecodeChunkInto(c.data(), c.size(), {}, expected.destination).ok());
  DevicePipelineOptions options;
  options.ring_slots = 2;
  auto p = DevicePipeline::Create(options, HostDevice(), got.destination, 4);
  ASSERT_TRUE(p.ok());
  auto a = (*p)->Acquire();
  ASSERT_TRUE(a.ok());
  // A first part without the header.
  EXPECT_EQ(FeedPart(**p, *a, 0, chunks[0], 1, L).code(), StatusCode::kInvalidArgument);
  a = (*p)->Acquire();  // given back
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(FeedPart(**p, *a, 0, chunks[0], 0, 1).ok());
  // A later part in another slot, and a layer twice.
  auto b = (*p)->Acquire();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(FeedPart(**p, *b, 0, chunks[0], 1, L).code(), StatusCode::kInvalidArgument);
  // (Without writing its bytes again: the slot's copy of them may still be on its way to the device.)
  const PartRange first = RangeOf(chunks[0], 0, 1);
  EXPECT_EQ((*p)->SubmitPart(*a, 0, chunks[0].size(), first.offset, first.size,
                             codec::Crc32c(chunks[0].data(), first.size), 0, 1)
                .code(),
            StatusCode::kInvalidArgument);
  // A later part damaged on the wire: refused, then accepted again into the chunk's slot.
  const PartRange r = RangeOf(chunks[0], 1, L);
  std::memcpy(a->data + r.offset, chunks[0].data() + r.offset, r.size);
  a->data[r.offset + r.size / 2] ^= 1;
  EXPECT_EQ((*p)->SubmitPart(*a, 0, chunks[0].size(), r.offset, r.size, codec::Crc32c(chunks[0].data() + r.offset, r.size), 1, L)
                .code(),
            StatusCode::kCorruptData);
  ASSERT_TRUE(FeedPart(**p, *a, 0, chunks[0], 1, L).ok());
  for (int c = 1; c < 4; ++c) ASSERT_TRUE(Feed(**p, c, chunks[c]).ok());
  ASSERT_TRUE((*p)->Finish().ok());
  EXPECT_EQ(got.storage, expected.storage);
}

TEST(DevicePipeline, ARefusedHeaderIsTheChunksResultAndFreesItsSlot) {
  auto chunks = Chunks(Level{2});
  chunks[0][0] ^= 0xff;  // the magic: the plan refuses the chunk before any launch
  testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  DevicePipelineOptions options;
  options.ring_slots = 1;
  Done done;
  auto p = DevicePipeline::Create(options, HostDevice(), got.destination, 4, Record(done));
  ASSERT_TRUE(p.ok());
  for (int c = 0; c < 4; ++c) ASSERT_TRUE(Feed(**p, c, chunks[c]).ok());
  EXPECT_EQ((*p)->Finish().code(), StatusCode::kCorruptData);
  const Status first = (*p)->WaitChunk(0);
  EXPECT_NE(first.ToString().find("chunk 0"), std::string::npos) << first.ToString();
  for (int c = 1; c < 4; ++c) EXPECT_TRUE(*(*p)->ChunkReady(c));
}

TEST(DevicePipeline, BadArgumentsAreClearErrors) {
  testing::Layout host = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  KvDestination on_gpu = host.destination;
  on_gpu.device = Device::kCuda;
  auto wrong_memory = DevicePipeline::Create({}, HostDevice(), on_gpu, 4);
  ASSERT_EQ(wrong_memory.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_memory.status().message().find("host"), std::string::npos) << wrong_memory.status().ToString();
  DevicePipelineOptions no_slots;
  no_slots.ring_slots = 0;
  EXPECT_EQ(DevicePipeline::Create(no_slots, HostDevice(), host.destination, 4).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(DevicePipeline::Create({}, HostDevice(), host.destination, 0).status().code(), StatusCode::kInvalidArgument);

  auto p = DevicePipeline::Create({}, HostDevice(), host.destination, 4);
  ASSERT_TRUE(p.ok());
  const auto chunks = Chunks(kLevelInt8);
  EXPECT_EQ(Feed(**p, 7, chunks[0]).code(), StatusCode::kInvalidArgument);  // no chunk 7
  ASSERT_TRUE(Feed(**p, 0, chunks[0]).ok());
  EXPECT_EQ(Feed(**p, 0, chunks[0]).code(), StatusCode::kInvalidArgument);  // twice
  auto slot = (*p)->Acquire();
  ASSERT_TRUE(slot.ok());
  EXPECT_EQ((*p)->Submit(*slot, 1, slot->capacity + 1, 0).code(), StatusCode::kInvalidArgument);  // too long
  EXPECT_EQ((*p)->ChunkReady(-1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*p)->LayerReady(1000).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE((*p)->Finish().ok());
  // The GPU device where there is none: one clear error.
  auto gpu = DevicePipeline::Create({}, nullptr, nullptr, on_gpu, 4);
  if (!GpuAvailable()) {
    EXPECT_EQ(gpu.status().code(), StatusCode::kUnsupported) << gpu.status().ToString();
  }
}

TEST(DevicePipeline, AReleasedSlotIsReused) {
  testing::Layout got = testing::MakeLayout("contiguous", DType::kF16, ContextInfo(), 1);
  DevicePipelineOptions options;
  options.ring_slots = 1;
  options.wait_timeout_ms = 20;
  auto p = DevicePipeline::Create(options, HostDevice(), got.destination, 4);
  ASSERT_TRUE(p.ok());
  for (int i = 0; i < 3; ++i) {  // cancelled receives
    auto slot = (*p)->Acquire();
    ASSERT_TRUE(slot.ok()) << slot.status().ToString();
    (*p)->Release(*slot);
  }
}

}  // namespace
}  // namespace kvstream
