// Destinations in every layout the decoders write (kvstream/kv_destination.h), over zero-filled host
// storage of their own: shared by the CPU launcher's test and the GPU check, which mirrors the storage in
// device memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/kv_destination.h"

namespace kvstream::testing {

// A destination in one of the layouts, over its own zero-filled storage.
struct Layout {
  std::string name;
  DType dtype;
  std::vector<std::vector<uint8_t>> storage;  // per buffer
  std::vector<int32_t> block_table;
  KvDestination destination;
};

// positions: the context's length; the chunk's tokens start at info.token_begin.
inline Layout MakeLayout(const std::string& kind, DType dtype, const ChunkInfo& info, int64_t kv_heads) {
  Layout l;
  l.name = kind + "/" + DTypeName(dtype);
  l.dtype = dtype;
  const int64_t L = info.layers, C = info.channels, head_dim = C / kv_heads;
  const int64_t positions = info.token_begin + info.tokens + 3;  // room past the chunk: nothing may land there
  const size_t es = DTypeSize(dtype);
  std::vector<void*> keys, values;
  if (kind == "contiguous") {
    l.storage.assign(2, std::vector<uint8_t>(static_cast<size_t>(L * positions * C) * es));
    const TensorView k = TensorView::Dense(l.storage[0].data(), dtype, L, positions, C);
    const TensorView v = TensorView::Dense(l.storage[1].data(), dtype, L, positions, C);
    l.destination = KvDestination::Contiguous(k, v, kv_heads).value();
  } else if (kind == "huggingface") {  // batch of 2, the context in row 1
    for (int64_t i = 0; i < 2 * L; ++i) l.storage.emplace_back(static_cast<size_t>(2 * kv_heads * positions * head_dim) * es);
    for (int64_t i = 0; i < L; ++i) keys.push_back(l.storage[i].data()), values.push_back(l.storage[L + i].data());
    l.destination = KvDestination::HuggingFace(keys, values, dtype, Device::kHost, 2, 1, kv_heads, positions, head_dim).value();
  } else {  // paged, blocks of 16 in a shuffled order; "paged-joined": K and V planes of one buffer per layer
    const int64_t block = 16, table = (positions + block - 1) / block, blocks = table + 5;
    l.block_table.resize(static_cast<size_t>(table));
    std::vector<int32_t> order(static_cast<size_t>(blocks));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::mt19937 rng(7);
    std::shuffle(order.begin(), order.end(), rng);
    std::copy(order.begin(), order.begin() + table, l.block_table.begin());
    const size_t plane = static_cast<size_t>(blocks * block * kv_heads * head_dim) * es;
    if (kind == "paged-joined") {
      for (int64_t i = 0; i < L; ++i) l.storage.emplace_back(2 * plane);
      for (int64_t i = 0; i < L; ++i) keys.push_back(l.storage[i].data()), values.push_back(l.storage[i].data() + plane);
    } else {
      for (int64_t i = 0; i < 2 * L; ++i) l.storage.emplace_back(plane);
      for (int64_t i = 0; i < L; ++i) keys.push_back(l.storage[i].data()), values.push_back(l.storage[L + i].data());
    }
    l.destination = KvDestination::Paged(keys, values, dtype, Device::kHost, blocks, block, kv_heads, head_dim,
                                         l.block_table.data(), table);
  }
  return l;
}

// The kv_heads a golden chunk's channels split into (any divisor works for the layouts; 2 when it can).
inline int64_t HeadsOf(const ChunkInfo& info) { return info.channels % 2 == 0 ? 2 : 1; }

inline const char* const kLayouts[] = {"contiguous", "huggingface", "paged", "paged-joined"};

}  // namespace kvstream::testing
