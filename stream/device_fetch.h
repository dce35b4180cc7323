// A fetch's device half: payloads land in the device pipeline's ring of pinned staging slots (the
// "staging" path), each checked and decoded on the GPU while the next ones are on the wire. The Receiver
// asks it for a landing per chunk request and submits each payload that arrived whole.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kvstream/device_pipeline.h"
#include "kvstream/kv_destination.h"
#include "kvstream/status.h"

namespace kvstream::stream {

class DeviceFetch {
 public:
  // `device` decodes into `destination` (in its memory); `done` gets every chunk's decode result.
  static Result<std::unique_ptr<DeviceFetch>> Start(std::shared_ptr<cuda::PipelineDevice> device,
                                                    const DevicePipelineOptions& options,
                                                    const KvDestination& destination, int num_chunks,
                                                    DevicePipeline::ChunkDone done);
  // Waits for every chunk submitted: nothing is written into the destination after this returns.
  ~DeviceFetch();

  // Where one payload lands. `lease` holds the slot for as long as the data plane may write into it (it
  // can outlive a cancelled receive): the slot returns to the ring when the lease is dropped unsubmitted.
  struct Landing {
    uint8_t* data = nullptr;
    std::shared_ptr<void> lease;
  };
  // Waits (bounded) for a free slot.
  Result<Landing> Land();
  // The payload arrived whole: kCorruptData on a CRC mismatch (re-request it), else its decode is enqueued.
  Status Submit(const Landing& landing, int chunk, uint64_t bytes, uint32_t crc32c);

  int ring_slots() const { return ring_slots_; }
  std::string device_name() const { return pipeline_->device_name(); }

 private:
  DeviceFetch(std::shared_ptr<DevicePipeline> pipeline, int ring_slots)
      : pipeline_(std::move(pipeline)), ring_slots_(ring_slots) {}
  std::shared_ptr<DevicePipeline> pipeline_;
  int ring_slots_;
};

}  // namespace kvstream::stream
