// The device operations the DevicePipeline (kvstream/device_pipeline.h) is written against: memory for
// its ring, a stream of asynchronous work (copy, decode, event) and host-side waits on events. Two
// implementations: the CUDA one (MakeCudaPipelineDevice, cuda_pipeline_device.cu) and a host one that
// runs the GPU kernels' code through the CPU launcher on a worker thread, so that CI runs every pipeline
// and stream test without a GPU (cuda/testing/host_pipeline_device.h; a test seam, not a product path).
//
// Thread-safety: the enqueueing calls (ReserveSlot, CopyToDevice, Decode, Record, ReserveEvents) come
// from one thread at a time; Wait, NativeEvent and DecodeStatus may be called from another thread
// concurrently with them (the pipeline's completion thread), DecodeStatus(slot) once for each decode of
// the slot, after an event recorded after it is done.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream::cuda {

class PipelineDevice {
 public:
  virtual ~PipelineDevice() = default;

  // Where destinations and the ring's device side live (kCuda; kHost for the host implementation), and a
  // description for telemetry ("cuda:0 NVIDIA H100 80GB HBM3").
  virtual Device memory() const = 0;
  virtual std::string name() const = 0;

  // Ring slot `slot`'s buffers, holding at least `bytes`: `staging` in pinned host memory (payloads land
  // there), `device` in memory() (the decoder reads there). Grow-only and kept for the device's life; a
  // Reserve that grows a slot invalidates its previous pointers. The slot must be idle.
  virtual Status ReserveSlot(int slot, size_t bytes, uint8_t** staging, uint8_t** device) = 0;
  // Events 0 .. count-1 exist (grow-only). Recording an event makes it pending until the stream reaches
  // it, as cudaEventRecord does; Wait is only asked of recorded events.
  virtual Status ReserveEvents(int count) = 0;

  // Stream-ordered, asynchronous: each runs after everything enqueued before it.
  virtual Status CopyToDevice(uint8_t* device, const uint8_t* staging, size_t bytes) = 0;
  // Decodes one chunk (bytes in memory(), host_header readable now) with slot `slot`'s decoder scratch.
  virtual Status Decode(int slot, const GpuChunk& chunk, const KvDestination& destination) = 0;
  virtual Status Record(int event) = 0;

  // Host side.
  virtual Status Wait(int event) = 0;
  virtual void* NativeEvent(int event) = 0;  // the cudaEvent_t, or null on the host implementation
  // The result of slot `slot`'s oldest decode not reported yet (several may be pending on a slot: the
  // parts of its chunk), once an event recorded after it is done.
  virtual Status DecodeStatus(int slot) = 0;
};

// On the current CUDA device, work on `stream` (the caller's: what it enqueues after a chunk's decode is
// ordered after it), `profile`'s tables uploaded once. kUnsupported without CUDA or without a device.
Result<std::unique_ptr<PipelineDevice>> MakeCudaPipelineDevice(std::shared_ptr<const Profile> profile, CudaStream stream,
                                                               const DecodeLimits& limits);

}  // namespace kvstream::cuda
