// SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104) for the control plane's shared-secret
// challenge-response. Written here rather than pulling in a crypto library: the handshake needs these two
// functions only, and they are pinned by the FIPS/RFC 4231 test vectors in tests/transport.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvstream::transport {

using Digest256 = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  Digest256 Finish();  // the object must not be updated afterwards

 private:
  void Block(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

Digest256 Sha256Of(const void* data, size_t size);
Digest256 HmacSha256(std::string_view key, const void* message, size_t size);
// Compares in time independent of where the digests differ, so a forger learns nothing from timing.
bool DigestEqual(const Digest256& a, const Digest256& b);

}  // namespace kvstream::transport
