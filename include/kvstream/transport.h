// kvstream/transport.h — moving KV chunks between nodes.
//
// Two planes. The data plane (DataPlane) moves chunk payloads with UCX active messages: small payloads go
// eagerly, large ones by rendezvous, where UCX pulls the bytes straight into the buffer the receiver posted
// (RDMA, shared memory or TCP, whatever UCX finds; UCX_TLS and friends are respected). The control plane
// (ControlServer / ConnectControl) is a TCP connection carrying small length-prefixed typed messages: the
// handshake (protocol version, model and profile hashes, UCX worker addresses, optional HMAC-SHA256
// shared-secret authentication), manifest and chunk requests, per-chunk acknowledgements with telemetry,
// keepalive. docs/protocol.md specifies every byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kvstream/manifest.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

// The version follows the chunk format of the payloads, so that peers with different chunk formats are
// refused at the handshake instead of failing on every chunk: 5 carries chunk format 7 (no cachegen-token
// scheme).
inline constexpr uint16_t kProtocolVersion = 5;

// ---------------------------------------------------------------------------------------------------
// Data plane

struct DataPlaneOptions {
  // Largest payload one message may carry; larger sends and posted receives are refused.
  uint64_t max_message_bytes = uint64_t{1} << 30;
  // A send that has not completed after this long fails with kTimeout, and its peer's endpoint is closed
  // (a peer that stops pulling rendezvous data is broken).
  int send_timeout_ms = 30000;
  // How long the progress thread sleeps on the worker's event fd before it rechecks timeouts. It wakes
  // at once on network activity or a new operation, so this bounds only timeout precision.
  int poll_interval_ms = 50;
  // After network activity the progress thread keeps polling this long before it sleeps, so a transfer
  // in full swing pays no wakeup per message (yielding the core between polls to any other thread that
  // wants it); an idle DataPlane sleeps. 0 = always sleep when idle.
  int busy_poll_us = 200;
};

using PeerId = uint64_t;

// One UCX context and worker, driven by its own progress thread that sleeps on the worker's event fd when
// idle. All methods are thread-safe. Callbacks run on the progress thread: they must be short and must not
// call back into a blocking DataPlane method (Connect). Every Send and every ExpectReceive that was not
// cancelled completes its callback exactly once, with an error at the latest when the DataPlane is
// destroyed. Memory passed with Device::kCuda is handed to UCX as CUDA memory (works when UCX was built
// with CUDA).
class DataPlane {
 public:
  static Result<std::shared_ptr<DataPlane>> Create(const DataPlaneOptions& options = {});
  ~DataPlane();
  DataPlane(const DataPlane&) = delete;
  DataPlane& operator=(const DataPlane&) = delete;

  // This worker's UCX address, to hand to peers over the control plane.
  const std::vector<uint8_t>& address() const;
  // Whether this UCX moves CUDA memory (built with CUDA support: cuda_copy, cuda_ipc, GPUDirect RDMA),
  // as its context reports at run time. Debian's UCX does not.
  bool cuda_memory() const;
  // Opens an endpoint to a peer's worker address. Peer failures are detected (UCX peer error handling)
  // and fail that peer's sends.
  Result<PeerId> Connect(const std::vector<uint8_t>& peer_address);
  // Closes the endpoint; its pending sends complete with an error.
  void Disconnect(PeerId peer);

  // A process-unique id for a message this side will receive.
  uint64_t NewMessageId();

  using SendDone = std::function<void(Status)>;
  // Sends `size` bytes under message id `id` stamped with `crc32c`. The bytes must stay valid and
  // unchanged until `done` runs; `keep_alive` is held until then.
  void Send(PeerId peer, uint64_t id, uint32_t crc32c, const void* data, uint64_t size, Device memory,
            std::shared_ptr<const void> keep_alive, SendDone done);

  using ReceiveDone = std::function<void(Status status, uint64_t bytes, uint32_t crc32c)>;
  // Posts a buffer for message `id`: its payload lands in [buffer, buffer + capacity). `owner` keeps the
  // buffer alive for as long as UCX may write into it, which can outlast a CancelReceive.
  Status ExpectReceive(uint64_t id, void* buffer, uint64_t capacity, Device memory, std::shared_ptr<void> owner,
                       ReceiveDone done);
  // Withdraws a posted receive: its callback will not run. A message arriving later is refused.
  void CancelReceive(uint64_t id);

  struct Stats {
    uint64_t sends_pending = 0;
    uint64_t receives_posted = 0;
  };
  Stats stats() const;

  struct Impl;

 private:
  explicit DataPlane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------------
// Control plane messages (after the handshake). Byte layouts in docs/protocol.md.

struct ManifestRequest {
  std::string context_id;
};
struct ManifestReply {
  std::string context_id;
  int layers = 0;
  int channels = 0;
  DType dtype = DType::kF16;  // the dtype the sender's KV is kept in
  FetchManifest manifest;
};
struct ChunkRequest {
  uint64_t request_id = 0;  // the receiver's DataPlane message id the payload must carry
  std::string context_id;
  int chunk = 0;
  Level level = kLevelFp16;
};
struct ChunkError {
  uint64_t request_id = 0;
  StatusCode code = StatusCode::kInternal;
  std::string message;
};
struct ChunkAck {
  uint64_t request_id = 0;
  uint64_t bytes = 0;
  double transfer_s = 0;
  double decode_s = 0;
};
struct Ping {
  uint64_t nonce = 0;
};
struct Pong {
  uint64_t nonce = 0;
};
// Sent before closing a connection on a protocol error.
struct ErrorMessage {
  StatusCode code = StatusCode::kInternal;
  std::string message;
};
using ControlMessage =
    std::variant<ManifestRequest, ManifestReply, ChunkRequest, ChunkError, ChunkAck, Ping, Pong, ErrorMessage>;

// ---------------------------------------------------------------------------------------------------
// Control plane connections

// What the kernel knows about a connected TCP socket (Linux TCP_INFO).
struct TcpLinkInfo {
  double delivery_rate_bps = 0;  // tcpi_delivery_rate (0 when the kernel has no sample yet)
  // The rate was measured while the sender had too little to send to fill the link: a lower bound only.
  bool app_limited = true;
  double rtt_s = 0;              // smoothed RTT
  double min_rtt_s = 0;          // 0 where the kernel does not report it
};
Result<TcpLinkInfo> ReadTcpLinkInfo(int fd);

struct ControlOptions {
  // Largest message payload accepted or sent; a peer announcing more is disconnected.
  uint32_t max_message_bytes = 1 << 20;
  // Shared secret for authentication; empty = none. A server with a secret refuses peers without it; a
  // client with a secret also checks that the server knows it.
  std::string secret;
  // What both sides must agree on; a mismatch is refused with a message naming the field. 0 on either
  // side means "not stated" and matches anything (a receiver then relies on the manifest's shapes).
  uint64_t model_hash = 0;
  uint64_t profile_hash = 0;
  int connect_timeout_ms = 5000;    // TCP connect plus handshake
  int keepalive_ms = 2000;          // the client pings when it has sent nothing for this long
  int idle_timeout_ms = 10000;      // a connection that receives nothing for this long is closed
  uint64_t max_queued_bytes = 16 << 20;  // unsent bytes queued for a peer that does not read: then close
};

// One established, authenticated connection. Send is thread-safe and never blocks (messages queue).
// Handlers run on the connection's I/O thread; on_close runs once, with the reason, after which no
// on_message follows.
class ControlConnection {
 public:
  virtual ~ControlConnection() = default;
  using MessageHandler = std::function<void(ControlMessage message)>;
  using CloseHandler = std::function<void(Status reason)>;
  // Starts delivering messages. Call once.
  virtual void Start(MessageHandler on_message, CloseHandler on_close) = 0;
  virtual void Send(ControlMessage message) = 0;
  // Closes the connection; pending queued messages are dropped. Idempotent.
  virtual void Close(Status reason) = 0;
  virtual bool is_open() const = 0;
  // The UCX worker address and name the peer announced in the handshake.
  virtual const std::vector<uint8_t>& peer_worker_address() const = 0;
  virtual std::string peer_description() const = 0;
  // TCP_INFO of the connection's socket (it crosses the same path as the data plane's TCP transport).
  // Fails with kUnavailable once closed. Not from a handler (it waits for the I/O thread).
  virtual Result<TcpLinkInfo> ReadLinkInfo() const = 0;
};

// Connects to a ControlServer and performs the handshake, announcing `worker_address` (this side's
// DataPlane). Fails with kUnsupported (protocol version), kInvalidArgument (model or profile hash),
// kPermissionDenied (authentication), kTimeout or kUnavailable.
Result<std::shared_ptr<ControlConnection>> ConnectControl(const std::string& host, int port,
                                                          const ControlOptions& options,
                                                          const std::vector<uint8_t>& worker_address);

// Accepts connections on host:port (port 0 picks a free one) and hands each authenticated one to
// `on_accept` (on the server's I/O thread; call Start on it there or later). Stop or destruction closes
// the listener and every connection it accepted; release the accepted connections after Stop and before
// destroying the server (they run on its I/O thread).
class ControlServer {
 public:
  using AcceptHandler = std::function<void(std::shared_ptr<ControlConnection>)>;
  static Result<std::unique_ptr<ControlServer>> Listen(const std::string& host, int port,
                                                       const ControlOptions& options,
                                                       const std::vector<uint8_t>& worker_address,
                                                       AcceptHandler on_accept);
  virtual ~ControlServer() = default;
  virtual int port() const = 0;
  virtual void Stop() = 0;
};

}  // namespace kvstream
