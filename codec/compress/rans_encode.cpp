// rANS encoder: codes symbols backwards into kRansLanes interleaved states (format: docs/rans.md).
#include <bit>
#include <cstring>
#include <memory>
#include <string>

#include "codec/common/rans.h"
#include "codec/common/rans_step.h"

namespace kvstream::codec {
namespace {

// The header of the first `lanes` states (docs/rans.md, "Stream layout"): each state's bit length less
// 17 as a nibble, then the bits below each one's leading one, packed least significant first. A state
// in [2^16, 2^32) carries its information in its top bits only, so this stores about 27.5 bits of it on
// average instead of 32.
void WriteStates(const uint32_t* state, size_t lanes, std::vector<uint8_t>* out) {
  const size_t first = out->size();
  out->resize(first + (lanes + 1) / 2, 0);
  uint64_t pending = 0;
  int pending_bits = 0;
  for (size_t j = 0; j < lanes; ++j) {
    const int below = 31 - std::countl_zero(state[j]);  // 16..31: the bits below the leading one
    (*out)[first + j / 2] |= static_cast<uint8_t>((below - 16) << (4 * (j % 2)));
    pending |= uint64_t{state[j] & ((uint32_t{1} << below) - 1)} << pending_bits;
    pending_bits += below;
    for (; pending_bits >= 8; pending_bits -= 8, pending >>= 8) out->push_back(static_cast<uint8_t>(pending));
  }
  if (pending_bits > 0) out->push_back(static_cast<uint8_t>(pending));
}

// The tail's fields (docs/rans.md, "Stream layout"): its group count, a byte, then, for a tail, the uint32
// of each lane's word count, 2 bits a lane.
void WriteTail(size_t groups, uint32_t words, std::vector<uint8_t>* out) {
  out->push_back(static_cast<uint8_t>(groups));
  if (groups == 0) return;
  for (int b = 0; b < 4; ++b) out->push_back(static_cast<uint8_t>(words >> (8 * b)));
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
  size_t tail = 0;
  uint32_t tail_words = 0;  // 2 bits a lane: how many words each lane's state came down by after the tail
  size_t coded = n;
  // The tail, then the decoder's start states: returned (chained), or the header of every lane that can
  // differ from 2^16.
  const auto finish = [&](const uint8_t* words, size_t word_bytes) {
    if (tail_field) WriteTail(tail, tail_words, out);
    if (start_states) {
      std::memcpy(start_states->state, state, sizeof state);
    } else {
      WriteStates(state, end_states ? kLanes : (n < kLanes ? n : kLanes), out);
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

  // The tail goes first; its lanes' states come down into 32 bits by whole words, which the decoder reads
  // last of all: lane 0's first, each lane's most significant first.
  if (tail_field) {
    const RansTail after = RansTailOf(symbols, n, models, period);
    tail = after.groups;
    coded = RansSymbolsBeforeTail(n, tail);
    if (tail > 0) {
      for (size_t j = kLanes; j-- > 0;) {
        uint64_t y = after.state[j];
        uint32_t words = 0;
        for (; y >> 32 != 0; y >>= 16, ++words) {
          ptr -= 2;
          ptr[0] = static_cast<uint8_t>(y);
          ptr[1] = static_cast<uint8_t>(y >> 8);
        }
        state[j] = static_cast<uint32_t>(y);
        tail_words |= words << (2 * j);
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
