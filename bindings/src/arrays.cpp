#include "bindings/src/arrays.h"

#include <cstring>

#include "bindings/src/errors.h"

namespace kvstream::python {
namespace {

namespace nb = nanobind;
namespace dl = nanobind::dlpack;

std::string TypeName(nb::handle value) { return Py_TYPE(value.ptr())->tp_name; }

std::string DtypeText(dl::dtype t) {
  const char* kind = "type";
  switch (static_cast<dl::dtype_code>(t.code)) {
    case dl::dtype_code::Int: kind = "int"; break;
    case dl::dtype_code::UInt: kind = "uint"; break;
    case dl::dtype_code::Float: kind = "float"; break;
    case dl::dtype_code::Bfloat: kind = "bfloat"; break;
    case dl::dtype_code::Complex: kind = "complex"; break;
    case dl::dtype_code::Bool: return "bool";
    default: break;
  }
  // Appended piece by piece: `kind + std::to_string(...)` trips GCC 12's -Wrestrict false positive.
  std::string text = kind;
  text += std::to_string(t.bits);
  if (t.lanes != 1) {
    text += "x";
    text += std::to_string(t.lanes);
  }
  return text;
}

bool DTypeOf(dl::dtype t, DType* out) {
  if (t.lanes != 1) return false;
  if (t.code == static_cast<uint8_t>(dl::dtype_code::Float) && t.bits == 16) { *out = DType::kF16; return true; }
  if (t.code == static_cast<uint8_t>(dl::dtype_code::Float) && t.bits == 32) { *out = DType::kF32; return true; }
  if (t.code == static_cast<uint8_t>(dl::dtype_code::Bfloat) && t.bits == 16) { *out = DType::kBF16; return true; }
  return false;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

const char* PythonDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF16: return "float16";
    case DType::kBF16: return "bfloat16";
    case DType::kF32: return "float32";
  }
  return "unknown";
}

HostArray ImportArray(nb::handle value, const std::string& name, int ndim, Access access) {
  HostArray out;
  // Never converted: a dtype or layout the codec cannot use in place is an error, not a hidden copy.
  if (!nb::try_cast(value, out.array, /*convert=*/false)) {
    ThrowArgumentError(name, "expected an array (an object with __dlpack__ or the buffer protocol: numpy, torch), got " +
                                 TypeName(value));
  }
  const nb::ndarray<nb::ro>& a = out.array;
  if (a.device_type() != nb::device::cpu::value) {
    ThrowArgumentError(name, "the array is in device memory (DLPack device type " + std::to_string(a.device_type()) +
                                 "); this call takes host (CPU) arrays");
  }
  if (!DTypeOf(a.dtype(), &out.dtype)) {
    ThrowArgumentError(name, "dtype " + DtypeText(a.dtype()) + ", expected float16, bfloat16 or float32");
  }
  for (size_t i = 0; i < a.ndim(); ++i) {
    out.shape.push_back(static_cast<int64_t>(a.shape(i)));
    out.strides.push_back(a.stride(i));
  }
  if (static_cast<int>(a.ndim()) != ndim) {
    ThrowArgumentError(name, std::to_string(a.ndim()) + " dimensions " + ShapeText(out.shape) + ", expected " +
                                 std::to_string(ndim) +
                                 (ndim == 3 ? " ([layers][tokens][channels])" : " ([batch][kv_heads][tokens][head_dim])"));
  }
  for (int i = 0; i < ndim; ++i) {
    if (out.strides[static_cast<size_t>(i)] < 0) {
      ThrowArgumentError(name, "stride " + std::to_string(out.strides[static_cast<size_t>(i)]) + " on dimension " +
                                   std::to_string(i) + " is negative; expected non-negative strides");
    }
  }
  if (access == Access::kWrite) {
    nb::ndarray<> writable;
    if (!nb::try_cast(value, writable, /*convert=*/false)) {
      ThrowArgumentError(name, "the array is read-only; expected a writable array to decode into");
    }
    for (int i = 0; i < ndim; ++i) {
      if (out.strides[static_cast<size_t>(i)] == 0 && out.shape[static_cast<size_t>(i)] > 1) {
        ThrowArgumentError(name, "stride 0 on dimension " + std::to_string(i) +
                                     " (a broadcast view: its elements alias); expected an array that can be written");
      }
    }
  }
  out.data = const_cast<void*>(static_cast<const void*>(a.data()));
  return out;
}

KvArrays ImportKv(nb::handle value, const std::string& name, Access access, int64_t batch_index) {
  KvArrays kv;
  const bool sequence = (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr()));
  if (!sequence) {
    kv.arrays.push_back(ImportArray(value, name, 3, access));
    const HostArray& a = kv.arrays.front();
    kv.dtype = a.dtype;
    kv.layers = a.shape[0];
    kv.tokens = a.shape[1];
    kv.channels = a.shape[2];
    kv.head_dim = kv.channels;
    return kv;
  }
  kv.per_layer = true;
  const nb::sequence layers = nb::borrow<nb::sequence>(value);
  const size_t n = nb::len(layers);
  if (n == 0) ThrowArgumentError(name, "an empty sequence; expected one [batch][kv_heads][tokens][head_dim] array per layer");
  for (size_t l = 0; l < n; ++l) {
    kv.arrays.push_back(ImportArray(layers[l], name + "[" + std::to_string(l) + "]", 4, access));
  }
  const HostArray& first = kv.arrays.front();
  for (size_t l = 1; l < n; ++l) {
    const HostArray& a = kv.arrays[l];
    const std::string layer = name + "[" + std::to_string(l) + "]";
    if (a.dtype != first.dtype) {
      ThrowArgumentError(layer, std::string("dtype ") + PythonDTypeName(a.dtype) + " but " + name + "[0] is " + PythonDTypeName(first.dtype));
    }
    if (a.shape != first.shape) ThrowArgumentError(layer, "shape " + ShapeText(a.shape) + " but " + name + "[0] is " + ShapeText(first.shape));
    if (a.strides != first.strides) {
      ThrowArgumentError(layer, "strides " + ShapeText(a.strides) + " but " + name + "[0] has " + ShapeText(first.strides) +
                                    "; every layer must be laid out alike");
    }
  }
  if (batch_index < 0 || batch_index >= first.shape[0]) {
    ThrowArgumentError("batch_index", std::to_string(batch_index) + " is outside the batch of " + std::to_string(first.shape[0]) +
                                          " rows of " + name);
  }
  kv.dtype = first.dtype;
  kv.layers = static_cast<int64_t>(n);
  kv.kv_heads = first.shape[1];
  kv.tokens = first.shape[2];
  kv.head_dim = first.shape[3];
  kv.channels = kv.kv_heads * kv.head_dim;
  return kv;
}

void CheckSameShape(const KvArrays& keys, const KvArrays& values, const std::string& keys_name,
                    const std::string& values_name) {
  if (keys.per_layer != values.per_layer) {
    ThrowArgumentError(values_name, std::string(values.per_layer ? "a sequence of per-layer arrays" : "one array") + " but " +
                                        keys_name + " is " + (keys.per_layer ? "a sequence of per-layer arrays" : "one array"));
  }
  if (keys.layers != values.layers || keys.tokens != values.tokens || keys.kv_heads != values.kv_heads ||
      keys.head_dim != values.head_dim) {
    auto text = [](const KvArrays& kv) {
      return std::to_string(kv.layers) + " layers x " + std::to_string(kv.tokens) + " tokens x " + std::to_string(kv.channels) +
             " channels";
    };
    ThrowArgumentError(values_name, text(values) + " but " + keys_name + " has " + text(keys));
  }
}

TensorView ViewOf(const KvArrays& kv) {
  const HostArray& a = kv.arrays.front();
  TensorView v;
  v.data = a.data;
  v.dtype = kv.dtype;
  for (int i = 0; i < 3; ++i) {
    v.shape[i] = a.shape[static_cast<size_t>(i)];
    v.strides[i] = a.strides[static_cast<size_t>(i)];
  }
  return v;
}

TensorView DenseView(const KvArrays& kv, int64_t batch_index, std::vector<uint8_t>* storage) {
  if (!kv.per_layer) return ViewOf(kv);
  const size_t element = DTypeSize(kv.dtype);
  const int64_t L = kv.layers, T = kv.tokens, H = kv.kv_heads, D = kv.head_dim, C = kv.channels;
  storage->resize(static_cast<size_t>(L * T * C) * element);
  const std::vector<int64_t>& s = kv.arrays.front().strides;
  for (int64_t l = 0; l < L; ++l) {
    const uint8_t* layer = static_cast<const uint8_t*>(kv.arrays[static_cast<size_t>(l)].data) +
                           static_cast<size_t>(batch_index * s[0]) * element;
    for (int64_t t = 0; t < T; ++t) {
      uint8_t* row = storage->data() + static_cast<size_t>((l * T + t) * C) * element;
      for (int64_t h = 0; h < H; ++h) {
        const uint8_t* head = layer + static_cast<size_t>(h * s[1] + t * s[2]) * element;
        uint8_t* out = row + static_cast<size_t>(h * D) * element;
        if (s[3] == 1) {
          std::memcpy(out, head, static_cast<size_t>(D) * element);
          continue;
        }
        for (int64_t d = 0; d < D; ++d) std::memcpy(out + d * element, head + static_cast<size_t>(d * s[3]) * element, element);
      }
    }
  }
  return TensorView::Dense(storage->data(), kv.dtype, L, T, C);
}

KvDestination DestinationOf(const KvArrays& keys, const KvArrays& values, int64_t batch_index, int64_t position_offset) {
  KvDestination d;
  d.dtype = keys.dtype;
  d.device = Device::kHost;
  d.layers = keys.layers;
  d.positions = keys.tokens;
  d.kv_heads = keys.kv_heads;
  d.head_dim = keys.head_dim;
  d.position_offset = position_offset;
  const size_t element = DTypeSize(keys.dtype);
  const std::vector<int64_t>& s = keys.arrays.front().strides;
  auto bases = [&](const KvArrays& kv, std::vector<void*>* out) {
    for (int64_t l = 0; l < kv.layers; ++l) {
      const HostArray& a = kv.arrays[kv.per_layer ? static_cast<size_t>(l) : 0];
      const int64_t offset = kv.per_layer ? batch_index * a.strides[0] : l * a.strides[0];
      out->push_back(static_cast<uint8_t*>(a.data) + offset * static_cast<int64_t>(element));
    }
  };
  bases(keys, &d.keys);
  bases(values, &d.values);
  if (keys.per_layer) {
    d.head_stride = s[1];
    d.token_stride = s[2];
    d.dim_stride = s[3];
  } else {
    d.head_stride = keys.channels * s[2];
    d.token_stride = s[1];
    d.dim_stride = s[2];
  }
  return d;
}

ByteView::ByteView(nb::handle value, const std::string& name, Access access) {
  if (PyObject_GetBuffer(value.ptr(), &buffer_, access == Access::kWrite ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
    PyErr_Clear();
    buffer_ = Py_buffer{};
    ThrowArgumentError(name, access == Access::kWrite
                                 ? "expected a writable contiguous buffer (bytearray, a uint8 numpy array), got " + TypeName(value)
                                 : "expected bytes (bytes, bytearray, memoryview or a contiguous uint8 array), got " + TypeName(value));
  }
}

ByteView::~ByteView() {
  if (buffer_.obj != nullptr) PyBuffer_Release(&buffer_);
}

}  // namespace kvstream::python
