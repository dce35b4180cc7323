// Control-plane message codecs: every message round-trips; truncated, oversized, unknown and lying
// payloads are rejected with an error that names the field.
#include <gtest/gtest.h>

#include "transport/control_messages.h"

namespace kvstream::transport {
namespace {

AnyMessage RoundTrip(const AnyMessage& message) {
  const auto frame = EncodeFrame(message);
  auto header = ParseFrameHeader(frame.data(), 1 << 20);
  EXPECT_TRUE(header.ok()) << header.status().ToString();
  EXPECT_EQ(header->length, frame.size() - kFrameHeaderBytes);
  auto decoded = DecodePayload(header->type, frame.data() + kFrameHeaderBytes, header->length);
  EXPECT_TRUE(decoded.ok()) << decoded.status().ToString();
  return *decoded;
}

ManifestReply SampleManifest() {
  ManifestReply m;
  m.context_id = "ctx-7";
  m.layers = 30;
  m.channels = 192;
  m.dtype = DType::kF16;
  m.manifest.num_chunks = 3;
  m.manifest.total_tokens = 600;
  m.manifest.chunk_tokens = {256, 256, 88};
  m.manifest.levels = {{kLevelFp16, 1.0}, {kLevelInt8, 0.99}, {3, 0.985}, {kLevelText, 1.0}};
  m.manifest.bytes = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
  return m;
}

TEST(ControlMessages, ManifestRoundTrips) {
  const ManifestReply in = SampleManifest();
  auto out = std::get<ManifestReply>(std::get<ControlMessage>(RoundTrip(ControlMessage(in))));
  EXPECT_EQ(out.context_id, in.context_id);
  EXPECT_EQ(out.layers, 30);
  EXPECT_EQ(out.channels, 192);
  EXPECT_EQ(out.manifest.chunk_tokens, in.manifest.chunk_tokens);
  EXPECT_EQ(out.manifest.bytes, in.manifest.bytes);
  ASSERT_EQ(out.manifest.levels.size(), 4u);
  EXPECT_EQ(out.manifest.levels[2].level, 3);
  EXPECT_DOUBLE_EQ(out.manifest.levels[1].quality, 0.99);
}

TEST(ControlMessages, RequestsAcksAndHandshakeRoundTrip) {
  auto req = std::get<ChunkRequest>(std::get<ControlMessage>(RoundTrip(ControlMessage(ChunkRequest{42, "c", 5, kLevelText}))));
  EXPECT_EQ(req.request_id, 42u);
  EXPECT_EQ(req.chunk, 5);
  EXPECT_EQ(req.level, kLevelText);
  auto ack = std::get<ChunkAck>(std::get<ControlMessage>(RoundTrip(ControlMessage(ChunkAck{9, 1000, 0.5, 0.25}))));
  EXPECT_EQ(ack.bytes, 1000u);
  EXPECT_DOUBLE_EQ(ack.decode_s, 0.25);
  Hello hello;
  hello.model_hash = 0x1234;
  hello.worker_address = {1, 2, 3};
  hello.client_nonce[31] = 7;
  auto back = std::get<Hello>(std::get<HandshakeMessage>(RoundTrip(HandshakeMessage(hello))));
  EXPECT_EQ(back.model_hash, 0x1234u);
  EXPECT_EQ(back.worker_address, hello.worker_address);
  EXPECT_EQ(back.client_nonce[31], 7);
}

TEST(ControlMessages, OversizedLengthIsRejectedBeforeReading) {
  auto frame = EncodeFrame(ControlMessage(Ping{1}));
  frame[3] = 0x7f;  // length ~2 GiB
  auto header = ParseFrameHeader(frame.data(), 1 << 20);
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(header.status().message().find("max_message_bytes"), std::string::npos);
}

TEST(ControlMessages, UnknownTypeAndReservedBitsAreRejected) {
  auto frame = EncodeFrame(ControlMessage(Ping{1}));
  frame[4] = 99;
  EXPECT_NE(ParseFrameHeader(frame.data(), 1 << 20).status().message().find("unknown message type 99"), std::string::npos);
  frame = EncodeFrame(ControlMessage(Ping{1}));
  frame[6] = 1;
  EXPECT_FALSE(ParseFrameHeader(frame.data(), 1 << 20).ok());
}

TEST(ControlMessages, EveryTruncationOfEveryMessageIsAnError) {
  const std::vector<AnyMessage> messages = {
      ControlMessage(SampleManifest()), ControlMessage(ChunkRequest{1, "ctx", 2, 3}),
      ControlMessage(ChunkError{1, StatusCode::kNotFound, "no"}), ControlMessage(ChunkAck{1, 2, 3, 4}),
      ControlMessage(ManifestRequest{"abc"}), HandshakeMessage(Hello{}), HandshakeMessage(Welcome{}),
      HandshakeMessage(Refuse{StatusCode::kUnsupported, "x"})};
  for (const auto& message : messages) {
    const auto frame = EncodeFrame(message);
    auto header = ParseFrameHeader(frame.data(), 1 << 20);
    ASSERT_TRUE(header.ok());
    for (size_t len = 0; len < header->length; ++len) {
      EXPECT_FALSE(DecodePayload(header->type, frame.data() + kFrameHeaderBytes, len).ok()) << header->type << " " << len;
    }
    std::vector<uint8_t> longer(frame.begin() + kFrameHeaderBytes, frame.end());
    longer.push_back(0);
    EXPECT_FALSE(DecodePayload(header->type, longer.data(), longer.size()).ok());
  }
}

TEST(ControlMessages, LyingCountsAreRejectedWithoutAllocating) {
  auto frame = EncodeFrame(ControlMessage(SampleManifest()));
  std::vector<uint8_t> payload(frame.begin() + kFrameHeaderBytes, frame.end());
  // The level count follows context_id (4 + 5 bytes), layers, channels, dtype and total_tokens.
  const size_t level_count_at = 4 + 5 + 4 + 4 + 1 + 4;
  payload[level_count_at + 3] = 0x40;  // claims about a billion levels
  auto decoded = DecodePayload(static_cast<uint16_t>(MessageType::kManifestReply), payload.data(), payload.size());
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("level count"), std::string::npos);
}

TEST(ControlMessages, InvalidLevelIsRejected) {
  auto frame = EncodeFrame(ControlMessage(SampleManifest()));
  std::vector<uint8_t> payload(frame.begin() + kFrameHeaderBytes, frame.end());
  const size_t first_level_at = 4 + 5 + 4 + 4 + 1 + 4 + 4;
  payload[first_level_at] = 100;
  auto decoded = DecodePayload(static_cast<uint16_t>(MessageType::kManifestReply), payload.data(), payload.size());
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.status().message().find("level = 100"), std::string::npos);
}

}  // namespace
}  // namespace kvstream::transport
