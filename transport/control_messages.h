// Control-plane framing and message codecs (docs/protocol.md). A frame is an 8-byte header — u32 payload
// length, u16 type, u16 reserved (0) — followed by the payload. Handshake messages are private to the
// transport; the others are kvstream::ControlMessage.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "kvstream/transport.h"

namespace kvstream::transport {

inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr uint32_t kMaxStringBytes = 1024;
inline constexpr uint32_t kMaxAddressBytes = 64 * 1024;
inline constexpr uint32_t kMaxManifestChunks = 1 << 20;
inline constexpr uint32_t kMaxManifestLevels = 32;

enum class MessageType : uint16_t {
  kHello = 1,
  kChallenge = 2,
  kAuthResponse = 3,
  kWelcome = 4,
  kRefuse = 5,
  kManifestRequest = 16,
  kManifestReply = 17,
  kChunkRequest = 18,
  kChunkError = 19,
  kChunkAck = 20,
  kPing = 21,
  kPong = 22,
  kError = 23,
};

using Nonce = std::array<uint8_t, 32>;

struct Hello {
  uint16_t version = kProtocolVersion;
  uint64_t model_hash = 0;
  uint64_t profile_hash = 0;
  Nonce client_nonce{};
  std::vector<uint8_t> worker_address;
};
struct Challenge {
  Nonce server_nonce{};
};
struct AuthResponse {
  std::array<uint8_t, 32> mac{};
};
struct Welcome {
  uint16_t version = kProtocolVersion;
  uint8_t authenticated = 0;
  std::array<uint8_t, 32> server_proof{};  // HMAC proving the server knows the secret (zeros without one)
  std::vector<uint8_t> worker_address;
};
struct Refuse {
  StatusCode code = StatusCode::kUnavailable;
  std::string message;
};
using HandshakeMessage = std::variant<Hello, Challenge, AuthResponse, Welcome, Refuse>;
using AnyMessage = std::variant<HandshakeMessage, ControlMessage>;

struct FrameHeader {
  uint32_t length = 0;
  uint16_t type = 0;
  uint16_t reserved = 0;
};

// Parses and validates a frame header: known type, reserved zero, length within `max_payload`.
Result<FrameHeader> ParseFrameHeader(const uint8_t* bytes, uint32_t max_payload);
// Encodes a whole frame (header + payload).
std::vector<uint8_t> EncodeFrame(const AnyMessage& message);
// Decodes a payload of the given type; every field is checked and trailing bytes are an error.
Result<AnyMessage> DecodePayload(uint16_t type, const uint8_t* payload, size_t size);

// Status codes travel as u16; an unknown value decodes as kInternal.
uint16_t StatusCodeToWire(StatusCode code);
StatusCode StatusCodeFromWire(uint16_t value);

}  // namespace kvstream::transport
