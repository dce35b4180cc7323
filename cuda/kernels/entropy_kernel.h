// Kernel 3: the rANS streams of lossy segments, two segments per 32-thread block: lanes 0-15 decode
// segment 2b's stream and lanes 16-31 segment 2b+1's, one format lane per thread (docs/rans.md,
// "Decoding"). A group of 16 symbols is one step of every lane, then a warp vote says which lanes need a
// word: those take consecutive words in lane order (rank = the needing lanes below), as the CPU's vector
// kernels do. The tail then runs in 64-bit states without renormalising. Decoded symbols go to the
// segment's symbol scratch.
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
  int32_t active[kSegmentsPerEntropyBlock];  // 0: no stream to decode (not lossy, failed, past the end)
  uint32_t groups[kSegmentsPerEntropyBlock];       // groups before the tail, the last one maybe partial
  uint32_t tail_groups[kSegmentsPerEntropyBlock];
};

struct EntropyLane {
  uint32_t x;         // the lane's state
  uint64_t x64;       // in the tail
  uint32_t pos;       // the half's read position, from the stream's start (the same in its 16 lanes)
  int32_t channel;    // the channel of the lane's next symbol
  uint32_t error;
  bool need;
};

template <typename X>
KVSTREAM_HD void EntropyKernel(X& x, const DecodeArgs& a, EntropyShared& sh) {
  const auto segment_of = [&](int t) { return x.block() * kSegmentsPerEntropyBlock + t / kLanes; };
  typename X::template Local<EntropyLane> lane(x);
  x.Each([&](int t) {
    if (t % kLanes != 0) return;
    const int h = t / kLanes, s = segment_of(t);
    sh.active[h] = 0;
    sh.groups[h] = 0;
    sh.tail_groups[h] = 0;
    if (s >= a.segments || a.errors[s] != kGpuOk || a.jobs[s].kind != SegmentKind::kChannelUniform) return;
    const SegmentJob& job = a.jobs[s];
    const SegmentFrame& f = a.frames[s];
    const uint32_t n = static_cast<uint32_t>(job.tokens - job.sink_rows) * static_cast<uint32_t>(job.channels);
    const uint32_t error = ReadStreamHeader(job.bytes + f.stream, f.stream_bytes, n, &sh.header[h]);
    if (error != kGpuOk) {
      a.errors[s] = error;
      return;
    }
    sh.active[h] = 1;
    sh.groups[h] = (sh.header[h].renormalised + kLanes - 1) / kLanes;
    sh.tail_groups[h] = (n + kLanes - 1) / kLanes - (sh.header[h].renormalised + kLanes - 1) / kLanes;
  });
  x.Sync();
  x.Each([&](int t) {
    const int h = t / kLanes, j = t % kLanes;
    EntropyLane& l = lane[t];
    l.x = sh.header[h].state[j];
    l.pos = sh.header[h].header_bytes;
    l.channel = sh.active[h] ? j % a.jobs[segment_of(t)].channels : 0;
    l.error = kGpuOk;
    l.need = false;
  });
  const uint32_t groups = sh.groups[0] > sh.groups[1] ? sh.groups[0] : sh.groups[1];
  for (uint32_t g = 0; g < groups; ++g) {
    x.Each([&](int t) {
      const int h = t / kLanes, j = t % kLanes;
      EntropyLane& l = lane[t];
      l.need = false;
      const uint32_t i = g * kLanes + static_cast<uint32_t>(j);
      if (!sh.active[h] || i >= sh.header[h].renormalised) return;
      const int s = segment_of(t);
      const SegmentFrame& f = a.frames[s];
      const uint32_t* slots = f.slot_base + static_cast<size_t>(f.channel_table[l.channel]) * kSlotsPerTable;
      a.jobs[s].symbols[i] = static_cast<uint8_t>(codec::RansDecodeSymbol(l.x, slots));
      l.need = codec::RansNeedsWord(l.x);
      l.channel += kLanes;
      while (l.channel >= a.jobs[s].channels) l.channel -= a.jobs[s].channels;
    });
    x.Ballot([&](int t) { return lane[t].need; },
             [&](int t, uint32_t mask) {
               const int h = t / kLanes, j = t % kLanes;
               EntropyLane& l = lane[t];
               const uint32_t half = (mask >> (h * kLanes)) & 0xffffu;
               if (l.need) {
                 const uint32_t at = l.pos + 2u * static_cast<uint32_t>(PopCount(half & ((1u << j) - 1u)));
                 const SegmentFrame& f = a.frames[segment_of(t)];
                 if (at + 2u > f.stream_bytes) {
                   l.error = kGpuRansTruncated;
                 } else {
                   l.x = (l.x << 16) | LoadU16(a.jobs[segment_of(t)].bytes + f.stream + at);
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
    const SegmentFrame& f = a.frames[segment_of(t)];
    uint32_t before = 0, all = 0;
    for (int k = 0; k < kLanes; ++k) {
      before += k < j ? hd.tail_words[k] : 0u;
      all += hd.tail_words[k];
    }
    l.x64 = hd.whole_tail ? hd.tail_start[j] : l.x;
    for (uint32_t w = 0; w < hd.tail_words[j]; ++w) {
      const uint32_t at = l.pos + 2u * (before + w);
      if (at + 2u > f.stream_bytes) {
        l.error = kGpuRansTruncated;
        break;
      }
      l.x64 = (l.x64 << 16) | LoadU16(a.jobs[segment_of(t)].bytes + f.stream + at);
    }
    l.pos += 2u * all;
  });
  const uint32_t tail_groups = sh.tail_groups[0] > sh.tail_groups[1] ? sh.tail_groups[0] : sh.tail_groups[1];
  for (uint32_t g = 0; g < tail_groups; ++g) {
    x.Each([&](int t) {
      const int h = t / kLanes, j = t % kLanes;
      EntropyLane& l = lane[t];
      if (!sh.active[h] || l.error != kGpuOk) return;
      const int s = segment_of(t);
      const uint32_t n = static_cast<uint32_t>(a.jobs[s].tokens - a.jobs[s].sink_rows) *
                         static_cast<uint32_t>(a.jobs[s].channels);
      const uint32_t i = sh.header[h].renormalised + g * kLanes + static_cast<uint32_t>(j);
      if (i >= n) return;
      const SegmentFrame& f = a.frames[s];
      const uint32_t* slots = f.slot_base + static_cast<size_t>(f.channel_table[l.channel]) * kSlotsPerTable;
      a.jobs[s].symbols[i] = static_cast<uint8_t>(codec::RansDecodeSymbol(l.x64, slots));
      l.channel += kLanes;
      while (l.channel >= a.jobs[s].channels) l.channel -= a.jobs[s].channels;
    });
  }
  // How the stream ends: every word used, every lane back where the encoder started it.
  x.Each([&](int t) {
    const int h = t / kLanes;
    const EntropyLane& l = lane[t];
    if (!sh.active[h]) return;
    const int s = segment_of(t);
    uint32_t error = l.error;
    if (error == kGpuOk && l.pos != a.frames[s].stream_bytes) error = kGpuRansLeftOver;
    if (error == kGpuOk) {
      const bool tail = sh.header[h].tail_groups > 0;
      if (tail ? l.x64 != 1 : l.x != codec::kRansStateLow) error = kGpuRansFinalState;
    }
    if (error != kGpuOk) a.errors[s] = error;
  });
}

}  // namespace kvstream::cuda
