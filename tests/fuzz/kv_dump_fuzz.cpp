// libFuzzer target for the KV dump reader (ParseKvDump): untrusted archives must give a Status, never a
// crash, an out-of-bounds access, a leak or an allocation beyond the bytes given.
//
// Input: one mode byte, then the archive. Mode bit 0: recompute every member's CRC-32 the archive's
// directory points at first, so that mutations reach the .npy headers and the checks between members
// instead of stopping at a checksum. Seeds: real dumps written by chunk_fuzz_seeds (scripts/fuzz.sh).
#include <cstdint>
#include <cstring>
#include <vector>

#include "kvstream/kv_dump.h"
#include "model/zip_archive.h"

namespace {

uint32_t Get32(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}
uint16_t Get16(const std::vector<uint8_t>& b, size_t at) {
  uint16_t v;
  std::memcpy(&v, b.data() + at, 2);
  return v;
}
void Put32(std::vector<uint8_t>& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

// Walks the central directory that a final 22-byte end record points at, and stamps each member's data
// CRC-32 into its directory entry and local header. Leaves anything it cannot follow as it is.
void FixZipCrcs(std::vector<uint8_t>& b) {
  if (b.size() < 22) return;
  const size_t end = b.size() - 22;
  if (Get32(b, end) != 0x06054b50) return;
  const uint32_t entries = Get16(b, end + 10);
  size_t at = Get32(b, end + 16);
  for (uint32_t i = 0; i < entries && at + 46 <= end; ++i) {
    if (Get32(b, at) != 0x02014b50) return;
    const uint64_t size = Get32(b, at + 20), local = Get32(b, at + 42);
    const size_t next = at + 46 + Get16(b, at + 28) + Get16(b, at + 30) + Get16(b, at + 32);
    if (local + 30 <= b.size() && Get32(b, local) == 0x04034b50) {
      const uint64_t data = local + 30 + Get16(b, local + 26) + Get16(b, local + 28);
      if (data <= b.size() && size <= b.size() - data) {
        const uint32_t crc = kvstream::model::ZipCrc32(b.data() + data, static_cast<size_t>(size));
        Put32(b, at + 16, crc);
        Put32(b, local + 14, crc);
      }
    }
    at = next;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::vector<uint8_t> b(data + 1, data + size);
  if (data[0] & 1) FixZipCrcs(b);
  auto dump = kvstream::ParseKvDump(b.data(), b.size());
  if (dump.ok()) {
    // What a sender does with a dump: views over every value.
    const kvstream::TensorView k = dump->keys_view();
    if (static_cast<uint64_t>(k.numel()) * kvstream::DTypeSize(k.dtype) != dump->keys.size()) __builtin_trap();
  }
  return 0;
}
