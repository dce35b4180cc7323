// CRC32C: the portable slicing-by-8 implementation and the run-time choice of the SSE4.2 one.
#include "codec/common/crc32c.h"

#include <array>
#include <cstdio>
#include <string>

namespace kvstream::codec {
namespace detail {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // reflected Castagnoli

// table[k][b]: the CRC of byte b followed by k zero bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> kTables = [] {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPolynomial & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xffu];
  }
  return t;
}();

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, const uint8_t* data, size_t size) {
  uint32_t c = ~crc;
  for (; size >= 8; size -= 8, data += 8) {
    const uint32_t lo = c ^ (data[0] | (uint32_t{data[1]} << 8) | (uint32_t{data[2]} << 16) |
                             (uint32_t{data[3]} << 24));
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][data[4]] ^ kTables[2][data[5]] ^ kTables[1][data[6]] ^
        kTables[0][data[7]];
  }
  for (; size > 0; --size, ++data) c = (c >> 8) ^ kTables[0][(c ^ *data) & 0xffu];
  return ~c;
}

bool Crc32cHardwareAvailable() {
#if defined(__x86_64__) || defined(_M_X64)
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
#else
  return false;
#endif
}

}  // namespace detail

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
#if defined(__x86_64__) || defined(_M_X64)
  if (detail::Crc32cHardwareAvailable()) return detail::Crc32cExtendSse42(crc, bytes, size);
#endif
  return detail::Crc32cExtendPortable(crc, bytes, size);
}

uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }

Status CheckCrc32c(const void* data, size_t size, uint32_t stamped) {
  const uint32_t computed = Crc32c(data, size);
  if (computed == stamped) return Status::Ok();
  char hex[64];
  std::snprintf(hex, sizeof hex, "stamped 0x%08x, computed 0x%08x", stamped, computed);
  return Status::CorruptData(std::string("CRC32C mismatch (") + hex + ")");
}

}  // namespace kvstream::codec
