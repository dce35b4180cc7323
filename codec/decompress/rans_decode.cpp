// rANS decoder (format: docs/rans.md): validates the header, runs a group kernel over the bulk of the
// stream (AVX-512 or AVX2 when the CPU has it, else the portable one) and the checked scalar step
// (rans_step.h) over the rest.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>

#include "codec/common/cpu_features.h"
#include "codec/common/rans.h"
#include "codec/common/rans_header_bits.h"
#include "codec/common/rans_step.h"
#include "codec/decompress/rans_group_kernels.h"

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
  // The model index runs alongside: a division per position (p % period) was 3 % of a predicted decode.
  for (size_t p = 0, m = 0; p < cycle; ++p) {
    const int64_t diff = static_cast<int64_t>(reinterpret_cast<uintptr_t>(tables[m]) - base);
    if (diff < INT32_MIN || diff > INT32_MAX - kTableBytes) return false;
    (*offsets)[p] = static_cast<int32_t>(diff);
    if (++m == period) m = 0;
  }
  *cycle_groups = cycle / kLanes;
  return true;
}

// The portable group kernel, with RansDecodeGroupsAvx2's contract (rans_group_kernels.h).
void DecodeGroupsPortable(RansGroupCursor& c) {
  const uint8_t* p = c.pos;
  const auto* base = reinterpret_cast<const uint8_t*>(c.table_base);
  size_t group = c.group;
  size_t cycle = group % c.cycle_groups;
  uint32_t x[kLanes];  // a local copy: the byte stores to out could alias the states
  std::memcpy(x, c.state, sizeof x);
  while (group < c.group_end && c.end - p >= static_cast<ptrdiff_t>(2 * kLanes)) {
    const int32_t* offsets = c.lane_offsets + cycle * kLanes;
    uint8_t* o = c.out + group * kLanes;
    for (size_t j = 0; j < kLanes; ++j) {
      o[j] = static_cast<uint8_t>(RansDecodeSymbol(x[j], reinterpret_cast<const uint32_t*>(base + offsets[j])));
      RansRenormalise(x[j], p);
    }
    ++group;
    if (++cycle == c.cycle_groups) cycle = 0;
  }
  std::memcpy(c.state, x, sizeof x);
  c.pos = p;
  c.group = group;
}


// Hands n streams to the group kernel of this CPU (the portable one takes them one by one).
void DecodeGroups(RansGroupCursor* const* streams, size_t n) {
#if defined(__x86_64__) || defined(_M_X64)
  if (Avx512Enabled()) return RansDecodeGroupsAvx512(streams, n);
  if (Avx2Enabled()) return RansDecodeGroupsAvx2(streams, n);
#endif
  for (size_t i = 0; i < n; ++i) DecodeGroupsPortable(*streams[i]);
}

// One stream: Start validates it and loads its states, the group kernels take its bulk through
// cursor(), Finish decodes the rest with the checked step and checks how the stream ends.
class StreamDecoder {
 public:
  StreamDecoder() { cursor_.state = state_; }
  StreamDecoder(const StreamDecoder&) = delete;
  StreamDecoder& operator=(const StreamDecoder&) = delete;

  Status Start(const RansDecodeJob& job) {
    job_ = job;
    // The header: every lane's state when the stream ends in the next one's, none when it starts from the
    // previous one's, else those of the lanes that code a symbol.
    const size_t lanes_stored = job.start_states ? 0 : job.end_states ? kLanes : (job.n < kLanes ? job.n : kLanes);
    if (job.n == 0 && lanes_stored == 0) {
      if (job.size != 0) return Status::CorruptData("rANS stream: " + std::to_string(job.size) + " bytes for 0 symbols");
      for (uint32_t& x : state_) x = kRansStateLow;
      return job.start_states ? StartFrom(*job.start_states) : Status::Ok();
    }
    if (job.data == nullptr && job.size != 0) return Status::InvalidArgument("rANS decode: null data");
    // A stream that starts from its own states, with a group for every lane, begins with its tail's group
    // count (docs/rans.md, "Tail").
    tail_field_ = RansHasTailField(job.n, job.end_states != nullptr);
    size_t header = 0;
    if (tail_field_) KVSTREAM_RETURN_IF_ERROR(ReadTailGroups());
    if (tail_field_ || lanes_stored > 0) KVSTREAM_RETURN_IF_ERROR(ReadHeader(lanes_stored, &header));
    if (job.n == 0) {  // a chained stream of no symbols: its header is its end states
      if (job.size != header) {
        return Status::CorruptData("rANS stream: " + std::to_string(job.size) + " bytes for 0 symbols, expected the " +
                                   std::to_string(header) + "-byte header");
      }
      return Status::Ok();
    }
    if (job.out == nullptr || job.models == nullptr || job.period == 0) {
      return Status::InvalidArgument("rANS decode: null data, output or models, or period 0 (period = " +
                                     std::to_string(job.period) + ")");
    }
    tables_.resize(job.period);
    for (size_t m = 0; m < job.period; ++m) {
      if (job.models[m] == nullptr) return Status::InvalidArgument("rANS decode: model " + std::to_string(m) + " is null");
      tables_[m] = job.models[m]->decode_table();
    }
    if ((job.size - header) % 2 != 0) {
      return Status::CorruptData("rANS stream: size " + std::to_string(job.size) + " bytes leaves an odd number of " +
                                 "bytes after the " + std::to_string(header) + "-byte header");
    }
    if (job.start_states) KVSTREAM_RETURN_IF_ERROR(StartFrom(*job.start_states));
    cursor_.pos = job.data + header;
    cursor_.end = job.data + job.size;
    cursor_.out = job.out;
    // The tail's symbols are decoded without renormalising, past the reach of the group kernels.
    renormalised_ = RansSymbolsBeforeTail(job.n, tail_groups_);
    const size_t groups = renormalised_ / kLanes;
    if (groups >= kMinKernelGroups && BuildLaneOffsets(tables_, &offsets_, &cursor_.cycle_groups)) {
      cursor_.table_base = tables_[0];
      cursor_.lane_offsets = offsets_.data();
      cursor_.group_end = groups;
    }
    return Status::Ok();
  }

  RansGroupCursor& cursor() { return cursor_; }
  bool HasKernelGroups() const { return cursor_.group < cursor_.group_end; }

  Status Finish() {
    if (job_.n == 0) return EndStates();
    if (HasKernelGroups()) {
      RansGroupCursor* const alone[1] = {&cursor_};
      DecodeGroups(alone, 1);
    }
    const uint8_t*& pos = cursor_.pos;
    const uint8_t* const end = cursor_.end;
    size_t i = cursor_.group * kLanes;
    size_t m = i % job_.period;
    for (; i < renormalised_; ++i) {
      if (!RansDecodeStep(state_[i % kLanes], tables_[m], pos, end, job_.out[i])) [[unlikely]] {
        return Status::CorruptData("rANS stream: truncated, symbol " + std::to_string(i) + " of " +
                                   std::to_string(job_.n) + " needs a word past the end of the " +
                                   std::to_string(job_.size) + "-byte stream");
      }
      if (++m == job_.period) m = 0;
    }
    if (tail_groups_ > 0) KVSTREAM_RETURN_IF_ERROR(DecodeTail(i, m, pos));
    if (pos != end) {
      return Status::CorruptData("rANS stream: " + std::to_string(end - pos) + " of " + std::to_string(job_.size) +
                                 " bytes left over after " + std::to_string(job_.n) + " symbols");
    }
    if (tail_groups_ == 0) KVSTREAM_RETURN_IF_ERROR(EndStates());
    if (tail_field_) {
      const size_t encoders = RansTailOf(job_.out, job_.n, job_.models, job_.period, job_.start_states == nullptr).groups;
      if (encoders != tail_groups_) {
        return Status::CorruptData("rANS stream: a tail of " + std::to_string(tail_groups_) +
                                   " groups, where its symbols' encoding has " + std::to_string(encoders));
      }
    }
    return Status::Ok();
  }

 private:
  // The tail's group count at data[0] (docs/rans.md, "Stream layout"), a byte, at most the stream's groups.
  Status ReadTailGroups() {
    if (job_.size < 1) return Truncated();
    const size_t groups = job_.data[0];
    const size_t stream_groups = (job_.n + kLanes - 1) / kLanes;
    if (groups > stream_groups) {
      return Status::CorruptData("rANS stream: a tail of " + std::to_string(groups) + " groups in a stream of " +
                                 std::to_string(stream_groups));
    }
    tail_groups_ = groups;
    whole_tail_ = RansTailIsWholeStream(job_.n, groups, job_.start_states == nullptr);
    return Status::Ok();
  }

  // The rest of the header, after the tail's group count if any (docs/rans.md, "Stream layout"): each
  // lane's word count when the tail follows renormalised symbols, then the first `lanes` states by bit
  // length, each in [2^16, 2^32) (the others, which code no symbol, sit at 2^16 from the start), or in
  // [1, 2^64) for a whole tail. *header_bytes = the header's size, the tail's group count included.
  Status ReadHeader(size_t lanes, size_t* header_bytes) {
    const size_t first = tail_field_ ? 1 : 0;
    RansHeaderBits bits(job_.data + first, job_.size - first);
    if (tail_groups_ > 0 && !whole_tail_) {
      for (uint32_t& words : tail_words_) words = bits.Get(1) == 0 ? 0 : 1 + static_cast<uint32_t>(bits.Get(1));
    }
    const int length_bits = whole_tail_ ? 6 : 4;
    const int shortest = whole_tail_ ? 1 : 17;
    int below[kLanes] = {};
    for (size_t j = 0; j < lanes; ++j) below[j] = static_cast<int>(bits.Get(length_bits)) + shortest - 1;
    for (size_t j = 0; j < kLanes; ++j) {
      const uint64_t x = j < lanes ? (uint64_t{1} << below[j]) | bits.Get(below[j]) : kRansStateLow;
      if (whole_tail_) {
        tail_start_[j] = x;
      } else {
        state_[j] = static_cast<uint32_t>(x);
      }
    }
    *header_bytes = first + bits.bytes_read();
    if (bits.overran()) return Truncated();
    if (!bits.spare_bits_zero()) return Status::CorruptData("rANS stream: the header's padding bits are not 0");
    return Status::Ok();
  }

  Status Truncated() const {
    return Status::CorruptData("rANS stream: size " + std::to_string(job_.size) + " bytes ends inside its header (" +
                               std::to_string(job_.n) + " symbols)");
  }

  // The states the previous stream of a chain ended in (each in [2^16, 2^32) unless that stream failed).
  Status StartFrom(const RansLanes& lanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      if (lanes.state[j] < kRansStateLow) {
        return Status::CorruptData("rANS stream: start state of lane " + std::to_string(j) + " = " +
                                   std::to_string(lanes.state[j]) + " from the stream before, below " +
                                   std::to_string(kRansStateLow));
      }
    }
    std::memcpy(state_, lanes.state, sizeof state_);
    return Status::Ok();
  }

  // The tail, symbols [i, n) (docs/rans.md, "Tail"): each lane's state goes back up by its words, read
  // from pos, then down without renormalising, in 64 bits, to 1.
  Status DecodeTail(size_t i, size_t m, const uint8_t*& pos) {
    uint64_t x[kLanes];
    for (size_t j = 0; j < kLanes; ++j) {
      x[j] = whole_tail_ ? tail_start_[j] : state_[j];
      for (uint32_t w = 0; w < tail_words_[j]; ++w, pos += 2) {
        if (cursor_.end - pos < 2) {
          return Status::CorruptData("rANS stream: truncated, lane " + std::to_string(j) + "'s tail needs a word " +
                                     "past the end of the " + std::to_string(job_.size) + "-byte stream");
        }
        x[j] = (x[j] << 16) | pos[0] | (uint32_t{pos[1]} << 8);
      }
    }
    for (; i < job_.n; ++i) {
      job_.out[i] = static_cast<uint8_t>(RansDecodeSymbol(x[i % kLanes], tables_[m]));
      if (++m == job_.period) m = 0;
    }
    for (size_t j = 0; j < kLanes; ++j) {
      if (x[j] != 1) {
        return Status::CorruptData("rANS stream: final state of lane " + std::to_string(j) + " = " +
                                   std::to_string(x[j]) + " after its tail, expected 1");
      }
    }
    return Status::Ok();
  }

  // Hands the states on to the next stream of a chain, or checks that every lane is back at 2^16.
  Status EndStates() {
    if (job_.end_states) {
      std::memcpy(job_.end_states->state, state_, sizeof state_);
      return Status::Ok();
    }
    for (size_t j = 0; j < kLanes; ++j) {
      if (state_[j] != kRansStateLow) {
        return Status::CorruptData("rANS stream: final state of lane " + std::to_string(j) + " = " +
                                   std::to_string(state_[j]) + ", expected " + std::to_string(kRansStateLow));
      }
    }
    return Status::Ok();
  }

  RansDecodeJob job_;
  bool tail_field_ = false;
  size_t tail_groups_ = 0;
  bool whole_tail_ = false;           // the tail is the whole stream: its states are in tail_start_
  uint64_t tail_start_[kLanes] = {};
  uint32_t tail_words_[kLanes] = {};  // how many words each lane's state came down by after the tail
  size_t renormalised_ = 0;  // symbols [0, renormalised_) renormalise, the tail's after them do not
  std::vector<const uint32_t*> tables_;
  std::vector<int32_t> offsets_;
  uint32_t state_[kLanes] = {};
  RansGroupCursor cursor_;
};

}  // namespace

Status RansDecode(const uint8_t* data, size_t size, const RansModel* const* models, size_t period,
                  uint8_t* out, size_t n) {
  StreamDecoder stream;
  KVSTREAM_RETURN_IF_ERROR(stream.Start(RansDecodeJob{data, size, models, period, out, n}));
  return stream.Finish();
}

size_t RansStreamsDecodedTogether() {
#if defined(__x86_64__) || defined(_M_X64)
  if (Avx512Enabled()) return 4;
  if (Avx2Enabled()) return 2;
#endif
  return 1;
}

void RansDecodeTogether(const RansDecodeJob* jobs, size_t n, Status* statuses) {
  if (n > kRansMaxTogether) {
    for (size_t i = 0; i < n; ++i) {
      statuses[i] = Status::InvalidArgument("rANS decode: " + std::to_string(n) + " streams together, at most " +
                                            std::to_string(kRansMaxTogether));
    }
    return;
  }
  StreamDecoder streams[kRansMaxTogether];
  RansGroupCursor* together[kRansMaxTogether];
  size_t ready = 0;
  for (size_t i = 0; i < n; ++i) {
    statuses[i] = streams[i].Start(jobs[i]);
    if (statuses[i].ok() && streams[i].HasKernelGroups()) together[ready++] = &streams[i].cursor();
  }
  // In lockstep until one stream stops, then again with the others: a stream left alone decodes a group
  // at a time, each waiting on the last (a layer's values code more components than its keys).
  while (ready > 1) {
    DecodeGroups(together, ready);
    const size_t before = ready;
    const auto stopped = [](const RansGroupCursor* c) { return !KernelCanDecode(*c); };
    ready = static_cast<size_t>(std::remove_if(together, together + ready, stopped) - together);
    if (ready == before) break;
  }
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].ok()) statuses[i] = streams[i].Finish();
  }
}

}  // namespace kvstream::codec
