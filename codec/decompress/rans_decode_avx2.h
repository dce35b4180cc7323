// The rANS decoder's group kernels: they decode whole groups of kRansLanes symbols (one per lane) with no
// bounds check inside a group. rans_decode.cpp validates a stream, hands its bulk to a kernel (the AVX2 one
// of rans_decode_avx2.cpp, compiled with -mavx2, when the CPU has AVX2; its portable one otherwise) and
// finishes what the kernel leaves with the checked scalar step.
#pragma once

#include <cstddef>
#include <cstdint>

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

// Decodes groups while group < group_end and at least 2 * kRansLanes stream bytes remain at the start of
// a group (so that no load leaves [pos, end)), advancing group and pos.
void RansDecodeGroupsAvx2(RansGroupCursor& stream);

// The same for two independent streams in lockstep, until either stops. A stream alone keeps only
// two vectors of states in flight; two keep four, as many as the gathers can serve (docs/rans.md).
void RansDecodeGroupPairAvx2(RansGroupCursor& first, RansGroupCursor& second);

}  // namespace kvstream::codec
