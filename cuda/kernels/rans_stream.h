// A rANS stream's header on the GPU (docs/rans.md, "Stream layout"): the tail's group count, each lane's
// word count after the tail, and the stored initial states, read by one thread with the CPU decoder's
// checks. The tail-length rule (that `t` is the encoder's) is not re-derived on the GPU: it makes the
// stream's encoding unique, which the segment's CRC32C (verified before a decode) already guards.
#pragma once

#include <cstdint>

#include "codec/common/rans_header_bits.h"
#include "codec/common/rans_step.h"
#include "cuda/kernels/decode_job.h"

namespace kvstream::cuda {

inline constexpr int kLanes = 16;  // codec::kRansLanes

struct StreamHeader {
  uint32_t header_bytes;
  uint32_t renormalised;  // symbols before the tail
  uint32_t tail_groups;
  uint32_t whole_tail;
  uint32_t state[kLanes];
  uint64_t tail_start[kLanes];  // a whole tail's states
  uint8_t tail_words[kLanes];
};

// The header of a stream of n symbols in data[0, size) (docs/rans.md, "Stream layout", "Chained streams"):
// a plain one; the first of a chain (hands_on: it stores all 16 lanes' states and no tail field, and hands
// its end states on); or the second (starts_from: no states of its own, *h's states are the first's end
// states, each checked to be at least 2^16).
KVSTREAM_HD uint32_t ReadStreamHeader(const uint8_t* data, uint32_t size, uint32_t n, bool hands_on, bool starts_from,
                                      StreamHeader* h) {
  const uint32_t lanes_stored = starts_from ? 0 : hands_on ? kLanes : (n < static_cast<uint32_t>(kLanes) ? n : kLanes);
  h->tail_groups = 0;
  h->whole_tail = 0;
  h->renormalised = n;
  for (int j = 0; j < kLanes; ++j) {
    if (starts_from) {
      if (h->state[j] < codec::kRansStateLow) return kGpuRansHandover;
    } else {
      h->state[j] = codec::kRansStateLow;
    }
    h->tail_words[j] = 0;
    h->tail_start[j] = 0;
  }
  h->header_bytes = 0;
  if (n == 0 && lanes_stored == 0) return size == 0 ? kGpuOk : kGpuRansLeftOver;
  const uint32_t groups = (n + kLanes - 1) / kLanes;
  uint32_t first = 0;
  if (!hands_on && n >= static_cast<uint32_t>(kLanes)) {  // the tail field (docs/rans.md, "Tail")
    if (size < 1) return kGpuRansHeader;
    h->tail_groups = data[0];
    if (h->tail_groups > groups) return kGpuRansHeader;
    h->renormalised = h->tail_groups == 0 ? n : (groups - h->tail_groups) * kLanes;
    h->whole_tail = !starts_from && h->tail_groups > 0 && h->renormalised == 0;
    first = 1;
  }
  if (first == 0 && lanes_stored == 0) return size % 2 == 0 ? kGpuOk : kGpuRansHeader;
  codec::RansHeaderBits bits(data + first, size - first);
  if (h->tail_groups > 0 && !h->whole_tail) {
    for (int j = 0; j < kLanes; ++j) h->tail_words[j] = bits.Get(1) == 0 ? 0 : static_cast<uint8_t>(1 + bits.Get(1));
  }
  const int length_bits = h->whole_tail ? 6 : 4;
  const int shortest = h->whole_tail ? 1 : 17;
  int below[kLanes];
  for (uint32_t j = 0; j < lanes_stored; ++j) below[j] = static_cast<int>(bits.Get(length_bits)) + shortest - 1;
  for (uint32_t j = 0; j < lanes_stored; ++j) {
    const uint64_t x = (uint64_t{1} << below[j]) | bits.Get(below[j]);
    if (h->whole_tail) {
      h->tail_start[j] = x;
    } else {
      h->state[j] = static_cast<uint32_t>(x);
    }
  }
  if (h->whole_tail) {
    for (uint32_t j = lanes_stored; j < static_cast<uint32_t>(kLanes); ++j) h->tail_start[j] = codec::kRansStateLow;
  }
  h->header_bytes = first + static_cast<uint32_t>(bits.bytes_read());
  if (bits.overran() || !bits.spare_bits_zero()) return kGpuRansHeader;
  if (n == 0) return size == h->header_bytes ? kGpuOk : kGpuRansLeftOver;  // a chain's first of no symbols
  if ((size - h->header_bytes) % 2 != 0) return kGpuRansHeader;
  return kGpuOk;
}

}  // namespace kvstream::cuda
