// The group loop that the vector rANS kernels share (rans_decode_avx2.cpp, rans_decode_avx512.cpp),
// written once over a group type's operations `G`, where a Group holds the kRansLanes states (or slot
// table entries) of one stream:
//   Load(const uint32_t*) / Store(Group, uint32_t*): the states in lane order;
//   Gather(table_base, lane_offsets, states): each lane's slot table entry;
//   Advance(states, entries): the state update of rans_step.h;
//   StoreSymbols(entries, uint8_t*): the entries' low bytes, in lane order;
//   Renormalise(states, pos): lanes below 2^16 take the stream's next words, in lane order, reading at
//     most 2 * kRansLanes bytes at pos.
// Streams go in lockstep: all gathers first, then the updates, then the renormalisations, so that the
// gathers of every stream are in flight together.
//
// Only for files compiled with the vector ISA: everything here has internal linkage, so one file's
// instructions never stand in for another's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codec/common/rans.h"
#include "codec/decompress/rans_group_kernels.h"

namespace kvstream::codec {
namespace {  // internal linkage, see above

// Decodes kStreams streams with RansDecodeGroupsAvx2's contract (rans_group_kernels.h). The cursors are
// copied into locals: the symbol stores to out may alias them.
template <typename G, int kStreams>
void DecodeGroupsInLockstep(RansGroupCursor* const* streams) {
  using Group = typename G::Group;
  RansGroupCursor c[kStreams];
  Group x[kStreams];
  size_t cycle[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    c[s] = *streams[s];
    x[s] = G::Load(c[s].state);
    cycle[s] = c[s].group % c[s].cycle_groups;
  }
  for (;;) {
    bool more = true;
    for (int s = 0; s < kStreams; ++s) more = more && KernelCanDecode(c[s]);
    if (!more) break;
    Group e[kStreams];
    for (int s = 0; s < kStreams; ++s) e[s] = G::Gather(c[s].table_base, c[s].lane_offsets + cycle[s] * kRansLanes, x[s]);
    for (int s = 0; s < kStreams; ++s) {
      x[s] = G::Advance(x[s], e[s]);
      G::StoreSymbols(e[s], c[s].out + c[s].group * kRansLanes);
    }
    for (int s = 0; s < kStreams; ++s) {
      x[s] = G::Renormalise(x[s], c[s].pos);
      ++c[s].group;
      if (++cycle[s] == c[s].cycle_groups) cycle[s] = 0;
    }
  }
  for (int s = 0; s < kStreams; ++s) {
    G::Store(x[s], c[s].state);
    streams[s]->pos = c[s].pos;
    streams[s]->group = c[s].group;
  }
}

}  // namespace
}  // namespace kvstream::codec
