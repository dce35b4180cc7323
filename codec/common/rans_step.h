// The rANS per-symbol decode step, written once for the CPU decoders and the CUDA kernels.
//
// Plain integer code: no host-only calls, no exceptions, no allocation. Pointers given here are never
// dereferenced outside the ranges passed in, so a kernel keeps the CPU decoder's safety guarantees.
//
// Decode table entry (one uint32 per slot of the 2^12 slots of a model, see RansModel::decode_table()):
//   bits  0..7   symbol
//   bits  8..19  freq - 1        (freq in [1, 4096])
//   bits 20..31  slot - start    (the slot's offset inside its symbol's range, < freq)
// so that one step is x' = freq * (x >> 12) + (slot - start), with slot = x & 4095.
#pragma once

#include <cstdint>

#include "common/half.h"

namespace kvstream::codec {

inline constexpr uint32_t kRansStateLow = 1u << 16;  // states live in [2^16, 2^32)
inline constexpr uint32_t kRansSlotMask = (1u << 12) - 1;

KVSTREAM_HD uint32_t RansPackSlot(uint32_t symbol, uint32_t freq, uint32_t offset) {
  return symbol | ((freq - 1u) << 8) | (offset << 20);
}

// Looks up the slot of state x in the model's table, returns the symbol and advances x to the state the
// encoder had before coding that symbol (which may fall below kRansStateLow: renormalise next). State is
// uint32_t, or uint64_t for a stream's tail (docs/rans.md, "Tail").
template <typename State>
KVSTREAM_HD uint32_t RansDecodeSymbol(State& x, const uint32_t* slots) {
  const uint32_t e = slots[x & kRansSlotMask];
  x = static_cast<State>(((e >> 8) & kRansSlotMask) + 1u) * (x >> 12) + (e >> 20);
  return e & 0xffu;
}

KVSTREAM_HD bool RansNeedsWord(uint32_t x) { return x < kRansStateLow; }

// Renormalises a state that may have fallen below kRansStateLow by shifting in the 16-bit word (little-
// endian) at pos, advancing pos past it; a state at or above kRansStateLow is left alone and pos too.
// The caller guarantees two readable bytes at pos. One word always restores the invariant: after a step
// from x >= 2^16, x' >= 16, so x' << 16 >= 2^20.
// Branch-free: the word is needed at random (about bits-per-symbol / 16 of the time), so a branch would be
// mispredicted often (measured: the branchy form decodes at half the speed).
KVSTREAM_HD void RansRenormalise(uint32_t& x, const uint8_t*& pos) {
  const uint32_t need = RansNeedsWord(x) ? 1u : 0u;
  const uint32_t word = static_cast<uint32_t>(pos[0]) | (static_cast<uint32_t>(pos[1]) << 8);
  x = (x << (16u * need)) | (word & (0u - need));
  pos += 2u * need;
}

// One complete sequential step for one state: decode a symbol, then renormalise by reading at most one
// word from [pos, end). Returns false, leaving pos unchanged, if a word was needed but fewer than two
// bytes remain (a truncated or corrupt stream).
KVSTREAM_HD bool RansDecodeStep(uint32_t& x, const uint32_t* slots, const uint8_t*& pos, const uint8_t* end,
                                uint8_t& symbol) {
  symbol = static_cast<uint8_t>(RansDecodeSymbol(x, slots));
  if (end - pos < 2) [[unlikely]] return !RansNeedsWord(x);
  RansRenormalise(x, pos);
  return true;
}

}  // namespace kvstream::codec
