// DevicePipeline (kvstream/device_pipeline.h) over a PipelineDevice (pipeline_device.h): the ring's
// bookkeeping, the CRC check, the stream-ordered work of each chunk and a completion thread that waits for
// the chunks' events in submission order.
#include "kvstream/device_pipeline.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "codec/common/crc32c.h"
#include "cuda/pipeline_device.h"

namespace kvstream {
namespace {

using Clock = std::chrono::steady_clock;

enum class ChunkState { kWaiting, kSubmitted, kDecoded, kFailed };

const char* MemoryName(Device d) { return d == Device::kCuda ? "CUDA device" : "host"; }

}  // namespace

struct DevicePipeline::Impl {
  DevicePipelineOptions options;
  std::shared_ptr<cuda::PipelineDevice> device;
  KvDestination destination;
  int num_chunks = 0;
  ChunkDone on_done;

  struct SlotBuffers {
    uint8_t* staging = nullptr;
    uint8_t* device = nullptr;
  };
  std::vector<SlotBuffers> slots;
  // A submitted chunk, until the completion thread has seen its event.
  struct InFlight {
    int chunk;
    int slot;
    Status refused;  // set when its decode could not be enqueued (a header the plan refused)
    Clock::time_point submitted;
  };

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> free_slots;
  std::deque<InFlight> in_flight;
  std::vector<ChunkState> state;
  std::vector<Status> failure;  // per chunk, when kFailed
  int submitted = 0;
  int last_submitted = -1;
  Clock::time_point last_completion;
  bool stop = false;
  std::thread completion;

  Status CheckChunk(int chunk) const {
    if (chunk < 0 || chunk >= num_chunks) {
      return Status::InvalidArgument("chunk " + std::to_string(chunk) + " outside the context's " + std::to_string(num_chunks));
    }
    return Status::Ok();
  }

  // Waits for each submitted chunk's event in order, takes its decode's result and frees its slot.
  void Complete() {
    while (true) {
      InFlight f;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !in_flight.empty(); });
        if (in_flight.empty()) return;
        f = in_flight.front();
      }
      Status s = device->Wait(f.chunk);
      if (s.ok()) s = f.refused.ok() ? device->DecodeStatus(f.slot) : f.refused;
      if (!s.ok()) s = s.WithContext("chunk " + std::to_string(f.chunk));
      const auto now = Clock::now();
      double decode_s;
      {
        std::lock_guard lock(mu);
        decode_s = std::chrono::duration<double>(now - std::max(f.submitted, last_completion)).count();
        last_completion = now;
        free_slots.push_back(f.slot);
        state[f.chunk] = s.ok() ? ChunkState::kDecoded : ChunkState::kFailed;
        if (!s.ok()) failure[f.chunk] = s;
      }
      cv.notify_all();
      if (on_done) on_done(f.chunk, s, decode_s);
      {
        std::lock_guard lock(mu);
        in_flight.pop_front();  // after the callback: Finish returns once every chunk was reported
      }
      cv.notify_all();
    }
  }

  // Waits until `done` (with the lock) or the wait timeout.
  template <typename Pred>
  Status WaitFor(Pred done, const std::string& what) {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::milliseconds(options.wait_timeout_ms), done)) {
      return Status::Timeout(what + " within wait_timeout_ms = " + std::to_string(options.wait_timeout_ms));
    }
    return Status::Ok();
  }

  Result<bool> ChunkReadyLocked(int chunk) const {
    switch (state[chunk]) {
      case ChunkState::kDecoded: return true;
      case ChunkState::kFailed: return failure[chunk];
      default: return false;
    }
  }
  Result<bool> AllReadyLocked() const {
    bool all = true;
    for (int c = 0; c < num_chunks; ++c) {
      KVSTREAM_ASSIGN_OR_RETURN(bool ready, ChunkReadyLocked(c));
      all = all && ready;
    }
    return all;
  }
};

DevicePipeline::DevicePipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DevicePipeline::~DevicePipeline() {
  {
    std::lock_guard lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->completion.join();  // after every in-flight chunk's event: nothing enqueued outlives the pipeline
}

Result<std::unique_ptr<DevicePipeline>> DevicePipeline::Create(const DevicePipelineOptions& options,
                                                               std::shared_ptr<const Profile> profile, CudaStream stream,
                                                               const KvDestination& destination, int num_chunks,
                                                               ChunkDone on_done) {
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<cuda::PipelineDevice> device,
                            cuda::MakeCudaPipelineDevice(std::move(profile), stream, options.limits));
  return Create(options, std::shared_ptr<cuda::PipelineDevice>(std::move(device)), destination, num_chunks,
                std::move(on_done));
}

Result<std::unique_ptr<DevicePipeline>> DevicePipeline::Create(const DevicePipelineOptions& options,
                                                               std::shared_ptr<cuda::PipelineDevice> device,
                                                               const KvDestination& destination, int num_chunks,
                                                               ChunkDone on_done) {
  if (options.ring_slots <= 0 || options.max_chunk_bytes == 0 || options.wait_timeout_ms <= 0) {
    return Status::InvalidArgument("device pipeline: ring_slots, max_chunk_bytes and wait_timeout_ms must be positive");
  }
  if (num_chunks <= 0) return Status::InvalidArgument("device pipeline: a context of " + std::to_string(num_chunks) + " chunks");
  KVSTREAM_RETURN_IF_ERROR(ValidateDestination(destination, "destination"));
  if (destination.device != device->memory()) {
    return Status::InvalidArgument(std::string("destination: in ") + MemoryName(destination.device) +
                                   " memory, the pipeline's device (" + device->name() + ") writes " +
                                   MemoryName(device->memory()) + " memory");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->device = std::move(device);
  impl->destination = destination;
  impl->num_chunks = num_chunks;
  impl->on_done = std::move(on_done);
  impl->slots.resize(options.ring_slots);
  for (int s = 0; s < options.ring_slots; ++s) {
    KVSTREAM_RETURN_IF_ERROR(impl->device->ReserveSlot(s, options.max_chunk_bytes, &impl->slots[s].staging,
                                                       &impl->slots[s].device));
    impl->free_slots.push_back(options.ring_slots - 1 - s);  // slot 0 is taken first
  }
  KVSTREAM_RETURN_IF_ERROR(impl->device->ReserveEvents(num_chunks));
  impl->state.assign(num_chunks, ChunkState::kWaiting);
  impl->failure.resize(num_chunks);
  impl->last_completion = Clock::now();
  Impl* raw = impl.get();
  impl->completion = std::thread([raw] { raw->Complete(); });
  return std::unique_ptr<DevicePipeline>(new DevicePipeline(std::move(impl)));
}

Result<DevicePipeline::Slot> DevicePipeline::Acquire() {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor([&] { return !m.free_slots.empty(); },
                                     "ring full: none of its " + std::to_string(m.options.ring_slots) +
                                         " slots finished decoding"));
  std::lock_guard lock(m.mu);
  const int s = m.free_slots.back();
  m.free_slots.pop_back();
  return Slot{s, m.slots[s].staging, static_cast<size_t>(m.options.max_chunk_bytes)};
}

void DevicePipeline::Release(const Slot& slot) {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.mu);
    if (slot.index < 0 || slot.index >= static_cast<int>(m.slots.size())) return;
    m.free_slots.push_back(slot.index);
  }
  m.cv.notify_all();
}

Status DevicePipeline::Submit(const Slot& slot, int chunk, size_t size, uint32_t crc32c) {
  Impl& m = *impl_;
  if (slot.index < 0 || slot.index >= static_cast<int>(m.slots.size())) {
    return Status::InvalidArgument("slot " + std::to_string(slot.index) + " is not one of the ring's");
  }
  if (Status s = m.CheckChunk(chunk); !s.ok()) {
    Release(slot);
    return s;
  }
  const std::string what = "chunk " + std::to_string(chunk);
  if (size > m.options.max_chunk_bytes) {
    Release(slot);
    return Status::InvalidArgument(what + ": " + std::to_string(size) + " bytes, a slot holds " +
                                   std::to_string(m.options.max_chunk_bytes));
  }
  {
    std::lock_guard lock(m.mu);
    if (m.state[chunk] != ChunkState::kWaiting) {
      m.free_slots.push_back(slot.index);
      return Status::InvalidArgument(what + " was submitted already");
    }
  }
  const Impl::SlotBuffers& b = m.slots[slot.index];
  // On the host, before the bytes are used: a bad payload is the receiver's to re-request.
  const uint32_t crc = codec::Crc32c(b.staging, size);
  if (crc != crc32c) {
    Release(slot);
    char hex[64];
    std::snprintf(hex, sizeof hex, "stamped 0x%08x, computed 0x%08x", crc32c, crc);
    return Status::CorruptData(what + ": CRC32C mismatch (" + hex + ")");
  }
  Status refused = m.device->CopyToDevice(b.device, b.staging, size);
  if (refused.ok()) {
    const GpuChunk gpu_chunk{b.device, size, b.staging, size};
    refused = m.device->Decode(slot.index, gpu_chunk, m.destination);
  }
  // The event is recorded even after a refusal: the slot stays busy until what was enqueued has run.
  Status recorded = m.device->Record(chunk);
  {
    std::lock_guard lock(m.mu);
    if (!recorded.ok()) {  // nothing will signal this slot: it stays out of the ring
      m.state[chunk] = ChunkState::kFailed;
      m.failure[chunk] = recorded;
      return recorded.WithContext(what);
    }
    m.state[chunk] = ChunkState::kSubmitted;
    ++m.submitted;
    m.last_submitted = chunk;
    m.in_flight.push_back(Impl::InFlight{chunk, slot.index, refused, Clock::now()});
  }
  m.cv.notify_all();
  return Status::Ok();  // a refusal is the chunk's result, reported with the others by the completion thread
}

Result<bool> DevicePipeline::ChunkReady(int chunk) {
  KVSTREAM_RETURN_IF_ERROR(impl_->CheckChunk(chunk));
  std::lock_guard lock(impl_->mu);
  return impl_->ChunkReadyLocked(chunk);
}

Status DevicePipeline::WaitChunk(int chunk) {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(m.CheckChunk(chunk));
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor(
      [&] { return m.state[chunk] == ChunkState::kDecoded || m.state[chunk] == ChunkState::kFailed; },
      "chunk " + std::to_string(chunk) + " was not decoded"));
  std::lock_guard lock(m.mu);
  return m.ChunkReadyLocked(chunk).status();
}

Result<bool> DevicePipeline::LayerReady(int layer) {
  if (layer < 0 || layer >= impl_->destination.layers) {
    return Status::InvalidArgument("layer " + std::to_string(layer) + " of " + std::to_string(impl_->destination.layers));
  }
  std::lock_guard lock(impl_->mu);
  return impl_->AllReadyLocked();
}

Status DevicePipeline::WaitLayer(int layer) {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(LayerReady(layer).status());
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor(
      [&] {
        auto all = m.AllReadyLocked();
        return !all.ok() || *all;
      },
      "layer " + std::to_string(layer) + " was not decoded"));
  std::lock_guard lock(m.mu);
  return m.AllReadyLocked().status();
}

void* DevicePipeline::ChunkEvent(int chunk) {
  if (!impl_->CheckChunk(chunk).ok()) return nullptr;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->state[chunk] == ChunkState::kWaiting) return nullptr;
  }
  return impl_->device->NativeEvent(chunk);
}

void* DevicePipeline::LayerEvent(int layer) {
  int last;
  {
    std::lock_guard lock(impl_->mu);
    if (layer < 0 || layer >= impl_->destination.layers || impl_->submitted < impl_->num_chunks) return nullptr;
    last = impl_->last_submitted;  // the stream runs in order: the last chunk's event follows every chunk
  }
  return impl_->device->NativeEvent(last);
}

Status DevicePipeline::Finish() {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor([&] { return m.in_flight.empty(); }, "the submitted chunks were not decoded"));
  std::lock_guard lock(m.mu);
  for (int c = 0; c < m.num_chunks; ++c) {
    if (m.state[c] == ChunkState::kFailed) return m.failure[c];
  }
  return Status::Ok();
}

std::string DevicePipeline::device_name() const { return impl_->device->name(); }

}  // namespace kvstream
