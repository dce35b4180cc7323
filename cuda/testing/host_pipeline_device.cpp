// MakeHostPipelineDevice (host_pipeline_device.h).
#include "cuda/testing/host_pipeline_device.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/testing/host_launch.h"

namespace kvstream::cuda::testing {
namespace {

class HostPipelineDevice final : public PipelineDevice {
 public:
  HostPipelineDevice(std::shared_ptr<const Profile> profile, const HostPipelineDeviceOptions& options)
      : profile_(std::move(profile)), options_(options), worker_([this] { Run(); }) {}
  ~HostPipelineDevice() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  Device memory() const override { return Device::kHost; }
  std::string name() const override { return "host (CPU launcher of the GPU kernels)"; }

  Status ReserveSlot(int slot, size_t bytes, uint8_t** staging, uint8_t** device) override {
    std::lock_guard lock(mu_);
    if (slot < 0) return Status::InvalidArgument("ring slot " + std::to_string(slot));
    if (slots_.size() <= static_cast<size_t>(slot)) slots_.resize(slot + 1);
    Slot& s = slots_[slot];
    if (s.staging.size() < bytes) s.staging.assign(bytes, 0), s.device.assign(bytes, 0);
    *staging = s.staging.data();
    *device = s.device.data();
    return Status::Ok();
  }
  Status ReserveEvents(int count) override {
    std::lock_guard lock(mu_);
    if (events_.size() < static_cast<size_t>(count)) events_.resize(static_cast<size_t>(count), false);
    return Status::Ok();
  }

  Status CopyToDevice(uint8_t* device, const uint8_t* staging, size_t bytes) override {
    Enqueue([=] { std::memcpy(device, staging, bytes); });
    return Status::Ok();
  }
  Status Decode(int slot, const GpuChunk& chunk, const KvDestination& destination) override {
    // The CPU launcher reads the chunk itself (host memory): the device copy, as the kernels would.
    GpuChunk on_device = chunk;
    on_device.host_header = chunk.bytes;
    on_device.host_header_size = chunk.size;
    auto result = std::make_shared<Status>();
    {
      std::lock_guard lock(mu_);
      if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return Status::InvalidArgument("ring slot " + std::to_string(slot));
      slots_[slot].results.push_back(result);
    }
    Enqueue([this, result, on_device, destination] {
      Status s = DecodeChunksOnHost({on_device}, profile_.get(), destination, options_.limits);
      std::lock_guard lock(mu_);
      *result = std::move(s);
    });
    return Status::Ok();
  }
  Status Record(int event) override {
    KVSTREAM_RETURN_IF_ERROR(CheckEvent(event));
    {
      std::lock_guard lock(mu_);
      events_[event] = false;  // pending until the stream reaches it
    }
    Enqueue([this, event] {
      std::lock_guard lock(mu_);
      events_[event] = true;
    });
    return Status::Ok();
  }

  Status Wait(int event) override {
    KVSTREAM_RETURN_IF_ERROR(CheckEvent(event));
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return static_cast<bool>(events_[event]); });
    return Status::Ok();
  }
  void* NativeEvent(int) override { return nullptr; }
  Status DecodeStatus(int slot) override {
    std::lock_guard lock(mu_);
    if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return Status::InvalidArgument("ring slot " + std::to_string(slot));
    auto& results = slots_[slot].results;
    if (results.empty()) return Status::Internal("ring slot " + std::to_string(slot) + ": no decode to report");
    Status s = *results.front();
    results.pop_front();
    return s;
  }

 private:
  struct Slot {
    std::vector<uint8_t> staging, device;
    std::deque<std::shared_ptr<Status>> results;  // its decodes' results, oldest first
  };

  Status CheckEvent(int event) {
    std::lock_guard lock(mu_);
    if (event < 0 || static_cast<size_t>(event) >= events_.size()) {
      return Status::InvalidArgument("event " + std::to_string(event) + " of " + std::to_string(events_.size()));
    }
    return Status::Ok();
  }
  void Enqueue(std::function<void()> op) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(op));
    }
    cv_.notify_all();
  }
  // The stream: operations in order; an event's waiters are woken after every operation.
  void Run() {
    while (true) {
      std::function<void()> op;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, with nothing left to run
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      if (options_.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(options_.delay_ms));
      op();
      cv_.notify_all();
    }
  }

  std::shared_ptr<const Profile> profile_;
  const HostPipelineDeviceOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::deque<Slot> slots_;  // a deque: growing it keeps the other slots' buffers in place
  std::vector<bool> events_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

std::unique_ptr<PipelineDevice> MakeHostPipelineDevice(std::shared_ptr<const Profile> profile,
                                                       const HostPipelineDeviceOptions& options) {
  return std::make_unique<HostPipelineDevice>(std::move(profile), options);
}

}  // namespace kvstream::cuda::testing
