// kvstream/kv_destination.h — where decoded KV goes: an engine's cache, described in place.
//
// A KvDestination says, for every (layer, K/V, context position, channel), which element of the caller's
// memory receives the decoded value. It covers the layouts serving engines keep, and both decoders
// (DecodeChunkInto on the CPU, DecodeChunks on the GPU: kvstream/cuda.h) write through it:
//   * Contiguous: per layer [positions][channels] (the codec's [layers][tokens][channels] is one base
//     pointer per layer, a layer's stride apart);
//   * HuggingFace: per layer [batch][kv_heads][positions][head_dim], one tensor per layer, one batch row;
//   * Paged (vLLM): per layer [num_blocks][block_size][kv_heads][head_dim] for K and for V (or the joined
//     [2][num_blocks][block_size][kv_heads][head_dim]: K's base and V's base one plane apart), position p in
//     block block_table[p / block_size], row p % block_size.
// Channel c of a chunk is head c / head_dim, element c % head_dim. A chunk's token t lands at position
// token_begin + t - position_offset (a destination that holds a window of the context sets the offset).
// Every pointer (bases, block table) lives in `device`'s memory. A destination never owns memory.
#pragma once

#include <cstdint>
#include <vector>

#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

struct KvDestination {
  DType dtype = DType::kF16;
  Device device = Device::kHost;
  int64_t layers = 0;
  int64_t positions = 0;        // positions the destination holds (paged: block_table_size * block_size)
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  std::vector<void*> keys;      // per layer: where position 0 (paged: block 0), head 0, element 0 is
  std::vector<void*> values;
  // Distances in elements. Paged: token_stride moves a row within a block, block_stride a block.
  int64_t token_stride = 0;
  int64_t head_stride = 0;
  int64_t dim_stride = 1;
  int64_t position_offset = 0;  // context position of the destination's position 0
  // Paged layouts only (block_size 0: not paged).
  int64_t block_size = 0;
  int64_t block_stride = 0;
  int64_t num_blocks = 0;                // blocks per layer; every table entry must be below it
  const int32_t* block_table = nullptr;  // block_table_size entries, in `device` memory
  int64_t block_table_size = 0;

  bool paged() const { return block_size > 0; }
  int64_t channels() const { return kv_heads * head_dim; }

  // The codec's layout: keys and values are [layers][tokens][channels] views (dense channels, any layer
  // and token strides), tokens = the positions they hold.
  static Result<KvDestination> Contiguous(const TensorView& keys, const TensorView& values, int64_t kv_heads);
  // Hugging Face's DynamicCache: per layer a [batch][kv_heads][positions][head_dim] tensor, dense, written
  // at batch row `batch_index` of `batch` (InvalidArgument outside [0, batch)).
  static Result<KvDestination> HuggingFace(std::vector<void*> keys, std::vector<void*> values, DType dtype, Device device,
                                   int64_t batch, int64_t batch_index, int64_t kv_heads, int64_t positions,
                                   int64_t head_dim);
  // vLLM's paged cache: per layer dense [num_blocks][block_size][kv_heads][head_dim] K and V blocks.
  static KvDestination Paged(std::vector<void*> keys, std::vector<void*> values, DType dtype, Device device,
                             int64_t num_blocks, int64_t block_size, int64_t kv_heads, int64_t head_dim,
                             const int32_t* block_table, int64_t block_table_size);
};

// Checks the description: dtype fp16/bf16/fp32, positive sizes, a base per layer for K and for V,
// non-negative strides, a block table for a paged layout. `what` names it in the error.
Status ValidateDestination(const KvDestination& destination, const char* what);

}  // namespace kvstream
