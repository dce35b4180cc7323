// Owned tensors in any dtype and stride pattern, for the codec tests.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvstream/tensor.h"

namespace kvstream::testing {

enum class Layout { kDense, kPadded, kChannelMajor, kChannelStride2 };
inline const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kDense: return "dense";
    case Layout::kPadded: return "padded";
    case Layout::kChannelMajor: return "channel-major";
    case Layout::kChannelStride2: return "channel-stride-2";
  }
  return "?";
}
inline constexpr Layout kAllLayouts[] = {Layout::kDense, Layout::kPadded, Layout::kChannelMajor, Layout::kChannelStride2};
inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

struct Tensor {
  std::vector<uint8_t> bytes;
  TensorView view;

  Tensor() = default;
  Tensor(DType dtype, int64_t layers, int64_t tokens, int64_t channels, Layout layout) {
    int64_t s[3] = {0, 0, 0};
    switch (layout) {
      case Layout::kDense: s[0] = tokens * channels; s[1] = channels; s[2] = 1; break;
      case Layout::kPadded: s[0] = tokens * (channels + 5) + 7; s[1] = channels + 5; s[2] = 1; break;
      case Layout::kChannelMajor: s[0] = tokens * channels; s[1] = 1; s[2] = tokens; break;
      case Layout::kChannelStride2: s[0] = tokens * channels * 2; s[1] = channels * 2; s[2] = 2; break;
    }
    const int64_t elems = (layers - 1) * s[0] + (tokens - 1) * s[1] + (channels - 1) * s[2] + 1;
    // Filled with a pattern so that an element the decoder forgot to write is noticed.
    bytes.assign(static_cast<size_t>(elems) * DTypeSize(dtype), 0x7b);
    view.data = bytes.data();
    view.dtype = dtype;
    view.shape[0] = layers;
    view.shape[1] = tokens;
    view.shape[2] = channels;
    for (int i = 0; i < 3; ++i) view.strides[i] = s[i];
  }
  Tensor(const Tensor& o) : bytes(o.bytes), view(o.view) { view.data = bytes.data(); }
  Tensor& operator=(const Tensor& o) {
    bytes = o.bytes;
    view = o.view;
    view.data = bytes.data();
    return *this;
  }

  float at(int64_t l, int64_t t, int64_t c) const { return LoadAsFloat(view, l, t, c); }
  // Raw bits of an element (for bit-exact comparisons).
  uint32_t bits(int64_t l, int64_t t, int64_t c) const {
    const int64_t off = view.offset(l, t, c) * static_cast<int64_t>(DTypeSize(view.dtype));
    uint32_t b = 0;
    std::memcpy(&b, bytes.data() + off, DTypeSize(view.dtype));
    return b;
  }
};

// A copy of `src` (tokens [t0, t0 + n)) in the given dtype and layout, rounding once.
inline Tensor CopyOf(const TensorView& src, DType dtype, Layout layout, int64_t t0 = 0, int64_t n = -1) {
  if (n < 0) n = src.tokens() - t0;
  Tensor out(dtype, src.layers(), n, src.channels(), layout);
  EXPECT_TRUE(CopyView(SliceTokens(src, t0, n), out.view).ok());
  return out;
}

}  // namespace kvstream::testing
