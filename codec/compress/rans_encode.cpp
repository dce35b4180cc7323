// rANS encoder: codes symbols backwards into kRansLanes interleaved states (format: docs/rans.md).
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <string>

#include "codec/common/rans.h"
#include "codec/common/rans_step.h"

namespace kvstream::codec {
namespace {

// Bits packed into bytes least significant first, as the stream's header stores them (docs/rans.md,
// "Stream layout").
class HeaderBits {
 public:
  explicit HeaderBits(std::vector<uint8_t>* out) : out_(out) {}

  // The low `count` bits of `value`, count <= 64.
  void Put(uint64_t value, int count) {
    if (count > 32) {
      Put(value, 32);
      value >>= 32;
      count -= 32;
    }
    pending_ |= (value & ((uint64_t{1} << count) - 1)) << pending_bits_;
    pending_bits_ += count;
    for (; pending_bits_ >= 8; pending_bits_ -= 8, pending_ >>= 8) out_->push_back(static_cast<uint8_t>(pending_));
  }

  // The last byte's spare bits are 0.
  void Flush() {
    if (pending_bits_ > 0) out_->push_back(static_cast<uint8_t>(pending_));
    pending_ = 0;
    pending_bits_ = 0;
  }

 private:
  std::vector<uint8_t>* out_;
  uint64_t pending_ = 0;
  int pending_bits_ = 0;
};

// The header after the tail's group count (docs/rans.md, "Stream layout"): each lane's word count when a
// tail is followed by renormalised symbols, then the bit length of each of the first `lanes` states (less 17
// in 4 bits; less 1 in 6 bits for the 64-bit states of a stream that is all tail), then the bits below
// each one's leading one. A state carries its information in its top bits only, so this stores about 27.5 bits
// of a state in [2^16, 2^32) on average instead of 32.
void WriteHeader(const uint32_t* tail_words, const uint64_t* state, size_t lanes, bool whole_tail,
                 std::vector<uint8_t>* out) {
  HeaderBits bits(out);
  if (tail_words) {
    // Word counts 0, 1 and 2 as the codes 0, 10 and 11 in reading order: most lanes come down by none.
    constexpr uint64_t kCode[3] = {0b0, 0b01, 0b11};
    constexpr int kCodeBits[3] = {1, 2, 2};
    for (size_t j = 0; j < kRansLanes; ++j) bits.Put(kCode[tail_words[j]], kCodeBits[tail_words[j]]);
  }
  const int length_bits = whole_tail ? 6 : 4;
  const int shortest = whole_tail ? 1 : 17;
  for (size_t j = 0; j < lanes; ++j) bits.Put(static_cast<int>(std::bit_width(state[j])) - shortest, length_bits);
  for (size_t j = 0; j < lanes; ++j) {
    bits.Put(state[j], static_cast<int>(std::bit_width(state[j])) - 1);  // all but the leading one
  }
  bits.Flush();
}

}  // namespace

Status RansEncode(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period,
                  std::vector<uint8_t>* out, const RansLanes* end_states, RansLanes* start_states) {
  constexpr size_t kLanes = kRansLanes;
  if (out == nullptr) return Status::InvalidArgument("rANS encode: null output");
  uint32_t state[kLanes];
  for (size_t j = 0; j < kLanes; ++j) state[j] = end_states ? end_states->state[j] : kRansStateLow;
  // A stream that starts from its own states, with a group for every lane, may have a tail (docs/rans.md,
  // "Tail"): its group count comes first. Symbols [0, coded) are coded with renormalisation.
  const bool tail_field = RansHasTailField(n, end_states != nullptr);
  RansTail tail;
  bool whole_tail = false;
  uint32_t tail_words[kLanes] = {};  // how many words each lane's state came down by after the tail
  size_t coded = n;
  // The tail's group count, then the rest of the header: the word counts of a tail that follows renormalised
  // symbols, and the decoder's start states of every lane that can differ from 2^16 (a whole tail's 64-bit
  // states as they are), unless they are returned (chained).
  const auto finish = [&](const uint8_t* words, size_t word_bytes) {
    if (tail_field) out->push_back(static_cast<uint8_t>(tail.groups));
    const uint32_t* const words_after_tail = tail.groups > 0 && !whole_tail ? tail_words : nullptr;
    if (whole_tail) {
      WriteHeader(nullptr, tail.state, kLanes, true, out);
    } else if (start_states) {
      std::memcpy(start_states->state, state, sizeof state);
      WriteHeader(words_after_tail, nullptr, 0, false, out);
    } else {
      uint64_t header[kLanes];
      std::copy(state, state + kLanes, header);
      WriteHeader(words_after_tail, header, end_states ? kLanes : (n < kLanes ? n : kLanes), false, out);
    }
    out->insert(out->end(), words, words + word_bytes);
  };
  if (n == 0) {
    finish(nullptr, 0);
    return Status::Ok();
  }
  if (symbols == nullptr || models == nullptr || period == 0) {
    return Status::InvalidArgument("rANS encode: null symbols or models, or period 0 (period = " +
                                   std::to_string(period) + ")");
  }
  std::vector<const RansEncSymbol*> tables(period);
  std::vector<const uint16_t*> slot_of_rank(period);
  for (size_t m = 0; m < period; ++m) {
    if (models[m] == nullptr) return Status::InvalidArgument("rANS encode: model " + std::to_string(m) + " is null");
    tables[m] = models[m]->encode_table();
    slot_of_rank[m] = models[m]->slot_of_rank();
  }

  // The words are emitted backwards into scratch space (left uninitialised: zeroing it cost as much as a
  // tenth of the encode), then appended to *out after the states. Every symbol emits at most one word and
  // the tail's lanes at most 2 each; two spare bytes below the words absorb the unconditional store of the
  // branch-free renormalisation.
  const size_t scratch_bytes = 2 + 2 * n + 4 * kLanes;
  const std::unique_ptr<uint8_t[]> scratch = std::make_unique_for_overwrite<uint8_t[]>(scratch_bytes);
  uint8_t* const end = scratch.get() + scratch_bytes;
  uint8_t* ptr = end;

  // The tail goes first; unless it is the whole stream, its lanes' states come down into 32 bits by whole
  // words, which the decoder reads last of all: lane 0's first, each lane's most significant first.
  if (tail_field) {
    tail = RansTailOf(symbols, n, models, period, start_states == nullptr);
    coded = RansSymbolsBeforeTail(n, tail.groups);
    whole_tail = RansTailIsWholeStream(n, tail.groups, start_states == nullptr);
    if (tail.groups > 0 && !whole_tail) {
      for (size_t j = kLanes; j-- > 0;) {
        uint64_t y = tail.state[j];
        for (; y >> 32 != 0; y >>= 16, ++tail_words[j]) {
          ptr -= 2;
          ptr[0] = static_cast<uint8_t>(y);
          ptr[1] = static_cast<uint8_t>(y >> 8);
        }
        state[j] = static_cast<uint32_t>(y);
      }
    }
  }

  // Backwards over the symbols: the decoder reads words in the reverse order of their emission, so it
  // sees, within each group of kLanes symbols, the words of lanes 0, 1, ... in that order.
  size_t m = coded == 0 ? 0 : (coded - 1) % period;
  for (size_t i = coded; i-- > 0;) {
    const uint8_t s = symbols[i];
    const RansEncSymbol& e = tables[m][s];
    const uint16_t* const slots = slot_of_rank[m];
    m = m == 0 ? period - 1 : m - 1;
    if (e.freq == 0) [[unlikely]] {
      return Status::InvalidArgument("rANS encode: symbol " + std::to_string(s) + " at index " +
                                     std::to_string(i) + " has frequency 0 in model " +
                                     std::to_string(i % period) + " (alphabet " +
                                     std::to_string(models[i % period]->alphabet()) + ")");
    }
    uint32_t x = state[i % kLanes];
    // Emit the low word when coding would overflow 32 bits: x >= freq << 20.
    // Branch-free: with entropies of a few bits per symbol the branch would be mispredicted often.
    const uint32_t emit = (x >> 20) >= e.freq ? 1u : 0u;
    ptr[-2] = static_cast<uint8_t>(x);
    ptr[-1] = static_cast<uint8_t>(x >> 8);
    ptr -= 2 * emit;
    x >>= 16 * emit;
    state[i % kLanes] = static_cast<uint32_t>(RansCodeSymbol(x, e, slots));
  }

  finish(ptr, static_cast<size_t>(end - ptr));
  return Status::Ok();
}

}  // namespace kvstream::codec
