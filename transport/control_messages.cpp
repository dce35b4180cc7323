// Encoders and decoders of control-plane messages; layouts in docs/protocol.md.
#include "transport/control_messages.h"

#include "transport/wire.h"

namespace kvstream::transport {
namespace {

template <class... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <class... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

bool KnownType(uint16_t t) {
  return (t >= 1 && t <= 5) || (t >= 16 && t <= 23);
}

}  // namespace

uint16_t StatusCodeToWire(StatusCode code) { return static_cast<uint16_t>(code); }

StatusCode StatusCodeFromWire(uint16_t value) {
  if (value > static_cast<uint16_t>(StatusCode::kInternal)) return StatusCode::kInternal;
  return static_cast<StatusCode>(value);
}

Result<FrameHeader> ParseFrameHeader(const uint8_t* bytes, uint32_t max_payload) {
  WireReader r(bytes, kFrameHeaderBytes, "control frame header");
  FrameHeader h;
  h.length = r.U32("length");
  h.type = r.U16("type");
  h.reserved = r.U16("reserved");
  KVSTREAM_RETURN_IF_ERROR(r.Finish());
  if (!KnownType(h.type)) return Status::CorruptData("control frame header: unknown message type " + std::to_string(h.type));
  if (h.reserved != 0) return Status::CorruptData("control frame header: reserved = " + std::to_string(h.reserved) + ", expected 0");
  if (h.length > max_payload) {
    return Status::ResourceExhausted("control frame header: length = " + std::to_string(h.length) +
                                     " exceeds max_message_bytes = " + std::to_string(max_payload));
  }
  return h;
}

std::vector<uint8_t> EncodeFrame(const AnyMessage& message) {
  WireWriter w;
  w.U32(0);  // length, patched below
  w.U16(0);  // type, patched below
  w.U16(0);
  MessageType type{};
  auto handshake = Overloaded{
      [&](const Hello& m) {
        type = MessageType::kHello;
        w.U16(m.version);
        w.U64(m.model_hash);
        w.U64(m.profile_hash);
        w.Raw(m.client_nonce.data(), m.client_nonce.size());
        w.Bytes(m.worker_address.data(), m.worker_address.size());
      },
      [&](const Challenge& m) {
        type = MessageType::kChallenge;
        w.Raw(m.server_nonce.data(), m.server_nonce.size());
      },
      [&](const AuthResponse& m) {
        type = MessageType::kAuthResponse;
        w.Raw(m.mac.data(), m.mac.size());
      },
      [&](const Welcome& m) {
        type = MessageType::kWelcome;
        w.U16(m.version);
        w.U8(m.authenticated);
        w.Raw(m.server_proof.data(), m.server_proof.size());
        w.Bytes(m.worker_address.data(), m.worker_address.size());
      },
      [&](const Refuse& m) {
        type = MessageType::kRefuse;
        w.U16(StatusCodeToWire(m.code));
        w.String(m.message.substr(0, kMaxStringBytes));
      },
  };
  auto control = Overloaded{
      [&](const ManifestRequest& m) {
        type = MessageType::kManifestRequest;
        w.String(m.context_id);
      },
      [&](const ManifestReply& m) {
        type = MessageType::kManifestReply;
        w.String(m.context_id);
        w.U32(static_cast<uint32_t>(m.layers));
        w.U32(static_cast<uint32_t>(m.channels));
        w.U8(static_cast<uint8_t>(m.dtype));
        const FetchManifest& f = m.manifest;
        w.U32(static_cast<uint32_t>(f.total_tokens));
        w.U32(static_cast<uint32_t>(f.levels.size()));
        for (const auto& l : f.levels) {
          w.I8(static_cast<int8_t>(l.level));
          w.F64(l.quality);
        }
        w.U32(static_cast<uint32_t>(f.num_chunks));
        for (int c = 0; c < f.num_chunks; ++c) {
          w.U32(static_cast<uint32_t>(f.chunk_tokens[c]));
          for (size_t l = 0; l < f.levels.size(); ++l) w.U64(f.bytes[c][l]);
        }
      },
      [&](const ChunkRequest& m) {
        type = MessageType::kChunkRequest;
        w.U64(m.request_id);
        w.String(m.context_id);
        w.U32(static_cast<uint32_t>(m.chunk));
        w.I8(static_cast<int8_t>(m.level));
      },
      [&](const ChunkError& m) {
        type = MessageType::kChunkError;
        w.U64(m.request_id);
        w.U16(StatusCodeToWire(m.code));
        w.String(m.message.substr(0, kMaxStringBytes));
      },
      [&](const ChunkAck& m) {
        type = MessageType::kChunkAck;
        w.U64(m.request_id);
        w.U64(m.bytes);
        w.F64(m.transfer_s);
        w.F64(m.decode_s);
      },
      [&](const Ping& m) {
        type = MessageType::kPing;
        w.U64(m.nonce);
      },
      [&](const Pong& m) {
        type = MessageType::kPong;
        w.U64(m.nonce);
      },
      [&](const ErrorMessage& m) {
        type = MessageType::kError;
        w.U16(StatusCodeToWire(m.code));
        w.String(m.message.substr(0, kMaxStringBytes));
      },
  };
  std::visit(Overloaded{[&](const HandshakeMessage& h) { std::visit(handshake, h); },
                        [&](const ControlMessage& c) { std::visit(control, c); }},
             message);
  auto& bytes = w.bytes();
  const uint32_t length = static_cast<uint32_t>(bytes.size() - kFrameHeaderBytes);
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(length >> (8 * i));
  bytes[4] = static_cast<uint8_t>(static_cast<uint16_t>(type));
  bytes[5] = static_cast<uint8_t>(static_cast<uint16_t>(type) >> 8);
  return std::move(bytes);
}

Result<AnyMessage> DecodePayload(uint16_t type, const uint8_t* payload, size_t size) {
  WireReader r(payload, size, "control message type " + std::to_string(type));
  AnyMessage out;
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello: {
      Hello m;
      m.version = r.U16("version");
      m.model_hash = r.U64("model_hash");
      m.profile_hash = r.U64("profile_hash");
      r.Raw("client_nonce", m.client_nonce.data(), m.client_nonce.size());
      m.worker_address = r.Bytes("worker_address", kMaxAddressBytes);
      out = HandshakeMessage(std::move(m));
      break;
    }
    case MessageType::kChallenge: {
      Challenge m;
      r.Raw("server_nonce", m.server_nonce.data(), m.server_nonce.size());
      out = HandshakeMessage(m);
      break;
    }
    case MessageType::kAuthResponse: {
      AuthResponse m;
      r.Raw("mac", m.mac.data(), m.mac.size());
      out = HandshakeMessage(m);
      break;
    }
    case MessageType::kWelcome: {
      Welcome m;
      m.version = r.U16("version");
      m.authenticated = r.U8("authenticated");
      r.Raw("server_proof", m.server_proof.data(), m.server_proof.size());
      m.worker_address = r.Bytes("worker_address", kMaxAddressBytes);
      out = HandshakeMessage(std::move(m));
      break;
    }
    case MessageType::kRefuse: {
      Refuse m;
      m.code = StatusCodeFromWire(r.U16("code"));
      m.message = r.String("message", kMaxStringBytes);
      out = HandshakeMessage(std::move(m));
      break;
    }
    case MessageType::kManifestRequest: {
      ManifestRequest m;
      m.context_id = r.String("context_id", kMaxStringBytes);
      out = ControlMessage(std::move(m));
      break;
    }
    case MessageType::kManifestReply: {
      ManifestReply m;
      m.context_id = r.String("context_id", kMaxStringBytes);
      m.layers = static_cast<int>(r.U32("layers"));
      m.channels = static_cast<int>(r.U32("channels"));
      const uint8_t dtype = r.U8("dtype");
      if (dtype > static_cast<uint8_t>(DType::kBF16)) r.Fail("dtype = " + std::to_string(dtype) + " is not 0, 1 or 2");
      m.dtype = static_cast<DType>(dtype);
      FetchManifest& f = m.manifest;
      f.total_tokens = static_cast<int>(r.U32("total_tokens"));
      const uint32_t levels = r.Count("level count", kMaxManifestLevels, 9);
      for (uint32_t i = 0; i < levels; ++i) {
        LevelInfo info;
        info.level = r.I8("level");
        info.quality = r.F64("quality");
        if (!IsValidLevel(info.level)) r.Fail("level = " + std::to_string(info.level) + " is not a valid level");
        f.levels.push_back(info);
      }
      const uint32_t chunks = r.Count("chunk count", kMaxManifestChunks, 4 + 8 * size_t{levels});
      f.num_chunks = static_cast<int>(chunks);
      f.chunk_tokens.reserve(chunks);
      f.bytes.reserve(chunks);
      for (uint32_t c = 0; c < chunks && r.status().ok(); ++c) {
        f.chunk_tokens.push_back(static_cast<int>(r.U32("chunk_tokens")));
        std::vector<uint64_t> sizes(levels);
        for (auto& s : sizes) s = r.U64("chunk bytes");
        f.bytes.push_back(std::move(sizes));
      }
      if (m.layers < 0 || m.channels < 0 || f.total_tokens < 0) r.Fail("negative layers, channels or total_tokens");
      out = ControlMessage(std::move(m));
      break;
    }
    case MessageType::kChunkRequest: {
      ChunkRequest m;
      m.request_id = r.U64("request_id");
      m.context_id = r.String("context_id", kMaxStringBytes);
      m.chunk = static_cast<int>(r.U32("chunk"));
      m.level = r.I8("level");
      if (m.chunk < 0) r.Fail("chunk = " + std::to_string(m.chunk) + " is negative");
      out = ControlMessage(std::move(m));
      break;
    }
    case MessageType::kChunkError: {
      ChunkError m;
      m.request_id = r.U64("request_id");
      m.code = StatusCodeFromWire(r.U16("code"));
      m.message = r.String("message", kMaxStringBytes);
      out = ControlMessage(std::move(m));
      break;
    }
    case MessageType::kChunkAck: {
      ChunkAck m;
      m.request_id = r.U64("request_id");
      m.bytes = r.U64("bytes");
      m.transfer_s = r.F64("transfer_s");
      m.decode_s = r.F64("decode_s");
      out = ControlMessage(m);
      break;
    }
    case MessageType::kPing: {
      Ping m;
      m.nonce = r.U64("nonce");
      out = ControlMessage(m);
      break;
    }
    case MessageType::kPong: {
      Pong m;
      m.nonce = r.U64("nonce");
      out = ControlMessage(m);
      break;
    }
    case MessageType::kError: {
      ErrorMessage m;
      m.code = StatusCodeFromWire(r.U16("code"));
      m.message = r.String("message", kMaxStringBytes);
      out = ControlMessage(std::move(m));
      break;
    }
    default:
      return Status::CorruptData("control message: unknown type " + std::to_string(type));
  }
  KVSTREAM_RETURN_IF_ERROR(r.Finish());
  return out;
}

}  // namespace kvstream::transport
