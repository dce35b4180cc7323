// The UCX data plane on this host (UCX picks shared memory or tcp): payloads of eager and rendezvous
// sizes arrive intact in the posted buffer; oversize, unexpected and orphaned messages fail cleanly.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <numeric>

#include "kvstream/transport.h"

namespace kvstream {
namespace {

using namespace std::chrono_literals;

struct Received {
  Status status;
  uint64_t bytes = 0;
  uint32_t crc = 0;
};

std::shared_ptr<DataPlane> MakePlane(int send_timeout_ms = 30000) {
  DataPlaneOptions options;
  options.send_timeout_ms = send_timeout_ms;
  auto plane = DataPlane::Create(options);
  EXPECT_TRUE(plane.ok()) << plane.status().ToString();
  return plane.ok() ? *plane : nullptr;
}

TEST(DataPlane, DeliversEagerAndRendezvousPayloadsIntoThePostedBuffer) {
  auto a = MakePlane();
  auto b = MakePlane();
  ASSERT_TRUE(a && b);
  auto peer = a->Connect(b->address());
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  for (size_t size : {size_t{1}, size_t{100}, size_t{9000}, size_t{1} << 20, size_t{7} << 20}) {
    auto payload = std::make_shared<std::vector<uint8_t>>(size);
    for (size_t i = 0; i < size; ++i) (*payload)[i] = static_cast<uint8_t>(i * 7 + size);
    auto dest = std::make_shared<std::vector<uint8_t>>(size + 16, 0xEE);
    const uint64_t id = b->NewMessageId();
    std::promise<Received> got;
    ASSERT_TRUE(b->ExpectReceive(id, dest->data(), dest->size(), Device::kHost, dest,
                                 [&](Status s, uint64_t n, uint32_t crc) { got.set_value({s, n, crc}); })
                    .ok());
    std::promise<Status> sent;
    a->Send(*peer, id, 0xC0FFEEu, payload->data(), size, Device::kHost, payload, [&](Status s) { sent.set_value(s); });
    auto sent_f = sent.get_future();
    auto got_f = got.get_future();
    ASSERT_EQ(got_f.wait_for(20s), std::future_status::ready) << size;
    ASSERT_EQ(sent_f.wait_for(20s), std::future_status::ready) << size;
    const Received r = got_f.get();
    EXPECT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_TRUE(sent_f.get().ok());
    EXPECT_EQ(r.bytes, size);
    EXPECT_EQ(r.crc, 0xC0FFEEu);
    EXPECT_TRUE(std::equal(payload->begin(), payload->end(), dest->begin())) << size;
    EXPECT_EQ((*dest)[size], 0xEE) << "wrote past the payload";
  }
  EXPECT_EQ(a->stats().sends_pending, 0u);
  EXPECT_EQ(b->stats().receives_posted, 0u);
}

TEST(DataPlane, PayloadLargerThanThePostedBufferFailsTheReceive) {
  auto a = MakePlane();
  auto b = MakePlane();
  auto peer = a->Connect(b->address());
  ASSERT_TRUE(peer.ok());
  for (size_t size : {size_t{2000}, size_t{4} << 20}) {
    auto payload = std::make_shared<std::vector<uint8_t>>(size, 1);
    auto dest = std::make_shared<std::vector<uint8_t>>(size / 2);
    const uint64_t id = b->NewMessageId();
    std::promise<Received> got;
    ASSERT_TRUE(b->ExpectReceive(id, dest->data(), dest->size(), Device::kHost, dest,
                                 [&](Status s, uint64_t n, uint32_t crc) { got.set_value({s, n, crc}); })
                    .ok());
    std::promise<Status> sent;
    a->Send(*peer, id, 0, payload->data(), size, Device::kHost, payload, [&](Status s) { sent.set_value(s); });
    auto got_f = got.get_future();
    ASSERT_EQ(got_f.wait_for(20s), std::future_status::ready);
    const Received r = got_f.get();
    EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted) << r.status.ToString();
    EXPECT_NE(r.status.message().find("posted buffer holds"), std::string::npos);
    ASSERT_EQ(sent.get_future().wait_for(20s), std::future_status::ready);
  }
}

TEST(DataPlane, UnexpectedAndCancelledMessagesAreDroppedWithoutCallbacks) {
  auto a = MakePlane();
  auto b = MakePlane();
  auto peer = a->Connect(b->address());
  ASSERT_TRUE(peer.ok());
  auto payload = std::make_shared<std::vector<uint8_t>>(size_t{2} << 20, 3);
  // Never posted: a rendezvous send is refused by the receiver and fails.
  std::promise<Status> sent;
  a->Send(*peer, 999999, 0, payload->data(), payload->size(), Device::kHost, payload, [&](Status s) { sent.set_value(s); });
  auto f = sent.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  EXPECT_FALSE(f.get().ok());
  // Posted then cancelled: no callback, and the send fails the same way.
  const uint64_t id = b->NewMessageId();
  auto dest = std::make_shared<std::vector<uint8_t>>(payload->size());
  bool called = false;
  ASSERT_TRUE(b->ExpectReceive(id, dest->data(), dest->size(), Device::kHost, dest, [&](Status, uint64_t, uint32_t) { called = true; }).ok());
  b->CancelReceive(id);
  std::promise<Status> sent2;
  a->Send(*peer, id, 0, payload->data(), payload->size(), Device::kHost, payload, [&](Status s) { sent2.set_value(s); });
  auto f2 = sent2.get_future();
  ASSERT_EQ(f2.wait_for(20s), std::future_status::ready);
  EXPECT_FALSE(f2.get().ok());
  EXPECT_FALSE(called);
  EXPECT_EQ(b->stats().receives_posted, 0u);
}

TEST(DataPlane, DestroyingAPlaneCompletesItsPostedReceivesAndFailsPeersSends) {
  auto a = MakePlane(3000);
  auto b = MakePlane();
  auto peer = a->Connect(b->address());
  ASSERT_TRUE(peer.ok());
  std::promise<Received> got;
  auto dest = std::make_shared<std::vector<uint8_t>>(16);
  ASSERT_TRUE(b->ExpectReceive(b->NewMessageId(), dest->data(), dest->size(), Device::kHost, dest,
                               [&](Status s, uint64_t n, uint32_t c) { got.set_value({s, n, c}); })
                  .ok());
  b.reset();
  auto got_f = got.get_future();
  ASSERT_EQ(got_f.wait_for(1s), std::future_status::ready);
  EXPECT_EQ(got_f.get().status.code(), StatusCode::kCancelled);
  // The peer is gone: sends to it fail (peer failure or send timeout), they do not hang.
  auto payload = std::make_shared<std::vector<uint8_t>>(size_t{4} << 20, 1);
  std::promise<Status> sent;
  a->Send(*peer, 1, 0, payload->data(), payload->size(), Device::kHost, payload, [&](Status s) { sent.set_value(s); });
  auto f = sent.get_future();
  ASSERT_EQ(f.wait_for(30s), std::future_status::ready);
  EXPECT_FALSE(f.get().ok());
  EXPECT_EQ(a->stats().sends_pending, 0u);
}

TEST(DataPlane, RefusesOversizeSendsAndReceives) {
  DataPlaneOptions options;
  options.max_message_bytes = 1000;
  auto plane = DataPlane::Create(options);
  ASSERT_TRUE(plane.ok());
  std::vector<uint8_t> buf(2000);
  Status st = (*plane)->ExpectReceive(1, buf.data(), buf.size(), Device::kHost, nullptr, [](Status, uint64_t, uint32_t) {});
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  Status sent;
  (*plane)->Send(1, 1, 0, buf.data(), buf.size(), Device::kHost, nullptr, [&](Status s) { sent = s; });
  EXPECT_EQ(sent.code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace kvstream
