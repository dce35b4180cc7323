// Static-model interleaved rANS: the entropy coder shared by the chunk encoder and decoder.
//
// Contract (the byte format is specified in docs/rans.md):
//   * 32-bit states kept in [2^16, 2^32), 16-bit renormalisation, probabilities quantised to
//     kRansProbBits (12) bits; a stream's last symbols (its tail) are coded first, from states of 1 and
//     without renormalising, so that no lane spends 16 bits on starting from 2^16;
//   * symbols are bytes; a model covers an alphabet of at most 256 symbols;
//   * symbol i of a stream is coded with models[i % period] (per-channel tables: period = channels);
//   * kRansLanes states are interleaved (symbol i belongs to lane i % kRansLanes) so that the decoder has
//     independent dependency chains to overlap, AVX2 lanes to fill and GPU threads to spread over. Each
//     lane costs its stream 2-4 bytes (its final state), so 16 lanes, not more: the CPU decoder fills
//     its vectors by decoding several streams at once (RansDecodeTogether).
// The per-symbol decode step lives in rans_step.h as host/device code, so the CUDA kernels reuse it.
// Encoding and decoding are pure functions of their arguments: any number of threads may code streams
// at once with the same models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::codec {

inline constexpr int kRansProbBits = 12;
inline constexpr uint32_t kRansProbScale = 1u << kRansProbBits;
inline constexpr int kRansMaxAlphabet = 256;
// Interleave width of a stream: part of the format (docs/rans.md).
inline constexpr int kRansLanes = 16;

// Per-symbol encoder constants: coding the symbol from state x takes q = floor(x / freq) (a multiply by a
// 64-bit reciprocal) and the symbol's slot of rank x - q * freq (RansCodeSymbol).
struct RansEncSymbol {
  uint64_t rcp = 0;    // ceil(2^64 / freq); 2^64 - 1 when freq == 1, whose quotient is then one short
  uint32_t first = 0;  // where the symbol's slots start in RansModel::slot_of_rank()
  uint32_t freq = 0;   // 0: the symbol cannot be coded
};

// A static symbol distribution with frequencies that sum to kRansProbScale, plus the encoder's and
// decoder's lookup tables derived from them (about 31 KiB per model). Symbols of frequency 0, and symbols
// at or above alphabet(), cannot be coded. Immutable once built; safe to share between threads.
class RansModel {
 public:
  // Quantises counts (alphabet in [1, 256], not all zero) to frequencies summing to 2^12 such that every
  // symbol with a non-zero count gets a frequency >= 1 and the coded size of the counted data,
  // sum(count * -log2(freq / 2^12)), is the smallest possible.
  static Result<RansModel> FromCounts(const uint32_t* counts, int alphabet);
  // Adopts stored frequencies (from a profile or a chunk) after checking that they sum to 2^12.
  static Result<RansModel> FromFrequencies(const uint16_t* frequencies, int alphabet);

  int alphabet() const { return alphabet_; }
  // alphabet() entries.
  const uint16_t* frequencies() const { return freq_.data(); }
  // Bits the model spends on symbol s: -log2(freq / 2^12); infinity when freq is 0.
  double CostBits(uint8_t symbol) const { return cost_[symbol]; }
  // Detail for the coder. decode_table(): 4096 packed slot entries, layout in rans_step.h.
  const uint32_t* decode_table() const { return slots_.data(); }
  // 256 entries: encoder constants of each symbol (freq 0 past the alphabet).
  const RansEncSymbol* encode_table() const { return enc_.data(); }
  // The slots of each symbol in rank order, symbol s's from encode_table()[s].first; a symbol of frequency
  // 1 has two entries, its slot + 4096 second, for its quotient one short (RansCodeSymbol).
  const uint16_t* slot_of_rank() const { return slot_of_rank_.data(); }

 private:
  RansModel() = default;
  void BuildTables();

  int alphabet_ = 0;
  std::vector<uint16_t> freq_;   // 256 entries, zero past the alphabet
  std::vector<uint32_t> slots_;  // 4096
  std::vector<uint16_t> slot_of_rank_;  // 4096, and one more for each symbol of frequency 1
  std::vector<RansEncSymbol> enc_;  // 256
  std::vector<double> cost_;     // 256
};

// The state after coding a symbol from state x, 1 <= x < 2^32 (docs/rans.md, "Encoding"): C(s, x) =
// floor(x / freq) * 2^12 + the symbol's slot of rank x mod freq; it fits 32 bits when x < freq << 20.
inline uint64_t RansCodeSymbol(uint32_t x, const RansEncSymbol& e, const uint16_t* slot_of_rank) {
  const uint32_t q = static_cast<uint32_t>((static_cast<unsigned __int128>(x) * e.rcp) >> 64);
  return (uint64_t{q} << kRansProbBits) + slot_of_rank[e.first + (x - q * e.freq)];
}

// The states of a stream's lanes, where chained streams meet (docs/rans.md, "Chained streams"): a stream
// may end in the states the next stream starts from, which then stores none of its own.
struct RansLanes {
  uint32_t state[kRansLanes];
};

// A stream's tail (docs/rans.md, "Tail"): its last `groups` groups of kRansLanes symbols, which the encoder
// codes first, from states of 1 and without renormalising, in 64-bit states, so that no lane spends the 16
// bits of starting from 2^16. `state`: the lanes' states after it, each in [2^16, 2^64), or in [1, 2^64)
// when the tail is the whole stream.
inline constexpr size_t kRansMaxTailGroups = 255;  // the count is a byte, and checking a tail stays cheap
struct RansTail {
  size_t groups = 0;
  uint64_t state[kRansLanes] = {};
};

// Whether a stream of n symbols carries the tail's fields (docs/rans.md, "Stream layout"): it has a group for
// every lane and starts from its own states rather than handing them on to a next stream.
inline bool RansHasTailField(size_t n, bool hands_states_on) { return !hands_states_on && n >= kRansLanes; }

// How many of a stream's n symbols come before a tail of tail_groups groups: those coded with renormalising.
inline size_t RansSymbolsBeforeTail(size_t n, size_t tail_groups) {
  return tail_groups == 0 ? n : ((n + kRansLanes - 1) / kRansLanes - tail_groups) * kRansLanes;
}

// Whether a stream's tail of tail_groups groups is the whole of its n symbols and stored as such: its
// header then holds the tail's 64-bit states themselves, and the stream has no words (docs/rans.md,
// "Stream layout"). Not for a stream without a header of its own, which starts from the states a previous
// stream ends in ("Chained streams"): those are 32-bit states of at least 2^16.
inline bool RansTailIsWholeStream(size_t n, size_t tail_groups, bool has_header) {
  return has_header && tail_groups > 0 && RansSymbolsBeforeTail(n, tail_groups) == 0;
}

// The tail the encoder gives symbols[0, n): the fewest groups, at most kRansMaxTailGroups, after which every
// lane's state is at least 2^16, or else, for a stream with a header of its own and at most
// kRansMaxTailGroups groups, the whole stream; none (groups = 0: the lanes start at 2^16) when
// n < kRansLanes, when a symbol has frequency 0, when a lane would leave 64 bits first, or when neither
// applies. The decoder checks a stream's tail against it, so that every stream it accepts is the encoding
// of its symbols.
RansTail RansTailOf(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period,
                    bool has_header);

// Appends the rANS stream of symbols[0, n) to *out; symbol i uses models[i % period]. Fails with
// InvalidArgument (naming the index, the symbol and the model) if a symbol has frequency 0 in its model.
// On failure *out keeps its previous contents. n == 0 appends nothing (unless end_states is set).
// Chaining (both null: a plain stream): `end_states`, the next stream's start states (its RansEncode's
// start_states), are where this stream's decoder ends instead of 2^16, and its header stores all
// kRansLanes states; with `start_states` set, the stream has no header and its decoder's start states are
// returned there instead.
Status RansEncode(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period,
                  std::vector<uint8_t>* out, const RansLanes* end_states = nullptr, RansLanes* start_states = nullptr);

// Decodes exactly n symbols from data[0, size) into out[0, n). Never reads outside data: a stream that is
// too short, has bytes left over, starts from an invalid state or ends in the wrong final state gives
// CorruptData (out[0, n) is then unspecified). A corrupted stream that still decodes yields symbols of
// non-zero frequency only. A stream does not record n or its own size: the container stores both.
// Uses AVX-512 or AVX2 when the CPU has it, unless the environment sets KVSTREAM_DISABLE_AVX512=1 or
// KVSTREAM_DISABLE_AVX2=1 (which disables both); every path produces identical results.
Status RansDecode(const uint8_t* data, size_t size, const RansModel* const* models, size_t period,
                  uint8_t* out, size_t n);

// The arguments of one RansDecode call, and for chained streams (RansEncode) where the stream starts
// (start_states: no header) or ends (end_states: written there instead of checked to be 2^16; the header
// has all kRansLanes states).
struct RansDecodeJob {
  const uint8_t* data = nullptr;
  size_t size = 0;
  const RansModel* const* models = nullptr;
  size_t period = 0;
  uint8_t* out = nullptr;
  size_t n = 0;
  const RansLanes* start_states = nullptr;
  RansLanes* end_states = nullptr;
};

// Decodes n <= kRansMaxTogether independent streams together, with exactly the results and errors of n
// RansDecode calls (statuses[i] for jobs[i]; n > kRansMaxTogether fails each with InvalidArgument). One
// stream leaves the vector gathers idle while its states wait on them; the AVX2 kernel decodes streams in
// pairs, the AVX-512 one up to four at once, so the chunk decoder hands it two layers' keys and values
// (measured: docs/rans.md).
inline constexpr size_t kRansMaxTogether = 4;
void RansDecodeTogether(const RansDecodeJob* jobs, size_t n, Status* statuses);

// How many streams this CPU's kernel decodes at once: 4 (AVX-512), 2 (AVX2) or 1 (portable).
size_t RansStreamsDecodedTogether();

// Sum over symbols of the model's cost: the ideal coded size, for the entropy-overhead figure.
// Infinity if a symbol has frequency 0 in its model.
double RansIdealBits(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period);

}  // namespace kvstream::codec
