// libFuzzer target for the control plane's frame header and message decoders, which read whatever a
// remote peer sends: untrusted bytes must give a Status, never a crash, an out-of-bounds access, a leak
// or undefined behaviour. Checks beyond that: a header that parses has a known type and a length within
// the limit; a payload that decodes encodes to a frame whose header parses and whose payload decodes
// again, to a message that encodes to the same bytes (decoding only canonicalises, e.g. unknown status
// codes become kInternal, so a second round changes nothing).
//
// Input: u16 LE message type, then the payload. The input's first 8 bytes are also parsed as a header.
// Seeds: one frame of every message type, written by control_fuzz_seeds (scripts/fuzz.sh).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "transport/control_messages.h"

namespace {

constexpr uint32_t kMaxPayload = 1 << 20;

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvstream::transport;
  if (size >= kFrameHeaderBytes) {
    const auto header = ParseFrameHeader(data, kMaxPayload);
    if (header.ok()) Check(header->length <= kMaxPayload && header->reserved == 0);
  }
  if (size < 2) return 0;
  const uint16_t type = static_cast<uint16_t>(data[0] | (data[1] << 8));
  const auto message = DecodePayload(type, data + 2, size - 2);
  if (!message.ok()) return 0;
  const std::vector<uint8_t> frame = EncodeFrame(*message);
  Check(frame.size() >= kFrameHeaderBytes);
  const auto header = ParseFrameHeader(frame.data(), UINT32_MAX);
  Check(header.ok() && header->type == type && header->length == frame.size() - kFrameHeaderBytes);
  const auto again = DecodePayload(header->type, frame.data() + kFrameHeaderBytes, frame.size() - kFrameHeaderBytes);
  Check(again.ok());
  Check(EncodeFrame(*again) == frame);
  return 0;
}
