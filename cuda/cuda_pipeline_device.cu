// MakeCudaPipelineDevice (pipeline_device.h): the DevicePipeline's operations on a CUDA device, through
// the public GPU decoder (a few GpuDecoders per ring slot, so that slots, and a chunk's parts, decode
// without waiting for each other) and the CUDA runtime.
#include <cuda_runtime.h>

#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_memory.h"
#include "cuda/pipeline_device.h"

namespace kvstream::cuda {
namespace {

class CudaPipelineDevice final : public PipelineDevice {
 public:
  CudaPipelineDevice(std::shared_ptr<const Profile> profile, cudaStream_t stream, const DecodeLimits& limits)
      : profile_(std::move(profile)), stream_(stream), limits_(limits) {}
  ~CudaPipelineDevice() override {
    cudaStreamSynchronize(stream_);  // nothing enqueued may outlive the buffers it uses
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  Status Init() {
    KVSTREAM_CUDA(cudaGetDevice(&ordinal_));
    cudaDeviceProp prop{};
    KVSTREAM_CUDA(cudaGetDeviceProperties(&prop, ordinal_));
    name_ = "cuda:" + std::to_string(ordinal_) + " " + prop.name;
    if (profile_) {
      KVSTREAM_ASSIGN_OR_RETURN(DeviceProfile uploaded, DeviceProfile::Upload(*profile_));
      device_profile_ = std::make_unique<DeviceProfile>(std::move(uploaded));
    }
    return Status::Ok();
  }

  Device memory() const override { return Device::kCuda; }
  std::string name() const override { return name_; }

  Status ReserveSlot(int slot, size_t bytes, uint8_t** staging, uint8_t** device) override {
    std::lock_guard lock(mu_);
    if (slot < 0) return Status::InvalidArgument("ring slot " + std::to_string(slot));
    while (slots_.size() <= static_cast<size_t>(slot)) {
      Slot made;
      for (int d = 0; d < kDecodersPerSlot; ++d) {
        KVSTREAM_ASSIGN_OR_RETURN(GpuDecoder decoder, GpuDecoder::Create(GpuDecoder::Options{limits_}));
        made.decoders.push_back(std::move(decoder));
      }
      slots_.push_back(std::move(made));
    }
    Slot& s = slots_[slot];
    KVSTREAM_RETURN_IF_ERROR(s.staging.Reserve(bytes));
    KVSTREAM_RETURN_IF_ERROR(s.device.Reserve(bytes));
    *staging = s.staging.get();
    *device = s.device.get();
    return Status::Ok();
  }
  Status ReserveEvents(int count) override {
    std::lock_guard lock(mu_);
    while (events_.size() < static_cast<size_t>(count)) {
      cudaEvent_t e = nullptr;
      KVSTREAM_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      events_.push_back(e);
    }
    return Status::Ok();
  }

  Status CopyToDevice(uint8_t* device, const uint8_t* staging, size_t bytes) override {
    KVSTREAM_CUDA(cudaMemcpyAsync(device, staging, bytes, cudaMemcpyHostToDevice, stream_));
    return Status::Ok();
  }
  Status Decode(int slot, const GpuChunk& chunk, const KvDestination& destination) override {
    GpuDecoder* decoder;
    size_t index;
    {
      std::lock_guard lock(mu_);
      if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return Status::InvalidArgument("ring slot " + std::to_string(slot));
      Slot& s = slots_[slot];
      index = s.next++ % s.decoders.size();
      decoder = &s.decoders[index];
    }
    // The slot's decoders in turn, each with its own scratch: a chunk's parts decode without waiting for
    // each other (a decoder still pending after kDecodersPerSlot parts is finished first, on the host).
    KVSTREAM_RETURN_IF_ERROR(decoder->Decode({chunk}, device_profile_.get(), destination, stream_));
    std::lock_guard lock(mu_);
    slots_[slot].pending.push_back(index);
    return Status::Ok();
  }
  Status Record(int event) override {
    KVSTREAM_ASSIGN_OR_RETURN(cudaEvent_t e, Event(event));
    KVSTREAM_CUDA(cudaEventRecord(e, stream_));
    return Status::Ok();
  }

  Status Wait(int event) override {
    KVSTREAM_ASSIGN_OR_RETURN(cudaEvent_t e, Event(event));
    KVSTREAM_CUDA(cudaEventSynchronize(e));
    return Status::Ok();
  }
  void* NativeEvent(int event) override {
    auto e = Event(event);
    return e.ok() ? static_cast<void*>(*e) : nullptr;
  }
  Status DecodeStatus(int slot) override {
    GpuDecoder* decoder;
    {
      std::lock_guard lock(mu_);
      if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return Status::InvalidArgument("ring slot " + std::to_string(slot));
      Slot& s = slots_[slot];
      if (s.pending.empty()) return Status::Internal("ring slot " + std::to_string(slot) + ": no decode to report");
      decoder = &s.decoders[s.pending.front()];
      s.pending.pop_front();
    }
    return decoder->Finish();  // the decode is complete: this only reads its errors
  }

 private:
  static constexpr int kDecodersPerSlot = 4;
  struct Slot {
    PinnedBuffer staging;
    DeviceBuffer device;
    std::vector<GpuDecoder> decoders;
    size_t next = 0;                // the decoder the next part takes
    std::deque<size_t> pending;     // decoders with a decode not reported yet, oldest first
  };
  Result<cudaEvent_t> Event(int event) {
    std::lock_guard lock(mu_);
    if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
      return Status::InvalidArgument("event " + std::to_string(event) + " of " + std::to_string(events_.size()));
    }
    return events_[event];
  }

  std::shared_ptr<const Profile> profile_;
  std::unique_ptr<DeviceProfile> device_profile_;
  cudaStream_t stream_;
  DecodeLimits limits_;
  int ordinal_ = 0;
  std::string name_;
  std::mutex mu_;
  std::deque<Slot> slots_;  // a deque: growing it keeps the other slots (and their decoders) in place
  std::vector<cudaEvent_t> events_;
};

}  // namespace

Result<std::unique_ptr<PipelineDevice>> MakeCudaPipelineDevice(std::shared_ptr<const Profile> profile, CudaStream stream,
                                                               const DecodeLimits& limits) {
  std::string why;
  if (!GpuAvailable(&why)) return Status::Unsupported("device pipeline: " + why);
  auto device = std::make_unique<CudaPipelineDevice>(std::move(profile), static_cast<cudaStream_t>(stream), limits);
  KVSTREAM_RETURN_IF_ERROR(device->Init());
  return std::unique_ptr<PipelineDevice>(std::move(device));
}

}  // namespace kvstream::cuda
