// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320): the checksum a ZIP archive keeps for each member,
// for the KV dump's reader and writer and the fuzzer that repairs mutated archives' checksums.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvstream::model {

// The CRC-32 of `n` bytes, continuing from `crc` (0 to start).
uint32_t ZipCrc32(const uint8_t* data, size_t n, uint32_t crc = 0);

}  // namespace kvstream::model
