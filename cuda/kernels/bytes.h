// Little-endian loads from unaligned chunk bytes, for the kernels (host and device).
#pragma once

#include <cstdint>

#include "common/half.h"

namespace kvstream::cuda {

KVSTREAM_HD uint32_t LoadU16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8); }
KVSTREAM_HD uint32_t LoadU32(const uint8_t* p) { return LoadU16(p) | (LoadU16(p + 2) << 16); }
KVSTREAM_HD float LoadF32(const uint8_t* p) { return BitsToFloat(LoadU32(p)); }
KVSTREAM_HD bool IsFiniteBits(uint32_t f32_bits) { return ((f32_bits >> 23) & 0xffu) != 0xffu; }
KVSTREAM_HD bool IsFiniteHalf(uint32_t f16_bits) { return ((f16_bits >> 10) & 0x1fu) != 0x1fu; }

}  // namespace kvstream::cuda
