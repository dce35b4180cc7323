// DeviceFetch (device_fetch.h).
#include "stream/device_fetch.h"

#include <atomic>

namespace kvstream::stream {
namespace {

// One ring slot on loan to a receive. The pipeline may be gone when the data plane drops its copy.
struct SlotLease {
  std::weak_ptr<DevicePipeline> pipeline;
  DevicePipeline::Slot slot;
  std::atomic<bool> submitted{false};
  ~SlotLease() {
    if (submitted.load()) return;
    if (auto p = pipeline.lock()) p->Release(slot);
  }
};

}  // namespace

Result<std::unique_ptr<DeviceFetch>> DeviceFetch::Start(std::shared_ptr<cuda::PipelineDevice> device,
                                                        const DevicePipelineOptions& options,
                                                        const KvDestination& destination, int num_chunks,
                                                        DevicePipeline::ChunkDone done) {
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<DevicePipeline> pipeline,
                            DevicePipeline::Create(options, std::move(device), destination, num_chunks, std::move(done)));
  return std::unique_ptr<DeviceFetch>(new DeviceFetch(std::move(pipeline), options.ring_slots));
}

DeviceFetch::~DeviceFetch() {
  // Every enqueued decode runs to its end (the kernels are bounded): wait for it, however long, so that
  // nothing lands in the destination after the fetch. A lease the data plane still holds may own the
  // last reference to the pipeline afterwards; dropping it only releases a slot.
  while (pipeline_->Finish().code() == StatusCode::kTimeout) {
  }
}

Result<DeviceFetch::Landing> DeviceFetch::Land() {
  KVSTREAM_ASSIGN_OR_RETURN(DevicePipeline::Slot slot, pipeline_->Acquire());
  auto lease = std::make_shared<SlotLease>();
  lease->pipeline = pipeline_;
  lease->slot = slot;
  return Landing{slot.data, lease};
}

Status DeviceFetch::Submit(const Landing& landing, int chunk, uint64_t bytes, uint32_t crc32c) {
  auto* lease = static_cast<SlotLease*>(landing.lease.get());
  lease->submitted = true;  // the pipeline has the slot now, whatever Submit says
  return pipeline_->Submit(lease->slot, chunk, bytes, crc32c);
}

}  // namespace kvstream::stream
