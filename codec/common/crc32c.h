// CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of the container's header and
// segments. SSE4.2's crc32 instruction when the CPU has it, a slicing-by-8 table otherwise; both give the
// same value. Thread-safe, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvstream/status.h"

namespace kvstream::codec {

// The standard CRC32C of data[0, size): Crc32c("123456789", 9) == 0xE3069283.
uint32_t Crc32c(const void* data, size_t size);

// Continues a checksum: Crc32cExtend(Crc32c(a), b) == Crc32c(a followed by b); Crc32cExtend(0, x) ==
// Crc32c(x).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);

// A payload against the CRC32C stamped on it in flight: Ok, or CorruptData "CRC32C mismatch (stamped
// 0x..., computed 0x...)" (the receiver's and the device pipeline's check before the bytes are used).
Status CheckCrc32c(const void* data, size_t size, uint32_t stamped);

namespace detail {
// The two implementations behind Crc32cExtend, exposed so that tests compare them.
uint32_t Crc32cExtendPortable(uint32_t crc, const uint8_t* data, size_t size);
bool Crc32cHardwareAvailable();
// Only when Crc32cHardwareAvailable().
uint32_t Crc32cExtendSse42(uint32_t crc, const uint8_t* data, size_t size);
}  // namespace detail

}  // namespace kvstream::codec
