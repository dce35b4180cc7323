// Kernel 3: the rANS streams of lossy segments, two segments per 32-thread block: lanes 0-15 decode
// segment 2b's streams and lanes 16-31 segment 2b+1's, one format lane per thread (docs/rans.md,
// "Decoding"). A group of 16 symbols is one step of every lane, then a warp vote says which lanes need a
// word: those take consecutive words in lane order (rank = the needing lanes below), as the CPU's vector
// kernels do. A stream's tail then runs in 64-bit states without renormalising. A segment with fine rows
// has a second stream, which starts from the states the first ends in ("Chained streams"). Decoded
// symbols go to the segment's symbol scratch.
#pragma once

#include <cstdint>

#include "codec/common/rans_step.h"
#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/bytes.h"
#include "cuda/kernels/decode_job.h"
#include "cuda/kernels/rans_stream.h"

namespace kvstream::cuda {

inline constexpr int kEntropyThreads = 32;
inline constexpr int kSegmentsPerEntropyBlock = 2;

struct EntropyShared {
  StreamHeader header[kSegmentsPerEntropyBlock];
  int32_t active[kSegmentsPerEntropyBlock];       // 0: no stream to decode (not lossy, failed, past the end)
  uint32_t symbols[kSegmentsPerEntropyBlock];     // the stream's symbol count
  uint32_t groups[kSegmentsPerEntropyBlock];      // groups before the tail, the last one maybe partial
  uint32_t tail_groups[kSegmentsPerEntropyBlock];
};

struct EntropyLane {
  uint32_t x;         // the lane's state
  uint64_t x64;       // in the tail
  uint32_t pos;       // the half's read position, from the stream's start (the same in its 16 lanes)
  uint32_t period_at; // the position within a row of the lane's next symbol
  uint32_t error;
  bool need;
};

template <typename X>
KVSTREAM_HD void EntropyKernel(X& x, const DecodeArgs& a, EntropyShared& sh) {
  const auto segment_of = [&](int t) { return x.block() * kSegmentsPerEntropyBlock + t / kLanes; };
  const auto max_of = [](const uint32_t* v) { return v[0] > v[1] ? v[0] : v[1]; };
  typename X::template Local<EntropyLane> lane(x);
  for (int i = 0; i < 2; ++i) {  // the stream at the chunk's level, then the fine rows' (if any)
    // Lane 0 of each half reads its stream's header; the second stream starts from the lanes' states.
    if (i == 1) {
      x.Each([&](int t) {
        if (sh.active[t / kLanes]) sh.header[t / kLanes].state[t % kLanes] = lane[t].x;
      });
      x.Sync();
    }
    x.Each([&](int t) {
      if (t % kLanes != 0) return;
      const int h = t / kLanes, s = segment_of(t);
      const bool was_active = i == 1 && sh.active[h];
      sh.active[h] = 0;
      sh.groups[h] = 0;
      sh.tail_groups[h] = 0;
      if (s >= a.segments || !IsEntropyCoded(a.jobs[s].kind) || a.errors[s] != kGpuOk) return;
      const SegmentJob& job = a.jobs[s];
      if (i >= StreamCount(job) || (i == 1 && !was_active)) return;
      const StreamFrame& st = a.frames[s].stream[i];
      const uint32_t n = static_cast<uint32_t>(job.stream_rows[i]) * st.period;
      const bool chained = StreamCount(job) == 2;
      const uint32_t error = ReadStreamHeader(job.bytes + st.offset, st.bytes, n, chained && i == 0, i == 1, &sh.header[h]);
      if (error != kGpuOk) {
        a.errors[s] = error;
        return;
      }
      sh.active[h] = 1;
      sh.symbols[h] = n;
      sh.groups[h] = (sh.header[h].renormalised + kLanes - 1) / kLanes;
      sh.tail_groups[h] = (n + kLanes - 1) / kLanes - sh.groups[h];
    });
    x.Sync();
    x.Each([&](int t) {
      const int h = t / kLanes, j = t % kLanes;
      EntropyLane& l = lane[t];
      l.x = sh.header[h].state[j];
      l.pos = sh.header[h].header_bytes;
      l.period_at = sh.active[h] ? static_cast<uint32_t>(j) % a.frames[segment_of(t)].stream[i].period : 0;
      l.error = kGpuOk;
      l.need = false;
    });
    const uint32_t groups = max_of(sh.groups);
    for (uint32_t g = 0; g < groups; ++g) {
      x.Each([&](int t) {
        const int h = t / kLanes, j = t % kLanes;
        EntropyLane& l = lane[t];
        l.need = false;
        const uint32_t k = g * kLanes + static_cast<uint32_t>(j);
        if (!sh.active[h] || k >= sh.header[h].renormalised) return;
        const int s = segment_of(t);
        const SegmentFrame& f = a.frames[s];
        const StreamFrame& st = f.stream[i];
        const uint32_t* slots = f.slot_base + static_cast<size_t>(st.channel_table[l.period_at]) * kSlotsPerTable;
        a.jobs[s].symbols[st.symbols + k] = static_cast<uint8_t>(codec::RansDecodeSymbol(l.x, slots));
        l.need = codec::RansNeedsWord(l.x);
        l.period_at += kLanes;
        while (l.period_at >= st.period) l.period_at -= st.period;
      });
      x.Ballot([&](int t) { return lane[t].need; },
               [&](int t, uint32_t mask) {
                 const int h = t / kLanes, j = t % kLanes;
                 EntropyLane& l = lane[t];
                 const uint32_t half = (mask >> (h * kLanes)) & 0xffffu;
                 if (l.need) {
                   const uint32_t at = l.pos + 2u * static_cast<uint32_t>(PopCount(half & ((1u << j) - 1u)));
                   const StreamFrame& st = a.frames[segment_of(t)].stream[i];
                   if (at + 2u > st.bytes) {
                     l.error = kGpuRansTruncated;
                   } else {
                     l.x = (l.x << 16) | LoadU16(a.jobs[segment_of(t)].bytes + st.offset + at);
                   }
                 }
                 l.pos += 2u * static_cast<uint32_t>(PopCount(half));
               });
    }
    // The tail: each lane's state goes back up by its words (taken in lane order), then down to 1.
    x.Each([&](int t) {
      const int h = t / kLanes, j = t % kLanes;
      EntropyLane& l = lane[t];
      if (!sh.active[h] || sh.header[h].tail_groups == 0) return;
      const StreamHeader& hd = sh.header[h];
      const StreamFrame& st = a.frames[segment_of(t)].stream[i];
      uint32_t before = 0, all = 0;
      for (int k = 0; k < kLanes; ++k) {
        before += k < j ? hd.tail_words[k] : 0u;
        all += hd.tail_words[k];
      }
      l.x64 = hd.whole_tail ? hd.tail_start[j] : l.x;
      for (uint32_t w = 0; w < hd.tail_words[j]; ++w) {
        const uint32_t at = l.pos + 2u * (before + w);
        if (at + 2u > st.bytes) {
          l.error = kGpuRansTruncated;
          break;
        }
        l.x64 = (l.x64 << 16) | LoadU16(a.jobs[segment_of(t)].bytes + st.offset + at);
      }
      l.pos += 2u * all;
    });
    const uint32_t tail_groups = max_of(sh.tail_groups);
    for (uint32_t g = 0; g < tail_groups; ++g) {
      x.Each([&](int t) {
        const int h = t / kLanes, j = t % kLanes;
        EntropyLane& l = lane[t];
        if (!sh.active[h] || l.error != kGpuOk) return;
        const uint32_t k = sh.header[h].renormalised + g * kLanes + static_cast<uint32_t>(j);
        if (k >= sh.symbols[h]) return;
        const int s = segment_of(t);
        const SegmentFrame& f = a.frames[s];
        const StreamFrame& st = f.stream[i];
        const uint32_t* slots = f.slot_base + static_cast<size_t>(st.channel_table[l.period_at]) * kSlotsPerTable;
        a.jobs[s].symbols[st.symbols + k] = static_cast<uint8_t>(codec::RansDecodeSymbol(l.x64, slots));
        l.period_at += kLanes;
        while (l.period_at >= st.period) l.period_at -= st.period;
      });
    }
    // How the stream ends: every word used, every lane back where the encoder started it (or, for the
    // first of a chain, its states kept for the second).
    x.Each([&](int t) {
      const int h = t / kLanes;
      const EntropyLane& l = lane[t];
      if (!sh.active[h]) return;
      const int s = segment_of(t);
      uint32_t error = l.error;
      if (error == kGpuOk && l.pos != a.frames[s].stream[i].bytes) error = kGpuRansLeftOver;
      const bool hands_on = i == 0 && StreamCount(a.jobs[s]) == 2;
      if (error == kGpuOk && !hands_on) {
        const bool tail = sh.header[h].tail_groups > 0;
        if (tail ? l.x64 != 1 : l.x != codec::kRansStateLow) error = kGpuRansFinalState;
      }
      if (error != kGpuOk) a.errors[s] = error;
    });
    x.Sync();
    // A failed first stream leaves its second undecoded: the segment has failed.
    x.Each([&](int t) {
      if (t % kLanes == 0 && sh.active[t / kLanes] && a.errors[segment_of(t)] != kGpuOk) sh.active[t / kLanes] = 0;
    });
    x.Sync();
  }
}

}  // namespace kvstream::cuda
