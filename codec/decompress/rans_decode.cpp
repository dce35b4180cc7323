// rANS decoder (format: docs/rans.md): validates the header, runs a group kernel over the bulk of the
// stream (AVX2 when the CPU has it, else the portable one) and the checked scalar step (rans_step.h) over
// the rest.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>

#include "codec/common/rans.h"
#include "codec/common/rans_step.h"
#include "codec/decompress/rans_decode_avx2.h"

namespace kvstream::codec {
namespace {

constexpr size_t kLanes = kRansLanes;

// Longest lane-position cycle (lcm(period, lanes)) the group kernels take a table of offsets for.
constexpr size_t kMaxCycle = size_t{1} << 16;
// Below this many groups the offset table costs more than the group kernels save.
constexpr size_t kMinKernelGroups = 8;

// Byte offsets, from tables[0], of the table of each lane position over one cycle of groups. False when
// some table is too far from tables[0] for 32-bit offsets (the AVX2 gathers'), or the cycle too long.
bool BuildLaneOffsets(const std::vector<const uint32_t*>& tables, std::vector<int32_t>* offsets,
                      size_t* cycle_groups) {
  const size_t period = tables.size();
  const size_t cycle = period / std::gcd(period, kLanes) * kLanes;
  if (cycle > kMaxCycle) return false;
  const auto base = reinterpret_cast<uintptr_t>(tables[0]);
  constexpr int64_t kTableBytes = 4 * kRansProbScale;
  offsets->resize(cycle);
  for (size_t p = 0; p < cycle; ++p) {
    const int64_t diff = static_cast<int64_t>(reinterpret_cast<uintptr_t>(tables[p % period]) - base);
    if (diff < INT32_MIN || diff > INT32_MAX - kTableBytes) return false;
    (*offsets)[p] = static_cast<int32_t>(diff);
  }
  *cycle_groups = cycle / kLanes;
  return true;
}

// The portable group kernel, with RansDecodeGroupsAvx2's contract (rans_decode_avx2.h): whole groups
// while 2 * kLanes stream bytes remain, so that no step inside a group needs a bounds check.
size_t DecodeGroupsPortable(uint32_t* state, const uint8_t*& pos, const uint8_t* end, const uint32_t* table_base,
                            const int32_t* lane_offsets, size_t cycle_groups, size_t group, size_t group_end,
                            uint8_t* out) {
  const uint8_t* p = pos;
  const auto* base = reinterpret_cast<const uint8_t*>(table_base);
  size_t cycle = group % cycle_groups;
  uint32_t x[kLanes];  // a local copy: the byte stores to out could alias state
  std::memcpy(x, state, sizeof x);
  while (group < group_end && end - p >= static_cast<ptrdiff_t>(2 * kLanes)) {
    const int32_t* offsets = lane_offsets + cycle * kLanes;
    uint8_t* o = out + group * kLanes;
    for (size_t j = 0; j < kLanes; ++j) {
      o[j] = static_cast<uint8_t>(RansDecodeSymbol(x[j], reinterpret_cast<const uint32_t*>(base + offsets[j])));
      RansRenormalise(x[j], p);
    }
    ++group;
    if (++cycle == cycle_groups) cycle = 0;
  }
  std::memcpy(state, x, sizeof x);
  pos = p;
  return group;
}

#if defined(__x86_64__) || defined(_M_X64)
bool Avx2Enabled() {
  static const bool cpu_has_avx2 = __builtin_cpu_supports("avx2");
  if (!cpu_has_avx2) return false;
  const char* disable = std::getenv("KVSTREAM_DISABLE_AVX2");
  return disable == nullptr || disable[0] == '\0' || std::strcmp(disable, "0") == 0;
}
#endif

}  // namespace

Status RansDecode(const uint8_t* data, size_t size, const RansModel* const* models, size_t period,
                  uint8_t* out, size_t n) {
  if (n == 0) {
    if (size != 0) return Status::CorruptData("rANS stream: " + std::to_string(size) + " bytes for 0 symbols");
    return Status::Ok();
  }
  if ((data == nullptr && size != 0) || out == nullptr || models == nullptr || period == 0) {
    return Status::InvalidArgument("rANS decode: null data, output or models, or period 0 (period = " +
                                   std::to_string(period) + ")");
  }
  std::vector<const uint32_t*> tables(period);
  for (size_t m = 0; m < period; ++m) {
    if (models[m] == nullptr) return Status::InvalidArgument("rANS decode: model " + std::to_string(m) + " is null");
    tables[m] = models[m]->decode_table();
  }

  const size_t lanes_used = n < kLanes ? n : kLanes;
  const size_t header = 4 * lanes_used;
  if (size < header) {
    return Status::CorruptData("rANS stream: size " + std::to_string(size) + " bytes, shorter than the " +
                               std::to_string(header) + "-byte header of " + std::to_string(n) + " symbols");
  }
  if ((size - header) % 2 != 0) {
    return Status::CorruptData("rANS stream: size " + std::to_string(size) +
                               " bytes leaves an odd number of bytes after the header");
  }
  uint32_t state[kLanes];
  for (size_t j = 0; j < kLanes; ++j) {
    state[j] = kRansStateLow;  // unused lanes (n < kLanes) sit at the final state from the start
    if (j >= lanes_used) continue;
    const uint8_t* b = data + 4 * j;
    state[j] = b[0] | (uint32_t{b[1]} << 8) | (uint32_t{b[2]} << 16) | (uint32_t{b[3]} << 24);
    if (state[j] < kRansStateLow) {
      return Status::CorruptData("rANS stream: initial state of lane " + std::to_string(j) + " = " +
                                 std::to_string(state[j]) + ", below " + std::to_string(kRansStateLow));
    }
  }
  const uint8_t* pos = data + header;
  const uint8_t* const end = data + size;

  size_t i = 0;
  const size_t groups = n / kLanes;
  std::vector<int32_t> offsets;
  size_t cycle_groups = 0;
  if (groups >= kMinKernelGroups && BuildLaneOffsets(tables, &offsets, &cycle_groups)) {
    auto* kernel = &DecodeGroupsPortable;
#if defined(__x86_64__) || defined(_M_X64)
    if (Avx2Enabled()) kernel = &RansDecodeGroupsAvx2;
#endif
    i = kLanes * kernel(state, pos, end, tables[0], offsets.data(), cycle_groups, 0, groups, out);
  }
  for (size_t m = i % period; i < n; ++i) {
    if (!RansDecodeStep(state[i % kLanes], tables[m], pos, end, out[i])) [[unlikely]] {
      return Status::CorruptData("rANS stream: truncated, symbol " + std::to_string(i) + " of " +
                                 std::to_string(n) + " needs a word past the end of the " +
                                 std::to_string(size) + "-byte stream");
    }
    if (++m == period) m = 0;
  }

  if (pos != end) {
    return Status::CorruptData("rANS stream: " + std::to_string(end - pos) + " of " + std::to_string(size) +
                               " bytes left over after " + std::to_string(n) + " symbols");
  }
  for (size_t j = 0; j < kLanes; ++j) {
    if (state[j] != kRansStateLow) {
      return Status::CorruptData("rANS stream: final state of lane " + std::to_string(j) + " = " +
                                 std::to_string(state[j]) + ", expected " + std::to_string(kRansStateLow));
    }
  }
  return Status::Ok();
}

}  // namespace kvstream::codec
