// CUDA runtime errors as Status values, and grow-only buffers of device or pinned host memory: shared by
// the GPU decoder (gpu_decoder.cu) and the pipeline's CUDA device (cuda_pipeline_device.cu). CUDA only.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kvstream/status.h"

namespace kvstream::cuda {

inline Status CudaError(cudaError_t e, const char* call) {
  return Status::Internal(std::string("CUDA: ") + call + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

// Returns the call's error as a Status naming the call.
#define KVSTREAM_CUDA(call)                                                       \
  do {                                                                            \
    const cudaError_t kvstream_e = (call);                                        \
    if (kvstream_e != cudaSuccess) return ::kvstream::cuda::CudaError(kvstream_e, #call); \
  } while (0)

inline cudaError_t AllocateDevice(void** p, size_t size) { return cudaMalloc(p, size); }
inline cudaError_t AllocatePinned(void** p, size_t size) { return cudaMallocHost(p, size); }

// An allocation that grows, never shrinks, and frees itself: device memory (DeviceBuffer) or pinned host
// memory (PinnedBuffer: copies from and to it never wait for the host, pageable ones may).
template <cudaError_t (*Allocate)(void**, size_t), cudaError_t (*Free)(void*)>
class GrowingBuffer {
 public:
  GrowingBuffer() = default;
  GrowingBuffer(const GrowingBuffer&) = delete;
  GrowingBuffer& operator=(const GrowingBuffer&) = delete;
  GrowingBuffer(GrowingBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  ~GrowingBuffer() {
    if (data_) Free(data_);
  }
  Status Reserve(size_t size) {
    if (size <= size_) return Status::Ok();
    if (data_) Free(data_);
    data_ = nullptr;
    size_ = 0;
    KVSTREAM_CUDA(Allocate(&data_, size));
    size_ = size;
    return Status::Ok();
  }
  template <typename T = uint8_t>
  T* get() const { return static_cast<T*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

using DeviceBuffer = GrowingBuffer<AllocateDevice, cudaFree>;
using PinnedBuffer = GrowingBuffer<AllocatePinned, cudaFreeHost>;

}  // namespace kvstream::cuda
