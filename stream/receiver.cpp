// The Receiver: fetches a context into destination views, pipelining transfer with decode.
//
// Fetch runs on the caller's thread and is the only one that touches the LevelPolicy and the fetch's
// bookkeeping. Everything else reports to it through one event queue: the data plane (a payload arrived),
// the control connection (a chunk error, the manifest, the connection closed) and the decode threads (a
// chunk is in the destination). Decode threads take the lowest-numbered chunk that is ready; a "text"
// chunk is ready only when every earlier chunk is decoded, because recomputing it needs their KV. A decode
// thread with no chunk to take helps with the parts of the chunks being decoded (their segments, or blocks
// of positions), so that the last chunks of a fetch, which nothing else overlaps, decode on every thread.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "codec/common/crc32c.h"
#include "cuda/pipeline_device.h"
#include "kvstream/codec.h"
#include "kvstream/stream.h"
#include "stream/chunk_coding.h"
#include "stream/device_fetch.h"
#include "stream/testing/receiver_test_peer.h"

namespace kvstream {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

struct Event {
  enum Kind { kReceived, kChunkError, kDecoded, kManifest, kClosed };
  explicit Event(Kind k) : kind(k) {}
  Kind kind;
  uint64_t id = 0;     // message id (kReceived, kChunkError)
  int chunk = 0;       // kDecoded
  Status status;
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
  Clock::time_point at = Clock::now();
  double decode_s = 0;
  std::optional<ManifestReply> manifest;
};

// Events for whichever call is running; shared with callbacks that may outlive a fetch.
class EventQueue {
 public:
  void Push(Event e) {
    {
      std::lock_guard lock(mu_);
      events_.push_back(std::move(e));
    }
    cv_.notify_all();
  }
  // Waits until `deadline` for an event.
  std::optional<Event> Pop(Clock::time_point deadline) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }
  // Drops what a previous call left behind, but remembers a closed connection.
  void Reset() {
    std::lock_guard lock(mu_);
    std::deque<Event> keep;
    for (auto& e : events_) {
      if (e.kind == Event::kClosed) keep.push_back(std::move(e));
    }
    events_.swap(keep);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
};

struct DecodeTask {
  int chunk = 0;
  Level level = kLevelFp16;
  std::shared_ptr<std::vector<uint8_t>> bytes;
};

// The parts of one chunk's decode (DecodeOptions::parallel_for), claimed one at a time by the decoding
// thread and by idle decode threads. `task` lives on the decoding thread's stack until `finished == count`.
struct SharedParts {
  SharedParts(size_t n, const std::function<void(size_t)>* t) : count(n), task(t) {}
  const size_t count;
  const std::function<void(size_t)>* task;
  std::atomic<size_t> next{0};
  size_t finished = 0;  // guarded by the pool's mutex
  bool Unclaimed() const { return next.load() < count; }
};

// Decode threads for one fetch. Joined before Fetch returns, so they never outlive the destination.
class DecodePool {
 public:
  // Into keys/values views, or (when `destination` is set) into the destination.
  DecodePool(int threads, const ManifestReply& reply, std::vector<int64_t> chunk_begin, const TensorView& keys,
             const TensorView& values, const KvDestination* destination, const ReceiverOptions& options,
             std::shared_ptr<EventQueue> events)
      : reply_(reply),
        chunk_begin_(std::move(chunk_begin)),
        keys_(keys),
        values_(values),
        destination_(destination),
        options_(options),
        events_(std::move(events)),
        decoded_(reply.manifest.num_chunks, false) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~DecodePool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Add(DecodeTask task) {
    {
      std::lock_guard lock(mu_);
      ready_.emplace(task.chunk, std::move(task));
    }
    cv_.notify_all();
  }

 private:
  bool Runnable(const DecodeTask& t) const { return t.level != kLevelText || prefix_ == t.chunk; }

  // Runs parts of `parts` until none is left unclaimed.
  void RunParts(SharedParts& parts) {
    for (size_t i = parts.next.fetch_add(1); i < parts.count; i = parts.next.fetch_add(1)) {
      (*parts.task)(i);
      bool last;
      {
        std::lock_guard lock(mu_);
        last = ++parts.finished == parts.count;
      }
      if (last) cv_.notify_all();
    }
  }

  // DecodeOptions::parallel_for of every chunk decode: the decoding thread runs parts itself, idle decode
  // threads join in, and it returns once every part has finished (whoever ran it).
  void ParallelParts(size_t count, const std::function<void(size_t)>& task) {
    auto parts = std::make_shared<SharedParts>(count, &task);
    {
      std::lock_guard lock(mu_);
      shared_.push_back(parts);
    }
    cv_.notify_all();
    RunParts(*parts);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return parts->finished == parts->count; });
    shared_.erase(std::find(shared_.begin(), shared_.end(), parts));
  }

  std::shared_ptr<SharedParts> PartsToHelpWith() const {
    for (const auto& parts : shared_) {
      if (parts->Unclaimed()) return parts;
    }
    return nullptr;
  }

  void Loop() {
    while (true) {
      DecodeTask task;
      {
        std::unique_lock lock(mu_);
        std::shared_ptr<SharedParts> help;
        cv_.wait(lock, [&] {
          if (stop_) return true;
          for (auto& [chunk, t] : ready_) {
            if (Runnable(t)) return true;
          }
          help = PartsToHelpWith();
          return help != nullptr;
        });
        if (stop_) return;
        auto it = std::find_if(ready_.begin(), ready_.end(), [&](const auto& kv) { return Runnable(kv.second); });
        if (it == ready_.end()) {
          // No chunk to take: help with a chunk being decoded (a new chunk, when there is one, comes first).
          lock.unlock();
          RunParts(*help);
          continue;
        }
        task = std::move(it->second);
        ready_.erase(it);
      }
      const auto start = Clock::now();
      Status status = Decode(task);
      Event e(Event::kDecoded);
      e.chunk = task.chunk;
      e.status = std::move(status);
      e.decode_s = Seconds(start);
      {
        std::lock_guard lock(mu_);
        if (e.status.ok()) {
          decoded_[task.chunk] = true;
          while (prefix_ < static_cast<int>(decoded_.size()) && decoded_[prefix_]) ++prefix_;
        }
      }
      cv_.notify_all();
      events_->Push(std::move(e));
    }
  }

  Status Decode(const DecodeTask& task) {
    const int64_t begin = chunk_begin_[task.chunk];
    const int64_t tokens = reply_.manifest.chunk_tokens[task.chunk];
    const TensorView keys = SliceTokens(keys_, begin, tokens);
    const TensorView values = SliceTokens(values_, begin, tokens);
    const uint8_t* data = task.bytes->data();
    const size_t size = task.bytes->size();
    auto parallel = [this](size_t count, const std::function<void(size_t)>& part) { ParallelParts(count, part); };
    if (destination_ != nullptr) {  // never text: a fetch into a destination requests KV levels only
      DecodeOptions options;
      options.profile = options_.profile.get();
      options.parallel_for = parallel;
      return DecodeChunkInto(data, size, options, *destination_);
    }
    if (task.level != kLevelText) {
      return stream::DecodeChunkInto(data, size, options_.profile.get(), begin, keys, values, parallel);
    }
    return Recompute(data, size, begin, tokens);
  }

  // Text: the recomputer prefills the chunk's tokens on top of every earlier chunk's KV (a text chunk is
  // ready only once they are all in the destination).
  Status Recompute(const uint8_t* data, size_t size, int64_t begin, int64_t tokens) {
    if (!options_.text_recomputer) {
      return Status::InvalidArgument(
          "level text needs a TextRecomputer to recompute the KV (ReceiverOptions::text_recomputer); none was given");
    }
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, stream::DecodeTextChunk(data, size, tokens));
    return options_.text_recomputer->Recompute(ids, begin, keys_, values_);
  }

  const ManifestReply& reply_;
  std::vector<int64_t> chunk_begin_;
  TensorView keys_, values_;
  const KvDestination* destination_;
  const ReceiverOptions& options_;
  std::shared_ptr<EventQueue> events_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, DecodeTask> ready_;
  std::vector<std::shared_ptr<SharedParts>> shared_;  // chunk decodes whose parts idle threads may run
  std::vector<bool> decoded_;
  int prefix_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

Status CheckChunkTables(const ManifestReply& reply) {
  const FetchManifest& m = reply.manifest;
  if (m.num_chunks <= 0 || m.levels.empty()) return Status::CorruptData("manifest: no chunks or no levels offered");
  if (static_cast<int>(m.chunk_tokens.size()) != m.num_chunks || static_cast<int>(m.bytes.size()) != m.num_chunks) {
    return Status::CorruptData("manifest: chunk tables do not have num_chunks = " + std::to_string(m.num_chunks) + " rows");
  }
  int64_t sum = 0;
  for (int c = 0; c < m.num_chunks; ++c) {
    if (m.chunk_tokens[c] <= 0) return Status::CorruptData("manifest: chunk " + std::to_string(c) + " has no tokens");
    sum += m.chunk_tokens[c];
  }
  if (sum != m.total_tokens) {
    return Status::CorruptData("manifest: chunk tokens sum to " + std::to_string(sum) + ", total_tokens = " + std::to_string(m.total_tokens));
  }
  return Status::Ok();
}

Status CheckManifest(const ManifestReply& reply, const TensorView& keys, const TensorView& values) {
  KVSTREAM_RETURN_IF_ERROR(CheckChunkTables(reply));
  const FetchManifest& m = reply.manifest;
  for (const TensorView* v : {&keys, &values}) {
    KVSTREAM_RETURN_IF_ERROR(ValidateView(*v, v == &keys ? "keys" : "values"));
    if (v->device != Device::kHost) return Status::Unsupported("destination: only host views are decoded into so far");
    if (v->layers() != reply.layers || v->channels() != reply.channels || v->tokens() < m.total_tokens) {
      return Status::InvalidArgument("destination " + std::string(v == &keys ? "keys" : "values") + " is [" +
                                     std::to_string(v->layers()) + "][" + std::to_string(v->tokens()) + "][" +
                                     std::to_string(v->channels()) + "], context '" + reply.context_id + "' needs [" +
                                     std::to_string(reply.layers) + "][>= " + std::to_string(m.total_tokens) + "][" +
                                     std::to_string(reply.channels) + "]");
    }
  }
  return Status::Ok();
}

Status CheckManifest(const ManifestReply& reply, const KvDestination& d) {
  KVSTREAM_RETURN_IF_ERROR(CheckChunkTables(reply));
  KVSTREAM_RETURN_IF_ERROR(ValidateDestination(d, "destination"));
  const int64_t total = reply.manifest.total_tokens;
  if (d.layers != reply.layers || d.channels() != reply.channels || d.position_offset > 0 ||
      total - d.position_offset > d.positions) {
    return Status::InvalidArgument("destination holds " + std::to_string(d.layers) + " layers, " +
                                   std::to_string(d.channels()) + " channels and positions [" +
                                   std::to_string(d.position_offset) + ", " + std::to_string(d.position_offset + d.positions) +
                                   "); context '" + reply.context_id + "' needs " + std::to_string(reply.layers) +
                                   " layers, " + std::to_string(reply.channels) + " channels and positions [0, " +
                                   std::to_string(total) + ")");
  }
  return Status::Ok();
}

}  // namespace

struct Receiver::Impl {
  ReceiverOptions options;
  std::shared_ptr<DataPlane> plane;
  std::shared_ptr<ControlConnection> connection;
  std::shared_ptr<EventQueue> events = std::make_shared<EventQueue>();
  std::mutex call_mu;  // one Fetch or GetManifest at a time
  // The GPU of device fetches, made on the first one and kept (ReceiverTestPeer swaps in the host one).
  std::function<Result<std::unique_ptr<cuda::PipelineDevice>>()> make_device;
  std::shared_ptr<cuda::PipelineDevice> device;
  bool device_path_for_host_memory = false;  // ReceiverTestPeer: host destinations take the device path

  // The device for a new fetch: the kept one, unless a cancelled receive of an earlier fetch still holds
  // one of its slots (the data plane may write into it yet), then a new one.
  Result<std::shared_ptr<cuda::PipelineDevice>> DeviceForFetch() {
    if (!device || device.use_count() > 1) {
      KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<cuda::PipelineDevice> made, make_device());
      device = std::move(made);
    }
    return device;
  }

  Result<ManifestReply> Manifest(const std::string& context_id) {
    events->Reset();
    connection->Send(ManifestRequest{context_id});
    const auto deadline = Clock::now() + std::chrono::milliseconds(options.chunk_timeout_ms);
    while (true) {
      auto e = events->Pop(deadline);
      if (!e) {
        return Status::Timeout("manifest of '" + context_id + "' did not arrive within chunk_timeout_ms = " +
                               std::to_string(options.chunk_timeout_ms));
      }
      if (e->kind == Event::kClosed) {
        events->Push(*e);
        return e->status;
      }
      if (e->kind == Event::kChunkError && e->id == 0) return e->status;
      if (e->kind == Event::kManifest && e->manifest->context_id == context_id) return std::move(*e->manifest);
    }
  }

  // Into keys/values views, or into `destination` when it is set.
  Result<FetchResult> Fetch(const std::string& context_id, const TensorView& keys, const TensorView& values,
                            const KvDestination* destination, double deadline_s, LevelPolicy& policy);
};

Receiver::Receiver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Receiver::~Receiver() {
  // Close the control connection first: no more events; then the data plane (if ours) fails what is left.
  impl_->connection.reset();
  impl_->plane.reset();
}

Result<std::unique_ptr<Receiver>> Receiver::Connect(const std::string& host, int port, ReceiverOptions options) {
  if (options.max_inflight_chunks <= 0 || options.decode_threads <= 0 || options.chunk_timeout_ms <= 0 ||
      options.device_ring_slots <= 0) {
    return Status::InvalidArgument(
        "receiver: max_inflight_chunks, decode_threads, chunk_timeout_ms and device_ring_slots must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (impl->options.profile) impl->options.control.profile_hash = impl->options.profile->hash();
  impl->plane = impl->options.data_plane;
  if (!impl->plane) {
    KVSTREAM_ASSIGN_OR_RETURN(impl->plane, DataPlane::Create(impl->options.data));
  }
  KVSTREAM_ASSIGN_OR_RETURN(impl->connection, ConnectControl(host, port, impl->options.control, impl->plane->address()));
  impl->make_device = [profile = impl->options.profile, stream = impl->options.cuda_stream] {
    return cuda::MakeCudaPipelineDevice(profile, stream, DecodeLimits{});
  };
  std::weak_ptr<EventQueue> weak = impl->events;
  impl->connection->Start(
      [weak](ControlMessage message) {
        auto q = weak.lock();
        if (!q) return;
        if (auto* reply = std::get_if<ManifestReply>(&message)) {
          Event e(Event::kManifest);
          e.manifest = std::move(*reply);
          q->Push(std::move(e));
        } else if (auto* error = std::get_if<ChunkError>(&message)) {
          Event e(Event::kChunkError);
          e.id = error->request_id;
          e.status = Status(error->code, "sender: " + error->message);
          q->Push(std::move(e));
        }
      },
      [weak](Status reason) {
        if (auto q = weak.lock()) {
          Event e(Event::kClosed);
          e.status = Status::Unavailable("connection to the sender lost: " + reason.ToString());
          q->Push(std::move(e));
        }
      });
  return std::unique_ptr<Receiver>(new Receiver(std::move(impl)));
}

Result<std::unique_ptr<Receiver>> ReceiverTestPeer::ConnectWithDevice(const std::string& host, int port,
                                                                     ReceiverOptions options, MakeDevice make_device) {
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Receiver> receiver, Receiver::Connect(host, port, std::move(options)));
  receiver->impl_->make_device = std::move(make_device);
  receiver->impl_->device_path_for_host_memory = true;
  return receiver;
}

Result<ManifestReply> Receiver::GetManifest(const std::string& context_id) {
  std::lock_guard lock(impl_->call_mu);
  return impl_->Manifest(context_id);
}

Result<FetchResult> Receiver::Fetch(const std::string& context_id, const TensorView& keys, const TensorView& values,
                                    double deadline_s, LevelPolicy& policy) {
  std::lock_guard lock(impl_->call_mu);
  return impl_->Fetch(context_id, keys, values, nullptr, deadline_s, policy);
}

Result<FetchResult> Receiver::Fetch(const std::string& context_id, const KvDestination& destination, double deadline_s,
                                    LevelPolicy& policy) {
  std::lock_guard lock(impl_->call_mu);
  return impl_->Fetch(context_id, TensorView{}, TensorView{}, &destination, deadline_s, policy);
}

Result<FetchResult> Receiver::Impl::Fetch(const std::string& context_id, const TensorView& keys, const TensorView& values,
                                          const KvDestination* destination, double deadline_s, LevelPolicy& policy) {
  const auto start = Clock::now();
  KVSTREAM_ASSIGN_OR_RETURN(ManifestReply reply, Manifest(context_id));
  KVSTREAM_RETURN_IF_ERROR(destination ? CheckManifest(reply, *destination) : CheckManifest(reply, keys, values));
  const FetchManifest& m = reply.manifest;
  const int n = m.num_chunks;
  std::vector<int64_t> chunk_begin(n);
  for (int c = 1; c < n; ++c) chunk_begin[c] = chunk_begin[c - 1] + m.chunk_tokens[c - 1];

  FetchResult result;
  result.context_id = context_id;
  result.manifest = m;
  result.chunks.resize(n);
  std::vector<uint64_t> request_ids(n, 0);  // of each chunk's delivered payload, for its ack

  // A destination in GPU memory: payloads go through the device pipeline.
  std::unique_ptr<stream::DeviceFetch> device_fetch;
  if (destination && (destination->device == Device::kCuda || device_path_for_host_memory)) {
    KVSTREAM_ASSIGN_OR_RETURN(std::shared_ptr<cuda::PipelineDevice> gpu, DeviceForFetch());
    DevicePipelineOptions po;
    po.ring_slots = options.device_ring_slots;
    po.wait_timeout_ms = options.chunk_timeout_ms;
    po.max_chunk_bytes = 1;
    for (const auto& sizes : m.bytes) {
      for (uint64_t b : sizes) po.max_chunk_bytes = std::max(po.max_chunk_bytes, std::min(b, options.max_chunk_bytes));
    }
    std::weak_ptr<EventQueue> weak = events;
    KVSTREAM_ASSIGN_OR_RETURN(device_fetch,
                              stream::DeviceFetch::Start(std::move(gpu), po, *destination, n,
                                                         [weak](int chunk, const Status& status, double decode_s) {
                                                           auto q = weak.lock();
                                                           if (!q) return;
                                                           Event e(Event::kDecoded);
                                                           e.chunk = chunk;
                                                           e.status = status;
                                                           e.decode_s = decode_s;
                                                           q->Push(std::move(e));
                                                         }));
    result.path = "staging";
    result.device = device_fetch->device_name();
  }

  struct Outstanding {
    int chunk = 0;
    Level level = kLevelFp16;
    uint64_t expected = 0;
    std::shared_ptr<std::vector<uint8_t>> buffer;  // host path
    stream::DeviceFetch::Landing landing;          // device path
    double requested_at = 0;
    Clock::time_point timeout_at;
    int attempt = 0;
  };
  std::map<uint64_t, Outstanding> outstanding;
  auto cancel_all = [&] {
    for (auto& [id, o] : outstanding) plane->CancelReceive(id);
    outstanding.clear();
  };

  auto request = [&](int chunk, Level level, int attempt) -> Status {
    int li = -1;
    for (size_t i = 0; i < m.levels.size(); ++i) {
      if (m.levels[i].level == level) li = static_cast<int>(i);
    }
    if (li < 0) {
      return Status::InvalidArgument("policy " + policy.name() + " chose level " + LevelName(level) + " for chunk " +
                                     std::to_string(chunk) + ", which the sender does not offer");
    }
    const uint64_t size = m.bytes[chunk][li];
    if (size > options.max_chunk_bytes) {
      return Status::ResourceExhausted("chunk " + std::to_string(chunk) + " at level " + LevelName(level) + " is " +
                                       std::to_string(size) + " bytes, max_chunk_bytes = " + std::to_string(options.max_chunk_bytes));
    }
    if (destination && level == kLevelText) {
      return Status::Unsupported(
          "level text: its KV is recomputed into host [layers][tokens][channels] views (Receiver::Fetch with keys and "
          "values), not into a KvDestination; choose a KV level for this fetch");
    }
    Outstanding o;
    o.chunk = chunk;
    o.level = level;
    o.expected = size;
    uint8_t* landing;
    std::shared_ptr<void> owner;
    if (device_fetch) {
      KVSTREAM_ASSIGN_OR_RETURN(o.landing, device_fetch->Land());
      landing = o.landing.data;
      owner = o.landing.lease;
    } else {
      o.buffer = std::make_shared<std::vector<uint8_t>>(size);
      landing = o.buffer->data();
      owner = o.buffer;
    }
    o.requested_at = Seconds(start);
    o.timeout_at = Clock::now() + std::chrono::milliseconds(options.chunk_timeout_ms);
    o.attempt = attempt;
    const uint64_t id = plane->NewMessageId();
    std::weak_ptr<EventQueue> weak = events;
    KVSTREAM_RETURN_IF_ERROR(plane->ExpectReceive(id, landing, size, Device::kHost, std::move(owner),
                                                  [weak, id](Status s, uint64_t bytes, uint32_t crc) {
                                                    auto q = weak.lock();
                                                    if (!q) return;
                                                    Event e(Event::kReceived);
                                                    e.id = id;
                                                    e.status = std::move(s);
                                                    e.bytes = bytes;
                                                    e.crc32c = crc;
                                                    q->Push(std::move(e));
                                                  }));
    outstanding.emplace(id, std::move(o));
    connection->Send(ChunkRequest{id, context_id, chunk, level});
    return Status::Ok();
  };

  // The control connection crosses the same path as the data: its RTT (and its delivery rate, when it
  // was measured with the link full) is the policy's starting point. The smoothed RTT still carries the
  // queueing of the last bulk transfer; the path's own RTT is the minimum.
  if (auto info = connection->ReadLinkInfo(); info.ok()) {
    result.link_prior.rtt_s = info->min_rtt_s > 0 ? info->min_rtt_s : info->rtt_s;
    if (!info->app_limited) result.link_prior.bandwidth_bps = info->delivery_rate_bps;
  }
  policy.SetLinkPrior(result.link_prior);
  policy.Begin(m, deadline_s);
  const bool pipelined = options.max_inflight_chunks > 1;
  // Device path: requests waiting for their payload never hold every ring slot, so that a slot always
  // comes free (from a decode) and Land never waits for a receive that only this thread could submit.
  const int max_outstanding = device_fetch ? std::min(options.max_inflight_chunks, device_fetch->ring_slots())
                                           : options.max_inflight_chunks;
  DecodePool pool(device_fetch ? 0 : options.decode_threads, reply, chunk_begin, keys, values, destination, options,
                  events);
  int next = 0, in_decode = 0, decoded = 0;
  double last_received_at = 0;
  Status failure;
  auto fail = [&](Status s) {
    failure = std::move(s);
    cancel_all();
  };

  while (decoded < n && failure.ok()) {
    while (next < n && failure.ok() &&
           (pipelined ? static_cast<int>(outstanding.size()) < max_outstanding
                      : outstanding.empty() && in_decode == 0)) {
      const Level level = policy.Choose(next, Seconds(start));
      Status s = request(next, level, 0);
      if (!s.ok()) fail(std::move(s));
      ++next;
    }
    if (!failure.ok()) break;
    Clock::time_point wake = Clock::now() + std::chrono::milliseconds(options.chunk_timeout_ms);
    for (auto& [id, o] : outstanding) wake = std::min(wake, o.timeout_at);
    auto e = events->Pop(wake);
    if (!e) {
      for (auto& [id, o] : outstanding) {
        if (Clock::now() >= o.timeout_at) {
          fail(Status::Timeout("chunk " + std::to_string(o.chunk) + " at level " + LevelName(o.level) + " (" +
                               std::to_string(o.expected) + " bytes) did not arrive within chunk_timeout_ms = " +
                               std::to_string(options.chunk_timeout_ms)));
          break;
        }
      }
      continue;
    }
    switch (e->kind) {
      case Event::kClosed:
        events->Push(*e);  // later calls fail fast too
        fail(e->status);
        break;
      case Event::kManifest:
        break;
      case Event::kChunkError: {
        auto it = outstanding.find(e->id);
        if (it == outstanding.end()) break;
        fail(e->status.WithContext("chunk " + std::to_string(it->second.chunk)));
        break;
      }
      case Event::kReceived: {
        auto it = outstanding.find(e->id);
        if (it == outstanding.end()) break;
        Outstanding o = std::move(it->second);
        outstanding.erase(it);
        const std::string what = "chunk " + std::to_string(o.chunk) + " at level " + LevelName(o.level);
        if (!e->status.ok()) {
          fail(e->status.WithContext(what));
          break;
        }
        result.bytes += e->bytes;
        if (e->bytes != o.expected) {
          fail(Status::CorruptData(what + ": " + std::to_string(e->bytes) + " bytes arrived, the manifest says " +
                                   std::to_string(o.expected)));
          break;
        }
        // The CRC is checked before the bytes are used: here, or by the device pipeline before its copy.
        Status accepted;
        if (device_fetch) {
          accepted = device_fetch->Submit(o.landing, o.chunk, e->bytes, e->crc32c);
        } else {
          accepted = codec::CheckCrc32c(o.buffer->data(), o.buffer->size(), e->crc32c);
        }
        if (accepted.code() == StatusCode::kCorruptData && o.attempt == 0) {
          ++result.retries;
          Status s = request(o.chunk, o.level, 1);
          if (!s.ok()) fail(std::move(s));
          break;
        }
        if (!accepted.ok()) {
          fail(accepted.code() == StatusCode::kCorruptData
                   ? Status::CorruptData(what + ": again after one re-request: " + accepted.message())
                   : accepted.WithContext(what));
          break;
        }
        request_ids[o.chunk] = e->id;
        ChunkTelemetry& t = result.chunks[o.chunk];
        t.chunk = o.chunk;
        t.level = o.level;
        t.bytes = e->bytes;
        t.requested_at_s = o.requested_at;
        t.received_at_s = std::chrono::duration<double>(e->at - start).count();
        // The link carried the previous chunk until it arrived: this one's bytes could not move before.
        t.transfer_s = t.received_at_s - std::max(o.requested_at, last_received_at);
        last_received_at = std::max(last_received_at, t.received_at_s);
        // Before decode: with chunk i+1 already requested, the policy learns of the link one chunk sooner.
        policy.ObserveTransfer(t);
        ++in_decode;
        if (!device_fetch) pool.Add(DecodeTask{o.chunk, o.level, std::move(o.buffer)});
        break;
      }
      case Event::kDecoded: {
        --in_decode;
        if (!e->status.ok()) {
          fail(e->status.WithContext("decoding chunk " + std::to_string(e->chunk)));
          break;
        }
        ChunkTelemetry& t = result.chunks[e->chunk];
        t.decode_s = e->decode_s;
        t.decoded_at_s = Seconds(start);
        policy.Observe(t);
        connection->Send(ChunkAck{request_ids[e->chunk], t.bytes, t.transfer_s, t.decode_s});
        ++decoded;
        break;
      }
    }
  }
  cancel_all();
  if (!failure.ok()) return failure.WithContext("fetching '" + context_id + "'");
  result.complete = true;
  result.kv_ready_s = Seconds(start);
  result.deadline_met = result.kv_ready_s <= deadline_s;
  for (const ChunkTelemetry& t : result.chunks) {
    result.last_byte_s = std::max(result.last_byte_s, t.received_at_s);
    result.decode_s += t.decode_s;
  }
  return result;
}

}  // namespace kvstream
