// kvstream/tensor.h — non-owning strided views of KV tensors.
//
// A KV tensor crosses every kvstream API as a view: a pointer, a dtype, a shape [layers][tokens][channels]
// (channels = kv_heads * head_dim) and strides counted in elements, so a caller's layout (one buffer per
// layer, interleaved K/V, a padded engine cache) is read and written in place. A view never owns memory;
// the caller keeps the buffer alive for as long as a call that received the view runs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvstream/status.h"

namespace kvstream {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2 };
enum class Device : uint8_t { kHost = 0, kCuda = 1 };

const char* DTypeName(DType dtype);
size_t DTypeSize(DType dtype);

// Rank-3 view [layers][tokens][channels]. strides[i] is the distance in elements between consecutive
// indices of dimension i; a dense row-major tensor has strides {tokens*channels, channels, 1}.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Device device = Device::kHost;
  int64_t shape[3] = {0, 0, 0};
  int64_t strides[3] = {0, 0, 0};

  int64_t layers() const { return shape[0]; }
  int64_t tokens() const { return shape[1]; }
  int64_t channels() const { return shape[2]; }
  int64_t numel() const { return shape[0] * shape[1] * shape[2]; }
  // Element offset of [layer][token][channel], to be scaled by DTypeSize.
  int64_t offset(int64_t l, int64_t t, int64_t c) const {
    return l * strides[0] + t * strides[1] + c * strides[2];
  }
  bool is_dense() const {
    return strides[2] == 1 && strides[1] == shape[2] && strides[0] == shape[1] * shape[2];
  }

  static TensorView Dense(void* data, DType dtype, int64_t layers, int64_t tokens, int64_t channels) {
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.shape[0] = layers;
    v.shape[1] = tokens;
    v.shape[2] = channels;
    v.strides[0] = tokens * channels;
    v.strides[1] = channels;
    v.strides[2] = 1;
    return v;
  }
};

// Checks that a view is usable: non-null data for a non-empty shape, non-negative extents, and strides
// that keep every element inside an addressable range. `what` names the view in the error ("keys").
Status ValidateView(const TensorView& view, const char* what);

// Tokens [begin, begin + count) of a view, sharing its memory. The range must lie inside the view.
TensorView SliceTokens(const TensorView& view, int64_t begin, int64_t count);

// Copies every element of `src` into `dst` (host views of the same shape), converting between dtypes
// with round-to-nearest-even. Fails, naming the dimension, when the shapes differ.
Status CopyView(const TensorView& src, const TensorView& dst);

// Reads element [l][t][c] of a host view as float, whatever its dtype.
float LoadAsFloat(const TensorView& view, int64_t l, int64_t t, int64_t c);
// Writes a float into element [l][t][c] of a host view, rounding to its dtype (round to nearest even).
void StoreFromFloat(const TensorView& view, int64_t l, int64_t t, int64_t c, float value);

}  // namespace kvstream
