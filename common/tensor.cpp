// Strided view validation and scalar element access.
#include <limits>
#include <string>

#include "common/half.h"
#include "kvstream/tensor.h"

namespace kvstream {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "unknown";
}

size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

Status ValidateView(const TensorView& view, const char* what) {
  for (int i = 0; i < 3; ++i) {
    if (view.shape[i] < 0) {
      return Status::InvalidArgument(std::string(what) + ": shape[" + std::to_string(i) +
                                     "] = " + std::to_string(view.shape[i]) + " is negative");
    }
    if (view.strides[i] < 0) {
      return Status::InvalidArgument(std::string(what) + ": strides[" + std::to_string(i) +
                                     "] = " + std::to_string(view.strides[i]) + " is negative");
    }
  }
  if (view.dtype != DType::kF32 && view.dtype != DType::kF16 && view.dtype != DType::kBF16) {
    return Status::InvalidArgument(std::string(what) + ": unknown dtype " +
                                   std::to_string(static_cast<int>(view.dtype)));
  }
  if (view.shape[0] == 0 || view.shape[1] == 0 || view.shape[2] == 0) return Status::Ok();
  if (view.data == nullptr) return Status::InvalidArgument(std::string(what) + ": data is null");
  // The last element's offset must fit in a signed byte offset; this also rejects overflowing products.
  const int64_t limit = std::numeric_limits<int64_t>::max() / 8;
  int64_t last = 0;
  for (int i = 0; i < 3; ++i) {
    if (view.shape[i] > limit || (view.strides[i] != 0 && view.shape[i] - 1 > (limit - last) / view.strides[i])) {
      return Status::InvalidArgument(std::string(what) + ": shape and strides address beyond 2^60 elements");
    }
    last += (view.shape[i] - 1) * view.strides[i];
  }
  return Status::Ok();
}

TensorView SliceTokens(const TensorView& view, int64_t begin, int64_t count) {
  TensorView slice = view;
  slice.data = static_cast<char*>(view.data) + begin * view.strides[1] * static_cast<int64_t>(DTypeSize(view.dtype));
  slice.shape[1] = count;
  return slice;
}

Status CopyView(const TensorView& src, const TensorView& dst) {
  static const char* const kDims[3] = {"layers", "tokens", "channels"};
  for (int i = 0; i < 3; ++i) {
    if (src.shape[i] != dst.shape[i]) {
      return Status::InvalidArgument(std::string("copy: destination ") + kDims[i] + " = " +
                                     std::to_string(dst.shape[i]) + " but the source has " +
                                     std::to_string(src.shape[i]));
    }
  }
  for (int64_t l = 0; l < src.shape[0]; ++l)
    for (int64_t t = 0; t < src.shape[1]; ++t)
      for (int64_t c = 0; c < src.shape[2]; ++c) StoreFromFloat(dst, l, t, c, LoadAsFloat(src, l, t, c));
  return Status::Ok();
}

float LoadAsFloat(const TensorView& view, int64_t l, int64_t t, int64_t c) {
  const int64_t off = view.offset(l, t, c);
  switch (view.dtype) {
    case DType::kF32: return static_cast<const float*>(view.data)[off];
    case DType::kF16: return HalfToFloat(static_cast<const uint16_t*>(view.data)[off]);
    case DType::kBF16: return BFloat16ToFloat(static_cast<const uint16_t*>(view.data)[off]);
  }
  return 0.0f;
}

void StoreFromFloat(const TensorView& view, int64_t l, int64_t t, int64_t c, float value) {
  const int64_t off = view.offset(l, t, c);
  switch (view.dtype) {
    case DType::kF32: static_cast<float*>(view.data)[off] = value; break;
    case DType::kF16: static_cast<uint16_t*>(view.data)[off] = FloatToHalf(value); break;
    case DType::kBF16: static_cast<uint16_t*>(view.data)[off] = FloatToBFloat16(value); break;
  }
}

}  // namespace kvstream
