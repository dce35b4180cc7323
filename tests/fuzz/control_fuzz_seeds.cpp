// Writes the control message fuzzer's seed corpus: one message of every type, with the fields a real
// session sends (a manifest of a real context's shape: 8 chunks, 8 levels), as the fuzzer's input layout
// (u16 LE type, then the payload).  usage: control_fuzz_seeds OUT_DIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "transport/control_messages.h"

int main(int argc, char** argv) {
  using namespace kvstream;
  using namespace kvstream::transport;
  if (argc != 2) {
    std::fprintf(stderr, "usage: control_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  const std::vector<uint8_t> address(180, 0x42);  // about the size of a tcp + shared-memory worker address
  ManifestReply manifest{"0", 30, 192, DType::kF16, {}};
  manifest.manifest.total_tokens = 2048;
  for (Level level : {kLevelFp16, kLevelInt8, Level{1}, Level{2}, Level{3}, Level{4}, Level{5}, Level{6}}) {
    manifest.manifest.levels.push_back({level, level > 0 ? 0.99 - 0.01 * level : 1.0});
  }
  manifest.manifest.num_chunks = 8;
  for (int c = 0; c < 8; ++c) {
    manifest.manifest.chunk_tokens.push_back(256);
    manifest.manifest.bytes.push_back({5898240, 2981376, 2001769, 1777379, 1499613, 1319526, 1131489, 781106});
  }
  Hello hello;
  hello.worker_address = address;
  Welcome welcome;
  welcome.authenticated = 1;
  welcome.worker_address = address;
  const std::vector<AnyMessage> messages = {
      HandshakeMessage(hello),
      HandshakeMessage(Challenge{}),
      HandshakeMessage(AuthResponse{}),
      HandshakeMessage(welcome),
      HandshakeMessage(Refuse{StatusCode::kPermissionDenied, "authentication failed"}),
      ControlMessage(ManifestRequest{"0"}),
      ControlMessage(manifest),
      ControlMessage(ChunkRequest{7, "0", 3, Level{2}}),
      ControlMessage(ChunkError{7, StatusCode::kNotFound, "context '1' is not registered"}),
      ControlMessage(ChunkAck{7, 1777379, 0.0142, 0.0031}),
      ControlMessage(Ping{1}),
      ControlMessage(Pong{1}),
      ControlMessage(ErrorMessage{StatusCode::kCorruptData, "unknown message type 99"}),
  };
  int written = 0;
  for (const AnyMessage& m : messages) {
    const std::vector<uint8_t> frame = EncodeFrame(m);
    const std::string path = std::string(argv[1]) + "/seed_" + std::to_string(written++);
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(frame.data() + 4), 2);  // the type
    out.write(reinterpret_cast<const char*>(frame.data() + kFrameHeaderBytes),
              static_cast<std::streamsize>(frame.size() - kFrameHeaderBytes));
    if (!out) {
      std::fprintf(stderr, "control_fuzz_seeds: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  std::printf("control_fuzz_seeds: wrote %d seeds to %s\n", written, argv[1]);
  return 0;
}
