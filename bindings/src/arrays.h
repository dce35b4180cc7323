// Python arrays as kvstream views, without copies: anything with __dlpack__ or the buffer protocol (numpy,
// torch CPU tensors), fp16, bf16 or fp32, any non-negative strides. K or V is either one
// [layers][tokens][channels] array or a sequence of per-layer Hugging Face [batch][kv_heads][tokens][head_dim]
// arrays. Every check names the argument and what it expected, and runs before anything is read or written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/vector.h>

#include "bindings/src/errors.h"
#include "kvstream/kv_destination.h"
#include "kvstream/tensor.h"

namespace kvstream::python {

enum class Access { kRead, kWrite };

// "float16", "bfloat16", "float32": a dtype as numpy and torch name it.
const char* PythonDTypeName(DType dtype);

// One imported array; `array` keeps the caller's memory alive (and, for the buffer protocol, exported).
struct HostArray {
  nanobind::ndarray<nanobind::ro> array;
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements
};

// `value` as a host array of `ndim` dimensions. kWrite also refuses read-only arrays and arrays with a
// zero stride on a dimension longer than 1 (broadcast views, whose elements alias).
HostArray ImportArray(nanobind::handle value, const std::string& name, int ndim, Access access);

// K or V as the caller passed it.
struct KvArrays {
  bool per_layer = false;           // a sequence of Hugging Face layers, else one [L][T][C] array
  std::vector<HostArray> arrays;    // one, or one per layer (same dtype, shape and strides)
  DType dtype = DType::kF32;
  int64_t layers = 0;
  int64_t tokens = 0;
  int64_t channels = 0;
  int64_t kv_heads = 1;             // per_layer: the arrays' dimension 1
  int64_t head_dim = 0;             // per_layer: dimension 3; else channels
};

// `batch_index` picks the row of a per-layer array's batch dimension (checked against it).
KvArrays ImportKv(nanobind::handle value, const std::string& name, Access access, int64_t batch_index);

// Checks that keys and values (named `keys_name`, `values_name`) have the same form and shape.
void CheckSameShape(const KvArrays& keys, const KvArrays& values, const std::string& keys_name,
                    const std::string& values_name);

// The [layers][tokens][channels] view of a single array (not per_layer).
TensorView ViewOf(const KvArrays& kv);

// Per-layer arrays gathered into `storage` as one dense [layers][tokens][channels] view of their dtype:
// the one copy a Hugging Face layout costs, since a head-major layer is not a strided [tokens][channels]
// view. Single arrays are returned as ViewOf, uncopied.
TensorView DenseView(const KvArrays& kv, int64_t batch_index, std::vector<uint8_t>* storage);

// Keys and values as a KvDestination (per-layer bases and strides; a single array is one head of
// `channels`), its position 0 at context position `position_offset`.
KvDestination DestinationOf(const KvArrays& keys, const KvArrays& values, int64_t batch_index, int64_t position_offset);

// One number per token of a context (token ids, importance), or empty for None.
template <typename T>
std::vector<T> PerToken(nanobind::handle value, const std::string& name, int64_t tokens) {
  if (value.is_none()) return {};
  std::vector<T> out;
  if (!nanobind::try_cast(value, out)) {
    ThrowArgumentError(name, std::string("expected a sequence of numbers, got ") + Py_TYPE(value.ptr())->tp_name);
  }
  if (static_cast<int64_t>(out.size()) != tokens) {
    ThrowArgumentError(name, std::to_string(out.size()) + " values but the KV has " + std::to_string(tokens) + " tokens");
  }
  return out;
}

// Bytes of a chunk (bytes, bytearray, memoryview, a uint8 array: anything exporting a contiguous buffer),
// held exported for as long as this lives.
class ByteView {
 public:
  // kWrite: a writable buffer (bytearray, a numpy uint8 array), else any bytes-like object.
  ByteView(nanobind::handle value, const std::string& name, Access access = Access::kRead);
  ~ByteView();
  ByteView(const ByteView&) = delete;
  ByteView& operator=(const ByteView&) = delete;
  const uint8_t* data() const { return static_cast<const uint8_t*>(buffer_.buf); }
  uint8_t* writable_data() const { return static_cast<uint8_t*>(buffer_.buf); }  // kWrite only
  size_t size() const { return static_cast<size_t>(buffer_.len); }

 private:
  Py_buffer buffer_{};
};

}  // namespace kvstream::python
