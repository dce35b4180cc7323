// The Sender: serves registered contexts' chunks to any number of receivers.
//
// Control messages arrive on the control server's I/O thread. A chunk request is answered from the cache
// when it can be; otherwise the encode is handed to the encode threads, so one receiver's cache miss never
// stalls another's requests. Payloads leave through the data plane, which holds the encoded bytes alive
// until UCX has finished with them.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>

#include "kvstream/codec.h"
#include "kvstream/stream.h"
#include "stream/chunk_cache.h"
#include "stream/chunk_coding.h"
#include "stream/testing/fault_injection.h"

namespace kvstream {

using stream::ChunkCache;
using stream::EncodedChunk;

namespace {

constexpr size_t kMaxContextIdBytes = 256;

struct Context {
  std::string id;
  ContextSpec spec;
  float fine_min_importance = 0.0f;  // the fine rows' threshold: SenderOptions::fine_fraction of its tokens
  ManifestReply reply;  // what GetManifest answers
  std::vector<int64_t> chunk_begin;
  // Encodes read the caller's views under a shared lock; Unregister takes it exclusively, so it returns
  // only when no encode is still reading them.
  std::shared_mutex use;
  bool retired = false;
};

struct Session {
  std::shared_ptr<ControlConnection> connection;
  PeerId peer = 0;
  std::atomic<int> inflight{0};
};

// The profile's measured quality of the lossy levels for the sender's scheme; null without a profile, and
// when the profile records that the transform's or predicted levels were measured with other fine rows
// than the context's chunks are coded with (`fine_rows`: whether the context has any).
const std::vector<LevelQuality>* MeasuredQuality(const SenderOptions& options, bool fine_rows) {
  if (!options.profile) return nullptr;
  const std::optional<MeasuredFineRows> measured = options.profile->measured_fine_rows();
  if (measured && (options.scheme == QuantScheme::kTransform || options.scheme == QuantScheme::kPredicted)) {
    const MeasuredFineRows coded = fine_rows ? MeasuredFineRows{options.fine_fraction, options.fine_level} : MeasuredFineRows{};
    if (measured->fraction != coded.fraction || measured->level != coded.level) return nullptr;
  }
  return &options.profile->QualityOf(options.scheme);
}

}  // namespace

struct Sender::Impl {
  SenderOptions options;
  std::shared_ptr<DataPlane> plane;
  std::unique_ptr<ControlServer> server;
  ChunkCache cache;

  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<Context>> contexts;
  std::map<Session*, std::shared_ptr<Session>> sessions;

  std::mutex work_mu;
  std::condition_variable work_cv;
  std::deque<std::function<void()>> work;
  bool stopping = false;
  std::vector<std::thread> encoders;

  std::atomic<uint64_t> chunks_sent{0}, bytes_sent{0}, encodes{0};

  std::mutex fault_mu;
  testing::FaultHook fault_hook;  // SenderTestPeer's; empty outside the fault tests

  explicit Impl(SenderOptions o) : options(std::move(o)), cache(options.cache_bytes) {}

  void EncoderLoop() {
    while (true) {
      std::function<void()> task;
      {
        std::unique_lock lock(work_mu);
        work_cv.wait(lock, [&] { return stopping || !work.empty(); });
        if (work.empty()) return;
        task = std::move(work.front());
        work.pop_front();
      }
      task();
    }
  }

  void Submit(std::function<void()> task) {
    {
      std::lock_guard lock(work_mu);
      work.push_back(std::move(task));
    }
    work_cv.notify_one();
  }

  Result<std::shared_ptr<const EncodedChunk>> Encode(Context& context, int chunk, Level level) {
    std::shared_lock lock(context.use);
    if (context.retired) return Status::NotFound("context '" + context.id + "' was unregistered");
    const int64_t begin = context.chunk_begin[chunk];
    const int64_t tokens = context.reply.manifest.chunk_tokens[chunk];
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                              stream::EncodeContextChunk(context.spec, begin, tokens, level, options,
                                                         context.fine_min_importance, 1));
    encodes.fetch_add(1);
    auto entry = std::make_shared<EncodedChunk>();
    entry->crc32c = stream::PayloadCrc32c(bytes.data(), bytes.size());
    entry->bytes = std::move(bytes);
    return std::shared_ptr<const EncodedChunk>(std::move(entry));
  }

  void OnAccept(std::shared_ptr<ControlConnection> connection) {
    {
      std::lock_guard lock(mu);
      if (static_cast<int>(sessions.size()) >= options.max_connections) {
        connection->Close(Status::ResourceExhausted("sender: max_connections = " + std::to_string(options.max_connections) +
                                                    " reached"));
        return;
      }
    }
    auto peer = plane->Connect(connection->peer_worker_address());
    if (!peer.ok()) {
      connection->Send(ErrorMessage{peer.status().code(), "sender cannot reach the data plane address: " + peer.status().message()});
      connection->Close(peer.status());
      return;
    }
    auto session = std::make_shared<Session>();
    session->connection = connection;
    session->peer = *peer;
    {
      std::lock_guard lock(mu);
      sessions.emplace(session.get(), session);
    }
    std::weak_ptr<Session> weak = session;
    connection->Start([this, weak](ControlMessage message) {
      if (auto s = weak.lock()) OnMessage(s, std::move(message));
    },
                      [this, weak](Status) {
                        auto s = weak.lock();
                        if (!s) return;
                        plane->Disconnect(s->peer);
                        std::lock_guard lock(mu);
                        sessions.erase(s.get());
                      });
  }

  void OnMessage(const std::shared_ptr<Session>& session, ControlMessage message) {
    if (auto* req = std::get_if<ManifestRequest>(&message)) {
      std::shared_ptr<Context> context = Find(req->context_id);
      if (!context) {
        session->connection->Send(ChunkError{0, StatusCode::kNotFound, "context '" + req->context_id + "' is not registered"});
        return;
      }
      session->connection->Send(context->reply);
      return;
    }
    if (auto* req = std::get_if<ChunkRequest>(&message)) return OnChunkRequest(session, *req);
    // Acks carry the receiver's telemetry; the sender has no use for them beyond keeping the link alive.
  }

  std::shared_ptr<Context> Find(const std::string& id) {
    std::lock_guard lock(mu);
    auto it = contexts.find(id);
    return it == contexts.end() ? nullptr : it->second;
  }

  void OnChunkRequest(const std::shared_ptr<Session>& session, const ChunkRequest& req) {
    auto fail = [&](StatusCode code, std::string message) {
      session->connection->Send(ChunkError{req.request_id, code, std::move(message)});
    };
    std::shared_ptr<Context> context = Find(req.context_id);
    if (!context) return fail(StatusCode::kNotFound, "context '" + req.context_id + "' is not registered");
    const FetchManifest& m = context->reply.manifest;
    if (req.chunk < 0 || req.chunk >= m.num_chunks) {
      return fail(StatusCode::kInvalidArgument, "chunk = " + std::to_string(req.chunk) + " is not in 0.." +
                                                    std::to_string(m.num_chunks - 1));
    }
    const bool offered = std::any_of(m.levels.begin(), m.levels.end(), [&](const LevelInfo& l) { return l.level == req.level; });
    if (!offered) return fail(StatusCode::kInvalidArgument, "level " + LevelName(req.level) + " is not offered for this context");
    if (session->inflight.fetch_add(1) >= options.max_inflight_per_connection) {
      session->inflight.fetch_sub(1);
      return fail(StatusCode::kResourceExhausted, "more than max_inflight_per_connection = " +
                                                      std::to_string(options.max_inflight_per_connection) + " chunk requests outstanding");
    }
    if (auto cached = cache.Get(req.context_id, req.chunk, req.level)) return Send(session, req, std::move(cached));
    Submit([this, session, context, req] {
      auto encoded = Encode(*context, req.chunk, req.level);
      if (!encoded.ok()) {
        session->inflight.fetch_sub(1);
        session->connection->Send(ChunkError{req.request_id, encoded.status().code(), encoded.status().message()});
        return;
      }
      cache.Put(req.context_id, req.chunk, req.level, *encoded);
      Send(session, req, *encoded);
    });
  }

  void Send(const std::shared_ptr<Session>& session, const ChunkRequest& req, std::shared_ptr<const EncodedChunk> chunk) {
    testing::FaultAction fault = testing::FaultAction::kNone;
    {
      std::lock_guard lock(fault_mu);
      if (fault_hook) fault = fault_hook(req);
    }
    if (fault == testing::FaultAction::kDrop) {
      session->inflight.fetch_sub(1);
      return;
    }
    if (fault == testing::FaultAction::kCorrupt && !chunk->bytes.empty()) {
      auto copy = std::make_shared<EncodedChunk>(*chunk);
      copy->bytes[copy->bytes.size() / 2] ^= 0x5a;  // after the CRC was stamped: the receiver must notice
      chunk = std::move(copy);
    }
    const uint64_t size = chunk->bytes.size();
    std::weak_ptr<Session> weak = session;
    plane->Send(session->peer, req.request_id, chunk->crc32c, chunk->bytes.data(), size, Device::kHost, chunk,
                [this, weak, size](Status status) {
                  auto s = weak.lock();
                  if (s) s->inflight.fetch_sub(1);
                  if (status.ok()) {
                    chunks_sent.fetch_add(1);
                    bytes_sent.fetch_add(size);
                  } else if (s) {
                    // The receiver is gone or stopped pulling: the session cannot continue.
                    s->connection->Close(status.WithContext("sending a chunk"));
                  }
                });
  }

  void Shutdown() {
    if (server) server->Stop();
    {
      std::lock_guard lock(work_mu);
      stopping = true;
      work.clear();
    }
    work_cv.notify_all();
    for (auto& t : encoders) t.join();
    encoders.clear();
    std::map<Session*, std::shared_ptr<Session>> left;
    {
      std::lock_guard lock(mu);
      left.swap(sessions);
    }
    left.clear();     // connections are released after the server stopped and before it is destroyed
    server.reset();
    plane.reset();    // fails pending sends
  }
};

Sender::Sender(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sender::~Sender() { impl_->Shutdown(); }

Result<std::unique_ptr<Sender>> Sender::Start(SenderOptions options) {
  if (options.chunk_tokens <= 0) return Status::InvalidArgument("sender: chunk_tokens = " + std::to_string(options.chunk_tokens) + " must be positive");
  if (options.encode_threads <= 0 || options.max_inflight_per_connection <= 0 || options.max_connections <= 0) {
    return Status::InvalidArgument("sender: encode_threads, max_inflight_per_connection and max_connections must be positive");
  }
  if (options.scheme != QuantScheme::kChannelUniform && (!options.profile || !options.profile->Supports(options.scheme))) {
    return Status::InvalidArgument(std::string("sender: scheme ") + SchemeName(options.scheme) +
                                   " needs a profile learned with it (kvstream profile --transform" +
                                   (options.scheme == QuantScheme::kPredicted ? " --predict)" : ")"));
  }
  if (!(options.fine_fraction >= 0.0 && options.fine_fraction <= 1.0)) {
    return Status::InvalidArgument("sender: fine_fraction = " + std::to_string(options.fine_fraction) + " outside [0, 1]");
  }
  if (options.profile) options.control.profile_hash = options.profile->hash();
  auto impl = std::make_unique<Impl>(std::move(options));
  Impl* d = impl.get();
  std::unique_ptr<Sender> sender(new Sender(std::move(impl)));
  KVSTREAM_ASSIGN_OR_RETURN(d->plane, DataPlane::Create(d->options.data));
  for (int i = 0; i < d->options.encode_threads; ++i) d->encoders.emplace_back([d] { d->EncoderLoop(); });
  KVSTREAM_ASSIGN_OR_RETURN(d->server, ControlServer::Listen(d->options.listen_host, d->options.listen_port, d->options.control,
                                                              d->plane->address(),
                                                              [d](std::shared_ptr<ControlConnection> c) { d->OnAccept(std::move(c)); }));
  return sender;
}

Result<std::unique_ptr<Sender>> SenderTestPeer::StartWithFaults(SenderOptions options, testing::FaultHook hook) {
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Sender> sender, Sender::Start(std::move(options)));
  std::lock_guard lock(sender->impl_->fault_mu);
  sender->impl_->fault_hook = std::move(hook);
  return sender;
}

Status Sender::Register(const std::string& id, ContextSpec spec) {
  Impl& d = *impl_;
  if (id.empty() || id.size() > kMaxContextIdBytes) {
    return Status::InvalidArgument("context id length = " + std::to_string(id.size()) + " must be 1.." + std::to_string(kMaxContextIdBytes));
  }
  KVSTREAM_RETURN_IF_ERROR(ValidateView(spec.keys, "keys"));
  KVSTREAM_RETURN_IF_ERROR(ValidateView(spec.values, "values"));
  for (int i = 0; i < 3; ++i) {
    if (spec.keys.shape[i] != spec.values.shape[i]) {
      return Status::InvalidArgument("context '" + id + "': keys and values differ in dimension " + std::to_string(i));
    }
  }
  {
    std::lock_guard lock(d.mu);
    if (d.contexts.count(id)) return Status::InvalidArgument("context '" + id + "' is already registered");
  }
  const int64_t total = spec.keys.tokens();
  if (total <= 0) return Status::InvalidArgument("context '" + id + "' has no tokens");
  const bool has_text = static_cast<int64_t>(spec.token_ids.size()) == total;
  if (!spec.token_ids.empty() && !has_text) {
    return Status::InvalidArgument("context '" + id + "': " + std::to_string(spec.token_ids.size()) + " token ids for " +
                                   std::to_string(total) + " tokens");
  }
  if (!spec.importance.empty() && static_cast<int64_t>(spec.importance.size()) != total) {
    return Status::InvalidArgument("context '" + id + "': " + std::to_string(spec.importance.size()) +
                                   " importance values for " + std::to_string(total) + " tokens");
  }
  std::vector<Level> levels = d.options.levels;
  if (levels.empty()) {
    levels = {kLevelFp16, kLevelInt8};
    const size_t ladder = d.options.profile ? d.options.profile->ladder().size()
                                            : DefaultLadder(static_cast<int>(spec.keys.layers())).size();
    for (size_t l = 1; l <= ladder; ++l) levels.push_back(static_cast<Level>(l));
    if (has_text) levels.push_back(kLevelText);
  }

  auto context = std::make_shared<Context>();
  context->id = id;
  context->spec = std::move(spec);
  context->fine_min_importance =
      FineRowsThreshold(context->spec.importance.data(), static_cast<int64_t>(context->spec.importance.size()),
                        d.options.fine_fraction);
  ManifestReply& reply = context->reply;
  reply.context_id = id;
  reply.layers = static_cast<int>(context->spec.keys.layers());
  reply.channels = static_cast<int>(context->spec.keys.channels());
  reply.dtype = context->spec.keys.dtype;
  FetchManifest& m = reply.manifest;
  m.total_tokens = static_cast<int>(total);
  for (int64_t begin = 0; begin < total; begin += d.options.chunk_tokens) {
    context->chunk_begin.push_back(begin);
    m.chunk_tokens.push_back(static_cast<int>(std::min<int64_t>(d.options.chunk_tokens, total - begin)));
  }
  m.num_chunks = static_cast<int>(m.chunk_tokens.size());
  for (Level level : levels) {
    if (!IsValidLevel(level)) return Status::InvalidArgument("offered level " + std::to_string(level) + " is not valid");
    if (level == kLevelText && !has_text) return Status::InvalidArgument("level text offered for context '" + id + "' without token ids");
    LevelInfo info;
    info.level = level;
    if (level == kLevelFp16 || level == kLevelText) {
      info.quality = 1.0;
    } else if (const std::vector<LevelQuality>* measured =
                   MeasuredQuality(d.options, std::isfinite(context->fine_min_importance));
               IsLossyLevel(level) && measured && static_cast<size_t>(level) <= measured->size()) {
      info.quality = (*measured)[level - 1].top1_agreement;  // NaN when not measured
    } else {
      info.quality = std::numeric_limits<double>::quiet_NaN();  // not measured for this sender
    }
    m.levels.push_back(info);
  }
  m.bytes.assign(m.num_chunks, std::vector<uint64_t>(m.levels.size(), 0));
  for (int c = 0; c < m.num_chunks; ++c) {
    for (size_t l = 0; l < m.levels.size(); ++l) {
      auto encoded = d.Encode(*context, c, m.levels[l].level);
      if (!encoded.ok()) return encoded.status().WithContext("registering context '" + id + "' chunk " + std::to_string(c));
      m.bytes[c][l] = (*encoded)->bytes.size();
      d.cache.Put(id, c, m.levels[l].level, *encoded);
    }
  }
  std::lock_guard lock(d.mu);
  if (!d.contexts.emplace(id, context).second) return Status::InvalidArgument("context '" + id + "' is already registered");
  return Status::Ok();
}

Status Sender::Unregister(const std::string& id) {
  Impl& d = *impl_;
  std::shared_ptr<Context> context;
  {
    std::lock_guard lock(d.mu);
    auto it = d.contexts.find(id);
    if (it == d.contexts.end()) return Status::NotFound("context '" + id + "' is not registered");
    context = std::move(it->second);
    d.contexts.erase(it);
  }
  {
    std::unique_lock lock(context->use);
    context->retired = true;
  }
  d.cache.EraseContext(id);
  return Status::Ok();
}

int Sender::port() const { return impl_->server->port(); }

Sender::Stats Sender::stats() const {
  Stats s;
  {
    std::lock_guard lock(impl_->mu);
    s.connections = static_cast<int>(impl_->sessions.size());
  }
  s.chunks_sent = impl_->chunks_sent.load();
  s.bytes_sent = impl_->bytes_sent.load();
  s.cache_bytes = impl_->cache.bytes();
  s.encodes = impl_->encodes.load();
  s.sends_pending = impl_->plane->stats().sends_pending;
  return s;
}

}  // namespace kvstream
