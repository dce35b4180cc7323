// The AVX2 kernel of the rANS decoder (rans_decode_avx2.cpp, compiled with -mavx2); rans_decode.cpp
// calls it only when the CPU has AVX2 and finishes what it leaves with the scalar step.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvstream::codec {

// Decodes whole groups of kRansLanes symbols, from group `group` up to `group_end`, as long as at least
// 2 * kRansLanes stream bytes remain at the start of a group, so that no load leaves [pos, end).
// state: the kRansLanes lane states, updated. The slot table of the model of lane position p of a group
// whose index is g is at table_base + lane_offsets[(g % cycle_groups) * kRansLanes + p] bytes.
// Writes out[group * kRansLanes, ...) and returns the first group it did not decode.
size_t RansDecodeGroupsAvx2(uint32_t* state, const uint8_t*& pos, const uint8_t* end,
                            const uint32_t* table_base, const int32_t* lane_offsets, size_t cycle_groups,
                            size_t group, size_t group_end, uint8_t* out);

}  // namespace kvstream::codec
