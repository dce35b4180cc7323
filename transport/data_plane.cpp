// The UCX data plane: one context and worker per DataPlane, owned by a progress thread.
//
// Every UCP call happens on the progress thread (the worker runs in UCS_THREAD_MODE_SINGLE); other threads
// hand it work through a task queue and wake it with an eventfd. When idle the thread arms the worker and
// sleeps in poll() on the worker's event fd and the eventfd, so an idle DataPlane costs no CPU.
//
// A payload travels as one active message (id kAmId) whose header is AmHeader. The receive handler is
// registered with UCP_AM_FLAG_PERSISTENT_DATA so that eager and rendezvous messages take the same path:
// ucp_am_recv_data_nbx into the posted buffer (for rendezvous UCX writes there directly, zero copy).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "kvstream/transport.h"

namespace kvstream {
namespace {

constexpr unsigned kAmId = 0x4b56;  // "KV"
constexpr uint32_t kAmMagic = 0x4b565331;  // "KVS1"

struct AmHeader {
  uint64_t id;
  uint32_t crc32c;
  uint32_t magic;
};

using Clock = std::chrono::steady_clock;
// How long a destroyed DataPlane waits for UCX to finish or fail the receives it still holds.
constexpr auto kTeardownDrain = std::chrono::seconds(2);

ucs_memory_type_t ToUcx(Device device) {
  return device == Device::kCuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

Status FromUcx(ucs_status_t status, const std::string& what) {
  if (status == UCS_OK) return Status::Ok();
  const std::string message = what + ": " + ucs_status_string(status);
  switch (status) {
    case UCS_ERR_CANCELED: return Status::Cancelled(message);
    case UCS_ERR_TIMED_OUT: case UCS_ERR_ENDPOINT_TIMEOUT: return Status::Timeout(message);
    case UCS_ERR_MESSAGE_TRUNCATED: return Status::ResourceExhausted(message);
    case UCS_ERR_NO_MEMORY: return Status::ResourceExhausted(message);
    case UCS_ERR_UNREACHABLE: case UCS_ERR_CONNECTION_RESET: case UCS_ERR_NOT_CONNECTED:
      return Status::Unavailable(message);
    default: return Status::IoError(message);
  }
}

}  // namespace

struct SendOp {
  uint64_t id = 0;
  PeerId peer = 0;
  AmHeader header{};  // UCX reads the header until the send completes
  const void* data = nullptr;
  uint64_t size = 0;
  Device memory = Device::kHost;
  std::shared_ptr<const void> keep_alive;
  DataPlane::SendDone done;
  Clock::time_point deadline;
  bool timed_out = false;
};

struct PostedReceive {
  uint64_t id = 0;
  void* buffer = nullptr;
  uint64_t capacity = 0;
  Device memory = Device::kHost;
  std::shared_ptr<void> owner;
  DataPlane::ReceiveDone done;
  uint32_t crc32c = 0;
  uint64_t bytes = 0;
  std::atomic<bool> cancelled{false};
};

struct Peer {
  ucp_ep_h ep = nullptr;
  bool failed = false;
  ucs_status_t failure = UCS_OK;
  void* close_request = nullptr;  // a forced close still in progress
  bool erase_when_closed = false;
  std::map<SendOp*, std::unique_ptr<SendOp>> sends;
};

struct DataPlane::Impl {
  DataPlaneOptions options;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int worker_fd = -1;
  int wake_fd = -1;
  std::vector<uint8_t> address;
  bool cuda_memory = false;  // UCX moves CUDA memory (built with CUDA, a cuda transport loaded)
  std::thread thread;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_message_id{1};

  std::mutex tasks_mu;
  std::deque<std::function<void()>> tasks;

  // Progress-thread state.
  std::unordered_map<PeerId, std::unique_ptr<Peer>> peers;
  PeerId next_peer = 1;
  // Error-handler arguments, one per endpoint ever created; they must outlive the endpoint's close.
  std::deque<std::pair<Impl*, PeerId>> handler_args;

  // Posted receives (any thread) and receives under way (progress thread owns, cancel flag shared).
  mutable std::mutex receives_mu;
  std::unordered_map<uint64_t, std::shared_ptr<PostedReceive>> posted;
  std::unordered_map<uint64_t, std::shared_ptr<PostedReceive>> active;
  std::atomic<uint64_t> sends_pending{0};
  // Receive requests UCX still holds (rendezvous data being pulled). A receive whose callback was already
  // failed by Shutdown can still be one: the worker must not be destroyed under it.
  std::atomic<int> ucx_receives_in_flight{0};

  ~Impl() { Shutdown(); }

  void Post(std::function<void()> task) {
    {
      std::lock_guard lock(tasks_mu);
      tasks.push_back(std::move(task));
    }
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  void Run() {
    auto last_activity = Clock::now();
    const auto spin = std::chrono::microseconds(options.busy_poll_us);
    while (true) {
      std::deque<std::function<void()>> batch;
      {
        std::lock_guard lock(tasks_mu);
        batch.swap(tasks);
      }
      for (auto& task : batch) task();
      if (stopping.load() && batch.empty()) break;
      unsigned events = 0;
      while (unsigned n = ucp_worker_progress(worker)) events += n;
      const auto now = Clock::now();
      if (events > 0 || !batch.empty()) last_activity = now;
      ReapClosedAndFailed();
      CheckTimeouts();
      {
        std::lock_guard lock(tasks_mu);
        if (!tasks.empty()) continue;
      }
      // Right after activity more usually follows (the next fragment, the rendezvous reply): poll for a
      // short while before sleeping, so a busy transfer does not pay a wakeup per message. Idle, it sleeps.
      // Each round yields: a receiver's decode threads want the same cores (on 2 vCPUs a spin that did not
      // yield made a shaped fetch 10 % slower).
      if (now - last_activity < spin) {
        std::this_thread::yield();
        continue;
      }
      const ucs_status_t armed = ucp_worker_arm(worker);
      if (armed == UCS_ERR_BUSY) continue;
      pollfd fds[2] = {{worker_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
      const int ready = ::poll(fds, 2, options.poll_interval_ms);
      if (ready > 0 && (fds[1].revents & POLLIN)) {
        uint64_t count;
        [[maybe_unused]] ssize_t n = ::read(wake_fd, &count, sizeof count);
      }
    }
  }

  // Closes endpoints whose peer failed, finishes forced closes, and fails the sends UCX did not complete.
  void ReapClosedAndFailed() {
    for (auto it = peers.begin(); it != peers.end();) {
      Peer& peer = *it->second;
      if (peer.failed && peer.ep != nullptr) CloseEndpoint(peer, peer.failure);
      if (peer.close_request != nullptr && ucp_request_check_status(peer.close_request) != UCS_INPROGRESS) {
        ucp_request_free(peer.close_request);
        peer.close_request = nullptr;
        FailSends(peer, peer.failure);
      }
      if (peer.erase_when_closed && peer.ep == nullptr && peer.close_request == nullptr) {
        it = peers.erase(it);
      } else {
        ++it;
      }
    }
  }

  bool AnyClosing() const {
    for (const auto& [id, peer] : peers) {
      if (peer->close_request != nullptr) return true;
    }
    return false;
  }

  void CheckTimeouts() {
    const auto now = Clock::now();
    for (auto& [id, peer] : peers) {
      if (peer->ep == nullptr) continue;
      bool expired = false;
      for (auto& [raw, op] : peer->sends) {
        if (now >= op->deadline) {
          op->timed_out = true;
          expired = true;
        }
      }
      if (expired) CloseEndpoint(*peer, UCS_ERR_TIMED_OUT);
    }
  }

  // Force-closes an endpoint: UCX completes its outstanding sends with an error; once the close has
  // finished, any send still without a completion is failed here, so the buffers are no longer in use.
  void CloseEndpoint(Peer& peer, ucs_status_t why) {
    if (peer.ep == nullptr) return;
    peer.failed = true;
    if (peer.failure == UCS_OK) peer.failure = why;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(peer.ep, &param);
    peer.ep = nullptr;
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
      peer.close_request = request;
    } else {
      FailSends(peer, peer.failure);
    }
  }

  void FailSends(Peer& peer, ucs_status_t why) {
    auto sends = std::move(peer.sends);
    peer.sends.clear();
    for (auto& [raw, op] : sends) CompleteSend(std::move(op), why);
  }

  void CompleteSend(std::unique_ptr<SendOp> op, ucs_status_t status) {
    sends_pending.fetch_sub(1);
    Status result;
    if (op->timed_out) {
      result = Status::Timeout("data plane: send of message " + std::to_string(op->id) + " (" +
                               std::to_string(op->size) + " bytes) did not complete within send_timeout_ms = " +
                               std::to_string(options.send_timeout_ms));
    } else {
      result = FromUcx(status, "data plane: send of message " + std::to_string(op->id));
    }
    auto done = std::move(op->done);
    op.reset();
    if (done) done(std::move(result));
  }

  void StartSend(std::unique_ptr<SendOp> op) {
    auto it = peers.find(op->peer);
    if (it == peers.end() || it->second->ep == nullptr) {
      const ucs_status_t why = it == peers.end() ? UCS_ERR_NOT_CONNECTED : it->second->failure;
      CompleteSend(std::move(op), why == UCS_OK ? UCS_ERR_NOT_CONNECTED : why);
      return;
    }
    Peer& peer = *it->second;
    SendOp* raw = op.get();
    peer.sends.emplace(raw, std::move(op));
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.cb.send = &SendCallback;
    param.user_data = new SendContext{this, raw->peer, raw};
    param.memory_type = ToUcx(raw->memory);
    ucs_status_ptr_t request =
        ucp_am_send_nbx(peer.ep, kAmId, &raw->header, sizeof raw->header, raw->data, raw->size, &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) {
      delete static_cast<SendContext*>(param.user_data);
      auto node = peer.sends.extract(raw);
      CompleteSend(std::move(node.mapped()), request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
    }
  }

  struct SendContext {
    Impl* impl;
    PeerId peer;
    SendOp* op;
  };

  static void SendCallback(void* request, ucs_status_t status, void* user_data) {
    auto* ctx = static_cast<SendContext*>(user_data);
    ucp_request_free(request);
    Impl* impl = ctx->impl;
    auto it = impl->peers.find(ctx->peer);
    if (it != impl->peers.end()) {
      auto node = it->second->sends.extract(ctx->op);
      if (!node.empty()) impl->CompleteSend(std::move(node.mapped()), status);
    }
    delete ctx;
  }

  static void EndpointError(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* ctx = static_cast<std::pair<Impl*, PeerId>*>(arg);
    auto it = ctx->first->peers.find(ctx->second);
    if (it != ctx->first->peers.end() && it->second->ep == ep) {
      it->second->failed = true;
      it->second->failure = status;
    }
  }

  // Active-message handler: matches the message to its posted receive and pulls the data into it.
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param) {
    auto* impl = static_cast<Impl*>(arg);
    AmHeader h;
    if (header_length != sizeof h) return Reject(impl, data, param, UCS_ERR_INVALID_PARAM);
    std::memcpy(&h, header, sizeof h);
    if (h.magic != kAmMagic) return Reject(impl, data, param, UCS_ERR_INVALID_PARAM);
    std::shared_ptr<PostedReceive> recv;
    {
      std::lock_guard lock(impl->receives_mu);
      auto it = impl->posted.find(h.id);
      if (it == impl->posted.end()) return Reject(impl, data, param, UCS_ERR_NO_ELEM);
      recv = std::move(it->second);
      impl->posted.erase(it);
      impl->active.emplace(h.id, recv);
    }
    recv->crc32c = h.crc32c;
    if (length > recv->capacity) {
      impl->FinishReceive(recv, UCS_ERR_MESSAGE_TRUNCATED, length);
      return Reject(impl, data, param, UCS_ERR_MESSAGE_TRUNCATED);
    }
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    p.cb.recv_am = &RecvCallback;
    p.user_data = new std::pair<Impl*, uint64_t>(impl, h.id);
    p.memory_type = ToUcx(recv->memory);
    recv->bytes = length;
    ucs_status_ptr_t request = ucp_am_recv_data_nbx(impl->worker, data, recv->buffer, length, &p);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) {
      delete static_cast<std::pair<Impl*, uint64_t>*>(p.user_data);
      impl->FinishReceive(recv, request == nullptr ? UCS_OK : UCS_PTR_STATUS(request), length);
    } else {
      impl->ucx_receives_in_flight.fetch_add(1);
    }
    return UCS_INPROGRESS;
  }

  // Drops a message: a rendezvous sender's send then fails with `why`; eager data is freed by UCX when
  // the handler returns UCS_OK.
  static ucs_status_t Reject(Impl*, void*, const ucp_am_recv_param_t* param, ucs_status_t why) {
    return (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) ? why : UCS_OK;
  }

  static void RecvCallback(void* request, ucs_status_t status, size_t length, void* user_data) {
    auto* ctx = static_cast<std::pair<Impl*, uint64_t>*>(user_data);
    Impl* impl = ctx->first;
    std::shared_ptr<PostedReceive> recv;
    {
      std::lock_guard lock(impl->receives_mu);
      auto it = impl->active.find(ctx->second);
      if (it != impl->active.end()) recv = it->second;
    }
    delete ctx;
    ucp_request_free(request);
    impl->ucx_receives_in_flight.fetch_sub(1);
    if (recv) impl->FinishReceive(recv, status, length);
  }

  void FinishReceive(const std::shared_ptr<PostedReceive>& recv, ucs_status_t status, uint64_t length) {
    {
      std::lock_guard lock(receives_mu);
      active.erase(recv->id);
    }
    if (recv->cancelled.load()) return;
    Status result;
    if (status == UCS_ERR_MESSAGE_TRUNCATED) {
      result = Status::ResourceExhausted("data plane: message " + std::to_string(recv->id) + " carries " +
                                         std::to_string(length) + " bytes, posted buffer holds " +
                                         std::to_string(recv->capacity));
    } else {
      result = FromUcx(status, "data plane: receive of message " + std::to_string(recv->id));
    }
    auto done = std::move(recv->done);
    if (done) done(std::move(result), length, recv->crc32c);
  }

  void Shutdown() {
    if (!thread.joinable()) return;
    Post([this] {
      for (auto& [id, peer] : peers) CloseEndpoint(*peer, UCS_ERR_CANCELED);
    });
    stopping.store(true);
    Post([] {});
    thread.join();
    // Let the forced closes finish (bounded), then fail every receive still posted or under way.
    const auto limit = Clock::now() + std::chrono::seconds(2);
    while (AnyClosing() && Clock::now() < limit) {
      ucp_worker_progress(worker);
      ReapClosedAndFailed();
    }
    for (auto& [id, peer] : peers) FailSends(*peer, UCS_ERR_CANCELED);
    std::unordered_map<uint64_t, std::shared_ptr<PostedReceive>> left;
    {
      std::lock_guard lock(receives_mu);
      left.swap(posted);
      for (auto& [id, r] : active) left.emplace(id, r);
      active.clear();
    }
    for (auto& [id, r] : left) {
      if (r->cancelled.load() || !r->done) continue;
      r->done(Status::Cancelled("data plane: shut down before message " + std::to_string(id) + " arrived"), 0, 0);
    }
  }
};

DataPlane::DataPlane(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

DataPlane::~DataPlane() {
  if (!impl_) return;
  impl_->Shutdown();
  bool destroy = true;
  if (impl_->worker) {
    // UCX 1.13 asserts in ucp_worker_destroy when an endpoint still has requests: wire-up messages
    // queued on an endpoint UCX made for a peer that connected moments ago, or the rendezvous of a
    // receive whose sender just died (UCX fails it once it notices the closed connection). Progress
    // until those are gone, within bounds, so that a dead peer cannot hold the destructor.
    const auto start = Clock::now();
    auto last_activity = start;
    while (true) {
      const auto now = Clock::now();
      const bool receives_left = impl_->ucx_receives_in_flight.load() > 0;
      if (receives_left ? now - start >= kTeardownDrain
                        : (now - last_activity >= std::chrono::milliseconds(20) || now - start >= std::chrono::milliseconds(100))) {
        break;
      }
      if (ucp_worker_progress(impl_->worker) != 0) last_activity = Clock::now();
    }
    // A peer that holds a rendezvous open and neither completes nor fails it: destroying the worker now
    // would abort the process inside UCX, so the worker and its context are left to the process's exit.
    if (impl_->ucx_receives_in_flight.load() > 0) {
      std::fprintf(stderr, "kvstream data plane: %d receive(s) still held by UCX after %lld ms; leaving the UCX worker "
                   "undestroyed rather than aborting\n", impl_->ucx_receives_in_flight.load(),
                   static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(kTeardownDrain).count()));
      destroy = false;
    } else {
      ucp_worker_destroy(impl_->worker);
    }
  }
  if (impl_->context && destroy) ucp_cleanup(impl_->context);
  if (impl_->wake_fd >= 0) ::close(impl_->wake_fd);
  impl_->worker = nullptr;
  impl_->context = nullptr;
}

Result<std::shared_ptr<DataPlane>> DataPlane::Create(const DataPlaneOptions& options) {
  if (options.poll_interval_ms <= 0 || options.send_timeout_ms <= 0) {
    return Status::InvalidArgument("data plane options: poll_interval_ms and send_timeout_ms must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // Holding the object before UCX resources exist lets the destructor release whatever was made.
  std::shared_ptr<DataPlane> plane(new DataPlane(std::move(impl)));
  Impl& d = *plane->impl_;

  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);  // honours UCX_TLS, UCX_NET_DEVICES, ...
  if (s != UCS_OK) return FromUcx(s, "data plane: reading UCX configuration");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "kvstream";
  s = ucp_init(&params, config, &d.context);
  ucp_config_release(config);
  if (s != UCS_OK) return FromUcx(s, "data plane: ucp_init");
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(d.context, &attr) == UCS_OK) {
    d.cuda_memory = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  }

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
  s = ucp_worker_create(d.context, &wparams, &d.worker);
  if (s != UCS_OK) return FromUcx(s, "data plane: ucp_worker_create");
  s = ucp_worker_get_efd(d.worker, &d.worker_fd);
  if (s != UCS_OK) return FromUcx(s, "data plane: ucp_worker_get_efd");

  ucp_address_t* address = nullptr;
  size_t address_length = 0;
  s = ucp_worker_get_address(d.worker, &address, &address_length);
  if (s != UCS_OK) return FromUcx(s, "data plane: ucp_worker_get_address");
  const auto* bytes = reinterpret_cast<const uint8_t*>(address);
  d.address.assign(bytes, bytes + address_length);
  ucp_worker_release_address(d.worker, address);

  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = kAmId;
  handler.cb = &Impl::OnAm;
  handler.arg = &d;
  handler.flags = UCP_AM_FLAG_PERSISTENT_DATA;
  s = ucp_worker_set_am_recv_handler(d.worker, &handler);
  if (s != UCS_OK) return FromUcx(s, "data plane: ucp_worker_set_am_recv_handler");

  d.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (d.wake_fd < 0) return Status::IoError("data plane: eventfd: " + std::string(std::strerror(errno)));
  d.thread = std::thread([&d] { d.Run(); });
  return plane;
}

bool DataPlane::cuda_memory() const { return impl_->cuda_memory; }

const std::vector<uint8_t>& DataPlane::address() const { return impl_->address; }

Result<PeerId> DataPlane::Connect(const std::vector<uint8_t>& peer_address) {
  if (peer_address.empty()) return Status::InvalidArgument("data plane: empty peer worker address");
  auto promise = std::make_shared<std::promise<Result<PeerId>>>();
  auto future = promise->get_future();
  Impl* d = impl_.get();
  d->Post([d, peer_address, promise] {
    auto peer = std::make_unique<Peer>();
    const PeerId id = d->next_peer++;
    d->handler_args.emplace_back(d, id);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Impl::EndpointError;
    params.err_handler.arg = &d->handler_args.back();
    const ucs_status_t s = ucp_ep_create(d->worker, &params, &peer->ep);
    if (s != UCS_OK) {
      promise->set_value(FromUcx(s, "data plane: ucp_ep_create"));
      return;
    }
    d->peers.emplace(id, std::move(peer));
    promise->set_value(id);
  });
  if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    return Status::Timeout("data plane: endpoint creation did not finish within 10 s");
  }
  return future.get();
}

void DataPlane::Disconnect(PeerId peer) {
  Impl* d = impl_.get();
  d->Post([d, peer] {
    auto it = d->peers.find(peer);
    if (it == d->peers.end()) return;
    it->second->erase_when_closed = true;
    d->CloseEndpoint(*it->second, UCS_ERR_CANCELED);
  });
}

uint64_t DataPlane::NewMessageId() { return impl_->next_message_id.fetch_add(1); }

void DataPlane::Send(PeerId peer, uint64_t id, uint32_t crc32c, const void* data, uint64_t size, Device memory,
                     std::shared_ptr<const void> keep_alive, SendDone done) {
  Impl* d = impl_.get();
  if (size > d->options.max_message_bytes) {
    done(Status::ResourceExhausted("data plane: message of " + std::to_string(size) +
                                   " bytes exceeds max_message_bytes = " + std::to_string(d->options.max_message_bytes)));
    return;
  }
  auto op = std::make_unique<SendOp>();
  op->id = id;
  op->peer = peer;
  op->header = AmHeader{id, crc32c, kAmMagic};
  op->data = data;
  op->size = size;
  op->memory = memory;
  op->keep_alive = std::move(keep_alive);
  op->done = std::move(done);
  op->deadline = Clock::now() + std::chrono::milliseconds(d->options.send_timeout_ms);
  d->sends_pending.fetch_add(1);
  if (d->stopping.load()) {
    d->CompleteSend(std::move(op), UCS_ERR_CANCELED);
    return;
  }
  auto shared = std::make_shared<std::unique_ptr<SendOp>>(std::move(op));
  d->Post([d, shared] { d->StartSend(std::move(*shared)); });
}

Status DataPlane::ExpectReceive(uint64_t id, void* buffer, uint64_t capacity, Device memory,
                                std::shared_ptr<void> owner, ReceiveDone done) {
  Impl* d = impl_.get();
  if (capacity > d->options.max_message_bytes) {
    return Status::ResourceExhausted("data plane: receive buffer of " + std::to_string(capacity) +
                                     " bytes exceeds max_message_bytes = " + std::to_string(d->options.max_message_bytes));
  }
  if (d->stopping.load()) return Status::Cancelled("data plane: shutting down");
  auto recv = std::make_shared<PostedReceive>();
  recv->id = id;
  recv->buffer = buffer;
  recv->capacity = capacity;
  recv->memory = memory;
  recv->owner = std::move(owner);
  recv->done = std::move(done);
  std::lock_guard lock(d->receives_mu);
  if (!d->posted.emplace(id, std::move(recv)).second) {
    return Status::InvalidArgument("data plane: message id " + std::to_string(id) + " already posted");
  }
  return Status::Ok();
}

void DataPlane::CancelReceive(uint64_t id) {
  Impl* d = impl_.get();
  std::lock_guard lock(d->receives_mu);
  if (auto it = d->posted.find(id); it != d->posted.end()) {
    it->second->cancelled.store(true);
    d->posted.erase(it);
  }
  if (auto it = d->active.find(id); it != d->active.end()) it->second->cancelled.store(true);
}

DataPlane::Stats DataPlane::stats() const {
  Stats s;
  s.sends_pending = impl_->sends_pending.load();
  std::lock_guard lock(impl_->receives_mu);
  s.receives_posted = impl_->posted.size() + impl_->active.size();
  return s;
}

}  // namespace kvstream
