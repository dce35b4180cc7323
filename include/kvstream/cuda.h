// kvstream/cuda.h — the GPU decoder: chunks in GPU memory decoded on the GPU into a KvDestination.
//
// Contract:
//   * Every chunk the CPU decoder (kvstream/codec.h) accepts and the GPU decoder supports decodes to the
//     same bits in every destination layout and dtype: the format defines one reconstruction, and the
//     kernels compute it with the codec's own per-element code (codec/common).
//   * Every KV level and scheme: fp16, int8, channel-uniform (profile tables, in-chunk banks, sink rows,
//     escapes), transform and predicted (fine rows, escapes, sink rows). Text chunks are refused: their KV
//     is recomputed by a model, not decoded.
//   * Chunk headers are validated on the host, from a host copy of each header (GpuChunk::host_header),
//     with the CPU decoder's checks and messages; no device-to-host read is needed to plan a decode. The
//     kernels read only the chunk bytes they were given and check each segment's own fields; a segment
//     that fails is reported by Finish (naming the chunk and segment), the other segments are still
//     written. Segment CRCs are not checked on the GPU: verify them when the payload arrives.
//   * This header is usable from builds without CUDA; there every call returns kUnsupported and
//     GpuAvailable says why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/kv_destination.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

// Whether this build has the GPU decoder and a CUDA device is present; otherwise *why (if given) says why.
bool GpuAvailable(std::string* why = nullptr);

// A cudaStream_t, as an opaque handle; null is the default stream.
using CudaStream = void*;

// Device memory for callers without a CUDA runtime of their own (the command line, the tests): `bytes`
// on device `ordinal` (made the calling thread's current device), zero-filled, freed with the last
// reference. kUnsupported without CUDA or a device, kResourceExhausted when the device is full.
Result<std::shared_ptr<void>> AllocateDeviceMemory(size_t bytes, int ordinal = 0);
// Copies `bytes` from device to host memory, after everything enqueued on the device so far.
Status CopyDeviceToHost(void* host, const void* device, size_t bytes);

// A context's KV in GPU memory in the codec's layout: contiguous fp16 [layers][tokens][channels] keys,
// then the values, in one zero-filled allocation (AllocateDeviceMemory) on device `ordinal`;
// `destination` describes it for the decoders and Receiver::Fetch.
struct DeviceKv {
  std::shared_ptr<void> memory;
  TensorView keys, values;  // Device::kCuda views into `memory`
  KvDestination destination;

  static Result<DeviceKv> Allocate(int64_t layers, int64_t tokens, int64_t channels, int ordinal = 0);
};

// One chunk to decode: its bytes in device memory, and a host copy of at least its header (the fixed
// header, segment index, fine-row map and CRC: ChunkInfo::header_bytes; the whole chunk also works).
struct GpuChunk {
  const uint8_t* bytes = nullptr;
  size_t size = 0;
  const uint8_t* host_header = nullptr;
  size_t host_header_size = 0;
  // The layers to decode, as DecodeOptions::layer_begin/layer_end (kvstream/codec.h): only their
  // segments' bytes are read (a predicted chunk's [0, layer_end)).
  int64_t layer_begin = 0;
  int64_t layer_end = -1;
};

// A Profile's tables uploaded to the current CUDA device once, for every decode that references it.
class DeviceProfile {
 public:
  static Result<DeviceProfile> Upload(const Profile& profile);
  DeviceProfile(DeviceProfile&&) noexcept;
  DeviceProfile& operator=(DeviceProfile&&) noexcept;
  ~DeviceProfile();

  const Profile& profile() const;
  size_t device_bytes() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit DeviceProfile(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decodes batches of chunks on one CUDA stream, keeping its device scratch between batches. Decode
// enqueues a fixed sequence of five kernels for the whole batch (any number of chunks of any contexts,
// every one into `destination` at its own positions) and returns without waiting for the device (its
// uploads and the error download go through pinned memory). Finish waits for that batch only (not for
// later work on the stream) and reports the first segment the kernels refused; a Decode while a batch is
// pending finishes it first. Not thread-safe; several decoders may share a stream, each with its own
// scratch, so that batches pipeline without waiting for each other.
class GpuDecoder {
 public:
  struct Options {
    DecodeLimits limits;
  };
  static Result<GpuDecoder> Create(const Options& options);
  static Result<GpuDecoder> Create() { return Create(Options{}); }
  GpuDecoder(GpuDecoder&&) noexcept;
  GpuDecoder& operator=(GpuDecoder&&) noexcept;
  ~GpuDecoder();

  // `profile` is required when a chunk references one (its hash must match); `destination` must be in
  // device memory. The chunk bytes and the destination must stay valid until Finish returns.
  Status Decode(const std::vector<GpuChunk>& chunks, const DeviceProfile* profile, const KvDestination& destination,
                CudaStream stream);
  Status Finish();

  struct Impl;

 private:
  explicit GpuDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Decode then Finish with a decoder of its own: the one-call form.
Status DecodeChunks(const std::vector<GpuChunk>& chunks, const DeviceProfile* profile, const KvDestination& destination,
                    CudaStream stream);

}  // namespace kvstream
