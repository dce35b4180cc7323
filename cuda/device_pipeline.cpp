// DevicePipeline (kvstream/device_pipeline.h) over a PipelineDevice (pipeline_device.h): the ring's
// bookkeeping, the CRC check, the stream-ordered work of each part (a whole chunk, or a layer range of
// one), per-layer readiness, and a completion thread that waits for the parts' events in submission order.
#include "kvstream/device_pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "codec/common/crc32c.h"
#include "cuda/pipeline_device.h"

namespace kvstream {
namespace {

using Clock = std::chrono::steady_clock;

const char* MemoryName(Device d) { return d == Device::kCuda ? "CUDA device" : "host"; }

}  // namespace

struct DevicePipeline::Impl {
  DevicePipelineOptions options;
  std::shared_ptr<cuda::PipelineDevice> device;
  KvDestination destination;
  int num_chunks = 0;
  int64_t layers = 0;
  ChunkDone on_done;

  struct SlotBuffers {
    uint8_t* staging = nullptr;
    uint8_t* device = nullptr;
  };
  std::vector<SlotBuffers> slots;

  // A chunk from its first part until it is decoded (every layer) or failed.
  struct Chunk {
    int slot = -1;              // its ring slot, from its first part
    uint64_t bytes = 0;         // the whole chunk's size
    std::vector<uint8_t> submitted, decoded;  // per layer
    int64_t decoded_layers = 0;
    int in_flight = 0;          // parts enqueued, not yet complete
    int last_part = -1;         // the event of its latest part
    bool failed = false;
    bool reported = false;      // ChunkDone called
    Status failure;
    Clock::time_point first_submit;
  };
  // A submitted part, until the completion thread has seen its event (the part's index).
  struct InFlight {
    int part;
    int chunk;
    int64_t layer_begin, layer_end;
    Status refused;  // set when its decode could not be enqueued (a header the plan refused)
  };

  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> free_slots;
  std::deque<InFlight> in_flight;
  std::vector<Chunk> chunks;
  std::vector<int> layer_submitted;  // per layer: chunks that submitted it
  std::vector<int> layer_last_part;  // per layer: the latest part covering it
  int parts = 0;
  Clock::time_point last_completion;
  bool stop = false;
  std::thread completion;

  Status CheckChunk(int chunk) const {
    if (chunk < 0 || chunk >= num_chunks) {
      return Status::InvalidArgument("chunk " + std::to_string(chunk) + " outside the context's " + std::to_string(num_chunks));
    }
    return Status::Ok();
  }
  Status CheckLayer(int layer) const {
    if (layer < 0 || layer >= layers) {
      return Status::InvalidArgument("layer " + std::to_string(layer) + " of " + std::to_string(layers));
    }
    return Status::Ok();
  }
  bool ChunkDoneLocked(const Chunk& c) const { return c.failed || c.decoded_layers == layers; }

  // Gives a slot back to the ring unless a chunk holds it (a chunk's slot goes back with the chunk).
  void ReleaseLocked(int slot) {
    for (const Chunk& c : chunks) {
      if (c.slot == slot) return;
    }
    free_slots.push_back(slot);
  }

  // A chunk's slot goes back to the ring once nothing of it is in flight and it is decoded or failed.
  void MaybeFreeSlotLocked(Chunk& c) {
    if (c.slot >= 0 && c.in_flight == 0 && ChunkDoneLocked(c)) {
      free_slots.push_back(c.slot);
      c.slot = -1;
    }
  }

  // Waits for each submitted part's event in order, takes its decode's result, marks its layers and
  // reports each chunk once, when it is decoded or has failed.
  void Complete() {
    while (true) {
      InFlight f;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !in_flight.empty(); });
        if (in_flight.empty()) return;
        f = in_flight.front();
      }
      Status s = device->Wait(f.part);
      const int slot = [&] {
        std::lock_guard lock(mu);
        return chunks[f.chunk].slot;
      }();
      if (s.ok()) s = f.refused.ok() ? device->DecodeStatus(slot) : f.refused;
      if (!s.ok()) s = s.WithContext("chunk " + std::to_string(f.chunk));
      const auto now = Clock::now();
      bool report = false;
      Status result;
      double decode_s = 0;
      {
        std::lock_guard lock(mu);
        Chunk& c = chunks[f.chunk];
        --c.in_flight;
        if (!s.ok() && !c.failed) {
          c.failed = true;
          c.failure = s;
        }
        if (s.ok()) {
          for (int64_t l = f.layer_begin; l < f.layer_end; ++l) {
            if (!c.decoded[l]) ++c.decoded_layers;
            c.decoded[l] = 1;
          }
        }
        // Decoded: every layer, so no part of it is left in flight; failed: at once.
        if (ChunkDoneLocked(c) && !c.reported) {
          report = c.reported = true;
          result = c.failed ? c.failure : Status::Ok();
          decode_s = std::chrono::duration<double>(now - std::max(c.first_submit, last_completion)).count();
        }
        last_completion = now;
        MaybeFreeSlotLocked(c);
      }
      cv.notify_all();
      if (report && on_done) on_done(f.chunk, result, decode_s);
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
    const Chunk& c = chunks[chunk];
    if (c.failed) return c.failure;
    return c.decoded_layers == layers;
  }
  // Layer l of every chunk decoded; the first failed chunk's error.
  Result<bool> LayerReadyLocked(int layer) const {
    bool all = true;
    for (const Chunk& c : chunks) {
      if (c.failed) return c.failure;
      all = all && c.decoded[layer];
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
  impl_->completion.join();  // after every in-flight part's event: nothing enqueued outlives the pipeline
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
  impl->layers = destination.layers;
  impl->on_done = std::move(on_done);
  impl->slots.resize(options.ring_slots);
  for (int s = 0; s < options.ring_slots; ++s) {
    KVSTREAM_RETURN_IF_ERROR(impl->device->ReserveSlot(s, options.max_chunk_bytes, &impl->slots[s].staging,
                                                       &impl->slots[s].device));
    impl->free_slots.push_back(options.ring_slots - 1 - s);  // slot 0 is taken first
  }
  KVSTREAM_RETURN_IF_ERROR(impl->device->ReserveEvents(num_chunks));
  impl->chunks.resize(num_chunks);
  for (Impl::Chunk& c : impl->chunks) {
    c.submitted.assign(static_cast<size_t>(impl->layers), 0);
    c.decoded.assign(static_cast<size_t>(impl->layers), 0);
  }
  impl->layer_submitted.assign(static_cast<size_t>(impl->layers), 0);
  impl->layer_last_part.assign(static_cast<size_t>(impl->layers), -1);
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
    m.ReleaseLocked(slot.index);
  }
  m.cv.notify_all();
}

Status DevicePipeline::Submit(const Slot& slot, int chunk, size_t size, uint32_t crc32c) {
  return SubmitPart(slot, chunk, size, 0, size, crc32c, 0, -1);
}

Status DevicePipeline::SubmitPart(const Slot& slot, int chunk, uint64_t chunk_bytes, uint64_t offset, size_t size,
                                  uint32_t crc32c, int64_t layer_begin, int64_t layer_end) {
  Impl& m = *impl_;
  if (slot.index < 0 || slot.index >= static_cast<int>(m.slots.size())) {
    return Status::InvalidArgument("slot " + std::to_string(slot.index) + " is not one of the ring's");
  }
  const std::string what = "chunk " + std::to_string(chunk);
  if (layer_end < 0) layer_end = m.layers;
  // A refusal before anything is enqueued: a first part gives its slot back, a later one leaves the
  // chunk's slot with the chunk.
  const auto refuse = [&](Status s) {
    Release(slot);
    return s;
  };
  if (Status s = m.CheckChunk(chunk); !s.ok()) return refuse(s);
  if (chunk_bytes > m.options.max_chunk_bytes || offset > chunk_bytes || size > chunk_bytes - offset) {
    return refuse(Status::InvalidArgument(what + ": bytes [" + std::to_string(offset) + ", " +
                                          std::to_string(offset + size) + ") of a chunk of " + std::to_string(chunk_bytes) +
                                          ", a slot holds " + std::to_string(m.options.max_chunk_bytes)));
  }
  if (layer_begin < 0 || layer_begin >= layer_end || layer_end > m.layers) {
    return refuse(Status::InvalidArgument(what + ": layers [" + std::to_string(layer_begin) + ", " +
                                          std::to_string(layer_end) + ") of " + std::to_string(m.layers)));
  }
  {
    std::unique_lock lock(m.mu);
    Impl::Chunk& c = m.chunks[chunk];
    const auto refuse_locked = [&](Status s) {
      m.ReleaseLocked(slot.index);
      lock.unlock();
      m.cv.notify_all();
      return s;
    };
    const bool first = c.last_part < 0;
    if (c.failed) return refuse_locked(c.failure);
    for (int64_t l = layer_begin; l < layer_end; ++l) {
      if (c.submitted[l]) return refuse_locked(Status::InvalidArgument(what + ": layer " + std::to_string(l) + " was submitted already"));
    }
    if (first && offset != 0) {
      return refuse_locked(Status::InvalidArgument(what + ": its first part must hold its header (offset 0), got offset " +
                                                   std::to_string(offset)));
    }
    if (!first && (c.slot != slot.index || c.bytes != chunk_bytes)) {
      return refuse_locked(Status::InvalidArgument(what + ": a later part must come in the chunk's slot, with its size"));
    }
  }
  const Impl::SlotBuffers& b = m.slots[slot.index];
  // On the host, before the bytes are used: a bad payload is the receiver's to re-request.
  if (Status crc = codec::CheckCrc32c(b.staging + offset, size, crc32c); !crc.ok()) {
    {
      std::lock_guard lock(m.mu);
      m.ReleaseLocked(slot.index);  // a first part's slot is free; a later part's stays with its chunk
    }
    m.cv.notify_all();
    return crc.WithContext(what);
  }
  int part;
  {
    std::lock_guard lock(m.mu);
    Impl::Chunk& c = m.chunks[chunk];
    if (c.slot < 0) {
      c.slot = slot.index;
      c.bytes = chunk_bytes;
      c.first_submit = Clock::now();
    }
    part = m.parts++;
  }
  KVSTREAM_RETURN_IF_ERROR(m.device->ReserveEvents(part + 1));
  Status refused = m.device->CopyToDevice(b.device + offset, b.staging + offset, size);
  if (refused.ok()) {
    GpuChunk gpu_chunk{b.device, chunk_bytes, b.staging, chunk_bytes};
    gpu_chunk.layer_begin = layer_begin;
    gpu_chunk.layer_end = layer_end;
    refused = m.device->Decode(slot.index, gpu_chunk, m.destination);
  }
  // The event is recorded even after a refusal: the slot stays busy until what was enqueued has run.
  Status recorded = m.device->Record(part);
  {
    std::lock_guard lock(m.mu);
    Impl::Chunk& c = m.chunks[chunk];
    if (!recorded.ok()) {  // nothing will signal this part: the chunk fails and keeps its slot out of the ring
      c.failed = true;
      c.failure = recorded.WithContext(what);
      return c.failure;
    }
    ++c.in_flight;
    c.last_part = part;
    for (int64_t l = layer_begin; l < layer_end; ++l) {
      c.submitted[l] = 1;
      ++m.layer_submitted[l];
      m.layer_last_part[l] = part;
    }
    m.in_flight.push_back(Impl::InFlight{part, chunk, layer_begin, layer_end, refused});
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
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor([&] { return m.ChunkDoneLocked(m.chunks[chunk]); },
                                     "chunk " + std::to_string(chunk) + " was not decoded"));
  std::lock_guard lock(m.mu);
  return m.ChunkReadyLocked(chunk).status();
}

Result<bool> DevicePipeline::LayerReady(int layer) {
  KVSTREAM_RETURN_IF_ERROR(impl_->CheckLayer(layer));
  std::lock_guard lock(impl_->mu);
  return impl_->LayerReadyLocked(layer);
}

Status DevicePipeline::WaitLayer(int layer) {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(m.CheckLayer(layer));
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor(
      [&] {
        auto ready = m.LayerReadyLocked(layer);
        return !ready.ok() || *ready;
      },
      "layer " + std::to_string(layer) + " was not decoded"));
  std::lock_guard lock(m.mu);
  return m.LayerReadyLocked(layer).status();
}

void* DevicePipeline::ChunkEvent(int chunk) {
  if (!impl_->CheckChunk(chunk).ok()) return nullptr;
  int part;
  {
    std::lock_guard lock(impl_->mu);
    const Impl::Chunk& c = impl_->chunks[chunk];
    if (std::find(c.submitted.begin(), c.submitted.end(), 0) != c.submitted.end()) return nullptr;
    part = c.last_part;  // the stream runs in order: after every part of the chunk
  }
  return impl_->device->NativeEvent(part);
}

void* DevicePipeline::LayerEvent(int layer) {
  int part;
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->CheckLayer(layer).ok() || impl_->layer_submitted[layer] < impl_->num_chunks) return nullptr;
    part = impl_->layer_last_part[layer];  // after every chunk's part holding the layer
  }
  return impl_->device->NativeEvent(part);
}

Status DevicePipeline::Finish() {
  Impl& m = *impl_;
  KVSTREAM_RETURN_IF_ERROR(m.WaitFor([&] { return m.in_flight.empty(); }, "the submitted chunks were not decoded"));
  std::lock_guard lock(m.mu);
  for (const Impl::Chunk& c : m.chunks) {
    if (c.failed) return c.failure;
  }
  return Status::Ok();
}

std::string DevicePipeline::device_name() const { return impl_->device->name(); }

}  // namespace kvstream
