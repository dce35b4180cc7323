// CRC32C with the SSE4.2 crc32 instruction (compiled with -msse4.2, called only when the CPU has it).
// Three independent streams over thirds of each large block hide the instruction's 3-cycle latency; they
// are joined by shifting the earlier CRCs over the later bytes with carry-less multiplication.
#include "codec/common/crc32c.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <nmmintrin.h>
#include <wmmintrin.h>

#include <cstring>

namespace kvstream::codec::detail {
namespace {

constexpr size_t kBlock = 4096;  // bytes per stream in the three-way loop
constexpr uint32_t kPolynomial = 0x82F63B78u;

// x^n mod P in the reflected bit order (bit 31 is x^0; multiplying by x is a right shift).
uint32_t XPow(size_t n) {
  uint32_t r = 0x80000000u;
  for (size_t i = 0; i < n; ++i) r = (r >> 1) ^ (kPolynomial & (0u - (r & 1u)));
  return r;
}

// A CRC state advanced over kBlock zero bytes: crc * x^(8 kBlock) mod P. The carry-less product of two
// reflected 32-bit values is the reflected 64-bit product times x, and crc32 of a 64-bit value multiplies
// by x^32 before reducing, hence constant = x^(8 kBlock - 33).
inline uint32_t ShiftBlock(uint32_t crc, uint32_t constant) {
  const __m128i product = _mm_clmulepi64_si128(_mm_cvtsi32_si128(static_cast<int>(crc)),
                                               _mm_cvtsi32_si128(static_cast<int>(constant)), 0);
  return static_cast<uint32_t>(_mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(product))));
}

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

uint32_t Crc32cExtendSse42(uint32_t crc, const uint8_t* data, size_t size) {
  static const uint32_t k1 = XPow(8 * kBlock - 33);
  uint64_t c0 = ~crc;
  while (size >= 3 * kBlock) {
    uint64_t c1 = 0;
    uint64_t c2 = 0;
    for (size_t i = 0; i < kBlock; i += 8) {
      c0 = _mm_crc32_u64(c0, Load64(data + i));
      c1 = _mm_crc32_u64(c1, Load64(data + kBlock + i));
      c2 = _mm_crc32_u64(c2, Load64(data + 2 * kBlock + i));
    }
    c0 = ShiftBlock(static_cast<uint32_t>(c0), k1) ^ c1;
    c0 = ShiftBlock(static_cast<uint32_t>(c0), k1) ^ c2;
    data += 3 * kBlock;
    size -= 3 * kBlock;
  }
  for (; size >= 8; size -= 8, data += 8) c0 = _mm_crc32_u64(c0, Load64(data));
  uint32_t c = static_cast<uint32_t>(c0);
  for (; size > 0; --size, ++data) c = _mm_crc32_u8(c, *data);
  return ~c;
}

}  // namespace kvstream::codec::detail
#endif
