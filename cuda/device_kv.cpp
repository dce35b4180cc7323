// DeviceKv::Allocate (kvstream/cuda.h): plain C++ over AllocateDeviceMemory, in builds with and without
// CUDA (without, the allocation says why it cannot be made).
#include "kvstream/cuda.h"

namespace kvstream {

Result<DeviceKv> DeviceKv::Allocate(int64_t layers, int64_t tokens, int64_t channels, int ordinal) {
  if (layers <= 0 || tokens <= 0 || channels <= 0) {
    return Status::InvalidArgument("device KV of " + std::to_string(layers) + " layers, " + std::to_string(tokens) +
                                   " tokens, " + std::to_string(channels) + " channels");
  }
  DeviceKv kv;
  const size_t plane = static_cast<size_t>(layers * tokens * channels) * sizeof(uint16_t);
  KVSTREAM_ASSIGN_OR_RETURN(kv.memory, AllocateDeviceMemory(2 * plane, ordinal));
  auto* base = static_cast<uint8_t*>(kv.memory.get());
  kv.keys = TensorView::Dense(base, DType::kF16, layers, tokens, channels);
  kv.values = TensorView::Dense(base + plane, DType::kF16, layers, tokens, channels);
  kv.keys.device = kv.values.device = Device::kCuda;
  KVSTREAM_ASSIGN_OR_RETURN(kv.destination, KvDestination::Contiguous(kv.keys, kv.values, 1));
  return kv;
}

}  // namespace kvstream
