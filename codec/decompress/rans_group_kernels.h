// The rANS decoder's group kernels: they decode whole groups of kRansLanes symbols (one per lane) with no
// bounds check inside a group. rans_decode.cpp validates a stream, hands its bulk to the best kernel this
// CPU runs (AVX-512 of rans_decode_avx512.cpp, AVX2 of rans_decode_avx2.cpp, each compiled with its ISA
// flags; its portable one otherwise) and finishes what the kernel leaves with the checked scalar step.
// Every kernel gives exactly the results of the scalar step.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codec/common/rans.h"

namespace kvstream::codec {

// Where a kernel stands in one stream. The slot table of the model of lane position p in a group whose
// index is g is at table_base + lane_offsets[(g % cycle_groups) * kRansLanes + p] bytes.
struct RansGroupCursor {
  uint32_t* state = nullptr;  // the kRansLanes lane states, updated
  const uint8_t* pos = nullptr;
  const uint8_t* end = nullptr;
  const uint32_t* table_base = nullptr;
  const int32_t* lane_offsets = nullptr;
  size_t cycle_groups = 1;
  size_t group = 0;      // next group to decode
  size_t group_end = 0;  // first group not to decode
  uint8_t* out = nullptr;  // the symbols of group g go to out + g * kRansLanes
};

// Whether a kernel may decode the cursor's next group: one is left, and at least 2 * kRansLanes stream
// bytes remain at its start (so that no load leaves [pos, end)).
inline bool KernelCanDecode(const RansGroupCursor& c) {
  return c.group < c.group_end && c.end - c.pos >= static_cast<ptrdiff_t>(2 * kRansLanes);
}

// Decode groups while KernelCanDecode, advancing group and pos. `n` streams (1 to kRansMaxTogether) go in
// lockstep until any of them stops; the caller goes on with the others.
//
// AVX2: a group is two 8-lane vectors; streams go in pairs (the last alone when n is odd): a pair keeps
// four vectors of states in flight, as many as the gathers serve on Zen 3 (docs/rans.md).
void RansDecodeGroupsAvx2(RansGroupCursor* const* streams, size_t n);
// AVX-512: a group is one 16-lane vector, a renormalisation one masked expand of the stream's next words;
// all n streams go together.
void RansDecodeGroupsAvx512(RansGroupCursor* const* streams, size_t n);

}  // namespace kvstream::codec
