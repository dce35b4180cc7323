// Kernel 2: the slot tables of in-chunk banks (docs/rans.md, "Frequency tables"), one block per
// (segment, table). Slot order is the pairs (symbol s, rank k) sorted by p(s, k) = floor((2k + 1) * 2048 /
// f[s]), ties by symbol; each thread places pairs on its own: the slot of (s, k) is the number of pairs
// with a smaller p, plus the symbols below s that have a pair at p. Those counts have a closed form per
// symbol (below), so no sort is needed and the threads share nothing but the frequencies.
// RansModel::BuildTables sorts on the CPU; codec_gpu_kernel_test checks the two tables equal.
#pragma once

#include <cstdint>

#include "codec/common/rans_step.h"
#include "cuda/kernels/bytes.h"
#include "cuda/kernels/decode_job.h"

namespace kvstream::cuda {

inline constexpr int kTableThreads = 256;

// How many of a symbol of frequency f's pairs have p < P: the k with (2k + 1) * 2048 < P * f.
KVSTREAM_HD uint32_t PairsBelow(uint32_t f, uint32_t P) {
  const int64_t v = static_cast<int64_t>(P) * f - 2048;
  if (v <= 0) return 0;
  const uint32_t k = static_cast<uint32_t>((v + 4095) / 4096);
  return k < f ? k : f;
}

struct TableShared {
  uint16_t freq[256];
  uint16_t first[257];  // cumulative frequencies: symbol s's pairs are numbers first[s] .. first[s+1]-1
  int32_t skip;         // 1: this block has no table to build
};

template <typename X>
KVSTREAM_HD void TableKernel(X& x, const DecodeArgs& a, TableShared& sh) {
  const int segment = x.block() / kMaxInChunkTables, table = x.block() % kMaxInChunkTables;
  x.Each([&](int t) {
    if (t != 0) return;
    const SegmentJob& job = a.jobs[segment];
    const SegmentFrame& f = a.frames[segment];
    sh.skip = job.kind != SegmentKind::kChannelUniform || !job.in_chunk_tables || a.errors[segment] != kGpuOk ||
              static_cast<uint32_t>(table) >= f.table_count;
    if (sh.skip) return;
    // Walk the bank (already checked by the frame kernel) to this table.
    const uint8_t* p = job.bytes + f.bank + 1;
    for (int k = 0; k < table; ++k) p += 4 + 2 * (p[1] - p[0] + 1);
    const uint32_t lo = p[0], hi = p[1];
    for (int s = 0; s < 256; ++s) sh.freq[s] = 0;
    sh.freq[0] = static_cast<uint16_t>(LoadU16(p + 2));
    for (uint32_t s = lo; s <= hi; ++s) sh.freq[s] = static_cast<uint16_t>(LoadU16(p + 4 + 2 * (s - lo)));
    sh.first[0] = 0;
    for (int s = 0; s < 256; ++s) sh.first[s + 1] = static_cast<uint16_t>(sh.first[s] + sh.freq[s]);
  });
  x.Sync();
  if (sh.skip) return;  // the same for every thread of the block
  x.Each([&](int t) {
    uint32_t* slots = a.jobs[segment].tables + static_cast<size_t>(table) * kSlotsPerTable;
    for (int pair = t; pair < kSlotsPerTable; pair += x.threads()) {
      int s = 0;  // the symbol whose pairs include number `pair`
      for (int half = 128; half > 0; half /= 2) {
        if (sh.first[s + half] <= pair) s += half;
      }
      const uint32_t f = sh.freq[s], k = static_cast<uint32_t>(pair - sh.first[s]);
      const uint32_t P = ((2 * k + 1) * 2048) / f;
      uint32_t slot = 0;
      for (int other = 0; other < 256; ++other) {
        const uint32_t g = sh.freq[other];
        if (g == 0) continue;
        slot += PairsBelow(g, P);
        if (other < s) slot += PairsBelow(g, P + 1) - PairsBelow(g, P);
      }
      slots[slot] = codec::RansPackSlot(static_cast<uint32_t>(s), f, k);
    }
  });
}

}  // namespace kvstream::cuda
