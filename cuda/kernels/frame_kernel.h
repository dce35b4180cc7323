// Kernel 1 of the GPU decode: each thread reads one segment's frame (docs/format.md, "Segment payloads")
// from its own bytes: the counts, where the sink rows, parameters, table bank, streams and escapes are, with
// every field checked against the segment's size as the CPU decoder checks it. Threads past the last
// segment do nothing.
#pragma once

#include <cstdint>

#include "codec/common/quantizer.h"
#include "cuda/kernels/bytes.h"
#include "cuda/kernels/decode_job.h"

namespace kvstream::cuda {

inline constexpr int kFrameThreads = 128;

// Reads the table bank at bank (docs/format.md, "Table bank") for a segment of `channels` channels,
// writing each channel's table number; returns the bank's size in bytes through *bytes.
KVSTREAM_HD uint32_t ReadInChunkBank(const uint8_t* bank, uint64_t available, int32_t channels, uint16_t* channel_table,
                                     uint32_t* table_count, uint64_t* bytes) {
  if (available < 1) return kGpuFrameTruncated;
  const uint32_t count = bank[0];
  if (count == 0) return kGpuBadBank;
  if (count > static_cast<uint32_t>(kMaxInChunkTables)) return kGpuTooManyTables;
  uint64_t pos = 1;
  for (uint32_t k = 0; k < count; ++k) {
    if (available - pos < 4) return kGpuFrameTruncated;
    const uint32_t lo = bank[pos], hi = bank[pos + 1];
    if (lo == 0 || lo > hi) return kGpuBadBank;
    const uint64_t need = 4 + 2 * static_cast<uint64_t>(hi - lo + 1);
    if (available - pos < need) return kGpuFrameTruncated;
    uint32_t sum = LoadU16(bank + pos + 2);
    for (uint32_t s = lo; s <= hi; ++s) sum += LoadU16(bank + pos + 4 + 2 * (s - lo));
    if (sum != static_cast<uint32_t>(kSlotsPerTable)) return kGpuBadBank;
    pos += need;
  }
  if (count > 1) {
    if (available - pos < static_cast<uint64_t>(channels)) return kGpuFrameTruncated;
    for (int32_t c = 0; c < channels; ++c) {
      const uint32_t index = bank[pos + static_cast<uint64_t>(c)];
      if (index >= count) return kGpuBadBank;
      channel_table[c] = static_cast<uint16_t>(index);
    }
    pos += static_cast<uint64_t>(channels);
  } else {
    for (int32_t c = 0; c < channels; ++c) channel_table[c] = 0;
  }
  *table_count = count;
  *bytes = pos;
  return kGpuOk;
}

// The frame of segment `job` (all of it for fp16 and int8: their size).
KVSTREAM_HD uint32_t ReadFrame(const SegmentJob& job, const ProfileTables& profile, SegmentFrame* f) {
  const uint64_t size = job.size;
  const uint64_t values = static_cast<uint64_t>(job.tokens) * static_cast<uint64_t>(job.channels);
  if (job.kind == SegmentKind::kFp16) return size == 2 * values ? kGpuOk : kGpuBadSize;
  if (job.kind == SegmentKind::kInt8) return size == 2 * static_cast<uint64_t>(job.tokens) + values ? kGpuOk : kGpuBadSize;
  const uint8_t* p = job.bytes;
  const int streams = StreamCount(job);
  const uint64_t slice = static_cast<uint64_t>(job.layer) * 2 + static_cast<uint64_t>(job.kv);
  const uint64_t slices = static_cast<uint64_t>(profile.layers) * 2;
  // The counts of each stream, then what each stream's rows take from the profile at its level.
  if (size < 8 * static_cast<uint64_t>(streams)) return kGpuFrameTruncated;
  uint64_t pos = 0;
  uint32_t symbols = 0, first_row = 0;
  for (int i = 0; i < streams; ++i) {
    StreamFrame& st = f->stream[i];
    st.bytes = LoadU32(p + pos);
    st.escape_count = LoadU32(p + pos + 4);
    pos += 8;
    if (job.kind == SegmentKind::kChannelUniform) {
      st.period = static_cast<uint32_t>(job.channels);
      st.scaled_step = 0.0f;
      st.channel_table = job.in_chunk_tables ? job.channel_table
                                             : profile.channel_table +
                                                   ((static_cast<uint64_t>(job.level) - 1) * slices + slice) * profile.channels;
    } else {  // transform and predicted: the level's step from the transform section
      const uint64_t at = (static_cast<uint64_t>(i == 0 ? job.level : job.fine_level) - 1) * slices + slice;
      const bool predicted = job.kind == SegmentKind::kPredicted;
      st.period = (predicted ? profile.prediction_kept : profile.transform_kept)[at];
      st.scaled_step = codec::TransformStepScale(profile.transform_steps[at]);
      st.channel_table = (predicted ? profile.prediction_table : profile.transform_table) +
                         at * static_cast<uint64_t>(profile.channels);
    }
    st.symbols = symbols;
    st.first_row = first_row;
    const uint64_t coded = static_cast<uint64_t>(job.stream_rows[i]) * st.period;
    if (st.escape_count > coded) return kGpuEscapeCount;
    symbols += static_cast<uint32_t>(coded);
    first_row += static_cast<uint32_t>(job.stream_rows[i]);
  }
  const uint64_t sink_bytes = 2 * static_cast<uint64_t>(job.sink_rows) * static_cast<uint64_t>(job.channels);
  if (size - pos < sink_bytes) return kGpuFrameTruncated;
  f->sinks = static_cast<uint32_t>(pos);
  pos += sink_bytes;
  f->table_count = 0;
  f->slot_base = profile.slots;
  if (job.in_chunk_tables) {
    if (size - pos < 4 + 2 * static_cast<uint64_t>(job.channels)) return kGpuFrameTruncated;
    const uint32_t step_bits = LoadU32(p + pos);
    f->step = BitsToFloat(step_bits);
    if (!IsFiniteBits(step_bits) || !(f->step > 0.0f)) return kGpuBadStep;
    pos += 4;
    f->means = static_cast<uint32_t>(pos);
    for (int32_t c = 0; c < job.channels; ++c) {
      if (!IsFiniteHalf(LoadU16(p + pos + 2 * static_cast<uint64_t>(c)))) return kGpuBadMean;
    }
    pos += 2 * static_cast<uint64_t>(job.channels);
    f->bank = static_cast<uint32_t>(pos);
    uint64_t bank_bytes = 0;
    const uint32_t bank = ReadInChunkBank(p + pos, size - pos, job.channels, job.channel_table, &f->table_count, &bank_bytes);
    if (bank != kGpuOk) return bank;
    pos += bank_bytes;
    f->slot_base = job.tables;
  }
  // The streams, each followed by its escapes.
  for (int i = 0; i < streams; ++i) {
    StreamFrame& st = f->stream[i];
    if (size - pos < st.bytes) return kGpuFrameTruncated;
    st.offset = static_cast<uint32_t>(pos);
    pos += st.bytes;
    if (size - pos < 2 * static_cast<uint64_t>(st.escape_count)) return kGpuFrameTruncated;
    st.escapes = static_cast<uint32_t>(pos);
    pos += 2 * static_cast<uint64_t>(st.escape_count);
  }
  return pos == size ? kGpuOk : kGpuFrameLeftOver;
}

template <typename X>
KVSTREAM_HD void FrameKernel(X& x, const DecodeArgs& a) {
  x.Each([&](int t) {
    const int s = x.block() * x.threads() + t;
    if (s >= a.segments) return;
    a.errors[s] = ReadFrame(a.jobs[s], a.profile, &a.frames[s]);
  });
}

}  // namespace kvstream::cuda
