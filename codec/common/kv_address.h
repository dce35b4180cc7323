// The element a decoded value goes to, written once for the CPU decoder and the CUDA kernels: a plain
// copy of a KvDestination (kvstream/kv_destination.h) whose per-layer bases sit in one array of 2 x layers
// pointers (keys' layers, then values'), so that it can be handed to a kernel as it is.
#pragma once

#include <cstdint>
#include <vector>

#include "common/half.h"
#include "kvstream/kv_destination.h"
#include "kvstream/tensor.h"

namespace kvstream::codec {

struct KvAddress {
  DType dtype;
  int32_t layers;
  int32_t head_dim;
  int64_t token_stride, head_stride, dim_stride;
  int64_t position_offset;
  int64_t positions;
  int64_t block_size, block_stride, num_blocks;  // block_size 0: not paged
  void* const* bases;                            // [kv][layer]
  const int32_t* block_table;
};

// The element offset of (position, channel) within its layer's base, or -1 when the position lies outside
// the destination or its block-table entry outside the blocks (a hostile or stale table).
KVSTREAM_HD int64_t KvElementOffset(const KvAddress& a, int64_t context_position, int64_t channel) {
  const int64_t p = context_position - a.position_offset;
  if (p < 0 || p >= a.positions) return -1;
  const int64_t head = channel / a.head_dim, dim = channel - head * a.head_dim;
  int64_t offset = head * a.head_stride + dim * a.dim_stride;
  if (a.block_size > 0) {
    const int64_t block = a.block_table[p / a.block_size];
    if (block < 0 || block >= a.num_blocks) return -1;
    return offset + block * a.block_stride + (p % a.block_size) * a.token_stride;
  }
  return offset + p * a.token_stride;
}

// Stores one value of (kv, layer) at an element offset, rounding once to the destination's dtype.
KVSTREAM_HD void KvStore(const KvAddress& a, int kv, int layer, int64_t offset, float value) {
  void* base = a.bases[kv * a.layers + layer];
  switch (a.dtype) {
    case DType::kF32: static_cast<float*>(base)[offset] = value; break;
    case DType::kF16: static_cast<uint16_t*>(base)[offset] = FloatToHalf(value); break;
    case DType::kBF16: static_cast<uint16_t*>(base)[offset] = FloatToBFloat16(value); break;
  }
}

// Stores the 16 bits of a value already in the destination's 16-bit dtype.
KVSTREAM_HD void KvStoreBits16(const KvAddress& a, int kv, int layer, int64_t offset, uint16_t bits) {
  static_cast<uint16_t*>(a.bases[kv * a.layers + layer])[offset] = bits;
}

// The bases of a destination in KvAddress order (keys' layers, then values').
std::vector<void*> JoinedBases(const KvDestination& destination);

// The address of a validated destination whose joined bases are at `bases` and block table at
// `block_table` (both in the memory the kernel or loop that uses it reads: host or device).
KvAddress MakeKvAddress(const KvDestination& destination, void* const* bases, const int32_t* block_table);

}  // namespace kvstream::codec
