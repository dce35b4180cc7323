// kvstream/device_pipeline.h — chunk payloads, as they arrive, to decoded KV in GPU memory.
//
// A DevicePipeline decodes one context's chunks into a KvDestination in device memory while later chunks
// are still arriving. Payloads land in a bounded ring of slots (pinned host staging, each with a device
// buffer): the caller Acquires a slot, receives a payload into its staging memory, and Submits it; the
// pipeline checks the payload's CRC32C on the host, then enqueues the host-to-device copy, the decode and
// a readiness event on the CUDA stream, and returns without waiting for the device. A slot is free again
// once its decode has finished; Acquire waits (bounded) while the ring is full: that is the backpressure
// that keeps a fast link from running ahead of the GPU. A completion thread reports each chunk, in
// submission order, to the ChunkDone callback.
//
// Readiness: each chunk has an event (ChunkEvent, a cudaEvent_t) and each layer too (LayerEvent): an
// engine makes its stream wait on layer l's event before attention on layer l. When chunks come whole,
// every layer is ready with the last chunk; when they come in parts, layers first (SubmitPart), layer l
// is ready once every chunk's part holding it is decoded.
//
// Contract: the destination, and the profile, must outlive the pipeline. Acquire/Submit/Release are called
// from one thread at a time; the readiness calls from any thread. The destructor waits for everything it
// enqueued. Errors never lose what was decoded: a chunk that fails (CRC, header, a refused segment) is
// reported and the other chunks are still written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"
#include "kvstream/profile.h"
#include "kvstream/status.h"

namespace kvstream {
namespace cuda {
class PipelineDevice;  // the device operations the pipeline runs on (cuda/pipeline_device.h)
}

struct DevicePipelineOptions {
  int ring_slots = 4;               // payloads received, being copied or being decoded at once
  // Every slot holds a payload this large (the Receiver sets the manifest's largest chunk).
  uint64_t max_chunk_bytes = uint64_t{32} << 20;
  // Acquire on a full ring, and the Wait calls, fail with kTimeout after this long.
  int wait_timeout_ms = 10000;
  DecodeLimits limits;
};

class DevicePipeline {
 public:
  // A chunk's decode finished, every layer (status Ok), or failed; called once per chunk. decode_s: from
  // its first Submit (or the previous completion, whichever is later) to its completion, as the host saw
  // it.
  using ChunkDone = std::function<void(int chunk, const Status& status, double decode_s)>;

  // On the current CUDA device, on `stream`, with `profile`'s tables uploaded (null: chunks carry their
  // own). kUnsupported without CUDA or a device, with the reason.
  static Result<std::unique_ptr<DevicePipeline>> Create(const DevicePipelineOptions& options,
                                                        std::shared_ptr<const Profile> profile, CudaStream stream,
                                                        const KvDestination& destination, int num_chunks,
                                                        ChunkDone on_done = {});
  // On a given device (the Receiver's, kept across fetches; a test's host device). Its events and slots
  // are this pipeline's until it is destroyed: one pipeline per device at a time.
  static Result<std::unique_ptr<DevicePipeline>> Create(const DevicePipelineOptions& options,
                                                        std::shared_ptr<cuda::PipelineDevice> device,
                                                        const KvDestination& destination, int num_chunks,
                                                        ChunkDone on_done = {});
  ~DevicePipeline();
  DevicePipeline(const DevicePipeline&) = delete;
  DevicePipeline& operator=(const DevicePipeline&) = delete;

  // A free slot, whose staging memory (pinned host) receives one payload of up to max_chunk_bytes.
  struct Slot {
    int index = -1;
    uint8_t* data = nullptr;
    size_t capacity = 0;
  };
  Result<Slot> Acquire();
  // The payload of chunk `chunk` (its first `size` bytes of slot.data) arrived with CRC32C `crc32c`.
  // kCorruptData on a mismatch (the slot is free again: re-request the chunk). Otherwise Ok: its copy and
  // decode are enqueued, and its result, a refused header included, goes to ChunkDone and readiness.
  // kInvalidArgument for a chunk outside the context, one submitted already, or a size over the slot's.
  // Submit always takes the slot: after an error it is free again.
  Status Submit(const Slot& slot, int chunk, size_t size, uint32_t crc32c);
  // Part of a chunk (layer-major sending): its layers [layer_begin, layer_end) (-1: through the last),
  // whose bytes [offset, offset + size) of the chunk's `chunk_bytes` arrived in the chunk's slot at the
  // same offsets, with CRC32C `crc32c` over them. A chunk's first part holds its header (offset 0) and
  // takes a slot from Acquire; its later parts come in that slot (the chunk's segments are in layer order,
  // so each part is one byte range). Their decodes are enqueued as they arrive, the layers ready as they
  // are decoded; the slot returns to the ring when every layer of the chunk is decoded (or it failed:
  // then nothing more may be received into it). CRC mismatch: kCorruptData, re-request the part (a first
  // part's slot is free again). A submitted part's bytes must not be written again while its chunk holds
  // the slot (they may still be on their way to the device). Submit is the one-part form: the whole
  // chunk, every layer.
  Status SubmitPart(const Slot& slot, int chunk, uint64_t chunk_bytes, uint64_t offset, size_t size, uint32_t crc32c,
                    int64_t layer_begin, int64_t layer_end);
  // Gives a slot back unused (a cancelled or failed receive of a chunk's first part).
  void Release(const Slot& slot);

  // Readiness. Ready: the chunk (layer) is decoded, or its decode failed (the error).
  Result<bool> ChunkReady(int chunk);
  Status WaitChunk(int chunk);
  Result<bool> LayerReady(int layer);
  Status WaitLayer(int layer);
  // The CUDA events, recorded on the stream after the chunk's (layer's) decode; null until every part of
  // the chunk (every chunk's part holding the layer) is submitted, and always null on the host test
  // device. Valid while the pipeline lives.
  void* ChunkEvent(int chunk);
  void* LayerEvent(int layer);

  // Waits for every submitted chunk; the first failure, or Ok.
  Status Finish();
  std::string device_name() const;

  struct Impl;

 private:
  explicit DevicePipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvstream
