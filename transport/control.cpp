// The control plane on Boost.Asio: framed messages over TCP, the handshake, keepalive and timeouts.
//
// Each Connection lives on one io_context thread (a server's, shared by all its connections, or a client's
// own), so its state needs no locks: public calls from other threads are posted there. Reads are bounded
// by ControlOptions::max_message_bytes before any allocation; a malformed, oversized or unexpected frame
// gets an Error message and the connection is closed.
// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> under C++20.
#include <utility>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "kvstream/transport.h"
#include "transport/control_messages.h"
#include "transport/sha256.h"

namespace kvstream {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using transport::AnyMessage;
using transport::HandshakeMessage;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

transport::Nonce RandomNonce() {
  std::random_device rd;  // /dev/urandom on Linux
  transport::Nonce n;
  for (size_t i = 0; i < n.size(); i += 4) {
    const uint32_t v = rd();
    for (size_t j = 0; j < 4; ++j) n[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return n;
}

// The MACs bind both nonces and the direction, so neither can be replayed as the other.
transport::Digest256 AuthMac(const std::string& secret, const char* label, const transport::Nonce& a,
                             const transport::Nonce& b) {
  std::vector<uint8_t> message(label, label + std::strlen(label));
  message.insert(message.end(), a.begin(), a.end());
  message.insert(message.end(), b.begin(), b.end());
  return transport::HmacSha256(secret, message.data(), message.size());
}
constexpr const char* kClientLabel = "kvstream-auth-v1 client";
constexpr const char* kServerLabel = "kvstream-auth-v1 server";

enum class Role { kClient, kServer };
enum class State { kAwaitHello, kAwaitAuth, kAwaitChallengeOrWelcome, kAwaitWelcome, kEstablished, kClosed };

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Established = std::function<void(std::shared_ptr<Connection>, Status)>;

  Connection(asio::io_context& io, tcp::socket socket, Role role, ControlOptions options,
             std::vector<uint8_t> worker_address)
      : io_(io),
        socket_(std::move(socket)),
        role_(role),
        options_(std::move(options)),
        own_address_(std::move(worker_address)),
        handshake_timer_(io),
        idle_timer_(io),
        keepalive_timer_(io) {
    boost::system::error_code ec;
    auto ep = socket_.remote_endpoint(ec);
    description_ = ec ? std::string("unknown peer") : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  // Runs the handshake; `established` is called once with the result (on the I/O thread).
  void BeginHandshake(Established established) {
    established_ = std::move(established);
    ArmTimer(handshake_timer_, options_.connect_timeout_ms, [](Connection& c) {
      c.Fail(Status::Timeout("control handshake with " + c.description_ + " did not finish within connect_timeout_ms = " +
                             std::to_string(c.options_.connect_timeout_ms)));
    });
    if (role_ == Role::kServer) {
      state_ = State::kAwaitHello;
    } else {
      state_ = State::kAwaitChallengeOrWelcome;
      client_nonce_ = RandomNonce();
      transport::Hello hello;
      hello.model_hash = options_.model_hash;
      hello.profile_hash = options_.profile_hash;
      hello.client_nonce = client_nonce_;
      hello.worker_address = own_address_;
      Enqueue(transport::EncodeFrame(HandshakeMessage(hello)));
    }
    ReadHeader();
  }

  void Start(ControlConnection::MessageHandler on_message, ControlConnection::CloseHandler on_close) {
    asio::post(io_, [self = shared_from_this(), on_message = std::move(on_message), on_close = std::move(on_close)]() mutable {
      self->on_message_ = std::move(on_message);
      self->on_close_ = std::move(on_close);
      self->started_ = true;
      if (self->state_ == State::kClosed) {
        self->DeliverClose();
        return;
      }
      // The idle clock runs only while messages are read, i.e. from Start on.
      if (self->state_ == State::kEstablished) self->ArmIdle();
      self->ReadHeader();
    });
  }

  void Send(ControlMessage message) {
    auto frame = std::make_shared<std::vector<uint8_t>>(transport::EncodeFrame(AnyMessage(std::move(message))));
    asio::post(io_, [self = shared_from_this(), frame] {
      if (self->state_ == State::kClosed) return;
      self->Enqueue(std::move(*frame));
    });
  }

  void Close(Status reason) {
    asio::post(io_, [self = shared_from_this(), reason = std::move(reason)]() mutable { self->Shut(std::move(reason)); });
  }

  bool is_open() const { return open_.load(); }
  // On the I/O thread, which owns the socket, so that a concurrent close cannot hand its fd to another.
  Result<TcpLinkInfo> ReadLinkInfo() {
    auto promise = std::make_shared<std::promise<Result<TcpLinkInfo>>>();
    auto future = promise->get_future();
    asio::post(io_, [self = shared_from_this(), promise] {
      if (self->state_ == State::kClosed || !self->socket_.is_open()) {
        promise->set_value(Status::Unavailable("control connection to " + self->description_ + " is closed"));
        return;
      }
      promise->set_value(ReadTcpLinkInfo(self->socket_.native_handle()));
    });
    if (future.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
      return Status::Timeout("control connection to " + description_ + ": TCP_INFO not read within 2 s");
    }
    return future.get();
  }
  const std::vector<uint8_t>& peer_address() const { return peer_address_; }
  const std::string& description() const { return description_; }

 private:
  template <class F>
  void ArmTimer(asio::steady_timer& timer, int ms, F on_expiry) {
    timer.expires_after(std::chrono::milliseconds(ms));
    timer.async_wait([weak = weak_from_this(), on_expiry](const boost::system::error_code& ec) {
      if (ec) return;
      if (auto self = weak.lock(); self && self->state_ != State::kClosed) on_expiry(*self);
    });
  }

  void ArmKeepalive() {
    ArmTimer(keepalive_timer_, options_.keepalive_ms, [](Connection& c) {
      c.Enqueue(transport::EncodeFrame(AnyMessage(ControlMessage(Ping{++c.ping_nonce_}))));
      c.ArmKeepalive();
    });
  }

  void ArmIdle() {
    ArmTimer(idle_timer_, options_.idle_timeout_ms, [](Connection& c) {
      c.Shut(Status::Timeout("control connection to " + c.description_ + ": nothing received for idle_timeout_ms = " +
                             std::to_string(c.options_.idle_timeout_ms)));
    });
  }

  void ReadHeader() {
    if (reading_ || state_ == State::kClosed) return;
    // After the handshake, reading waits for Start so that no message arrives before a handler exists.
    if (state_ == State::kEstablished && !started_) return;
    reading_ = true;
    asio::async_read(socket_, asio::buffer(header_), [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
      self->reading_ = false;
      if (ec) return self->OnReadError(ec);
      auto header = transport::ParseFrameHeader(self->header_.data(), self->options_.max_message_bytes);
      if (!header.ok()) return self->Fail(header.status());
      self->ReadPayload(*header);
    });
  }

  void ReadPayload(transport::FrameHeader header) {
    payload_.resize(header.length);  // bounded by max_message_bytes in ParseFrameHeader
    reading_ = true;
    asio::async_read(socket_, asio::buffer(payload_), [self = shared_from_this(), header](const boost::system::error_code& ec, size_t) {
      self->reading_ = false;
      if (ec) return self->OnReadError(ec);
      auto message = transport::DecodePayload(header.type, self->payload_.data(), self->payload_.size());
      if (!message.ok()) return self->Fail(message.status());
      if (self->state_ == State::kEstablished) self->ArmIdle();
      self->Dispatch(std::move(*message));
      self->ReadHeader();
    });
  }

  void OnReadError(const boost::system::error_code& ec) {
    if (state_ == State::kClosed) return;
    if (ec == asio::error::eof || ec == asio::error::connection_reset) {
      Shut(Status::Unavailable("control connection to " + description_ + " closed by the peer"));
    } else {
      Shut(Status::IoError("control connection to " + description_ + ": " + ec.message()));
    }
  }

  void Dispatch(AnyMessage message) {
    if (auto* control = std::get_if<ControlMessage>(&message)) {
      if (state_ != State::kEstablished) {
        return Fail(Status::CorruptData("control: message type received before the handshake finished"));
      }
      if (std::holds_alternative<Ping>(*control)) {
        Enqueue(transport::EncodeFrame(AnyMessage(ControlMessage(Pong{std::get<Ping>(*control).nonce}))));
        return;
      }
      if (std::holds_alternative<Pong>(*control)) return;
      if (auto* error = std::get_if<ErrorMessage>(control)) {
        return Shut(Status(error->code, "peer " + description_ + " reported: " + error->message));
      }
      if (on_message_) on_message_(std::move(*control));
      return;
    }
    OnHandshake(std::get<HandshakeMessage>(std::move(message)));
  }

  void OnHandshake(HandshakeMessage message) {
    if (auto* refuse = std::get_if<transport::Refuse>(&message)) {
      if (role_ == Role::kClient && state_ != State::kEstablished) {
        return Shut(Status(refuse->code, "refused by " + description_ + ": " + refuse->message));
      }
      return Fail(Status::CorruptData("control: unexpected Refuse message"));
    }
    switch (state_) {
      case State::kAwaitHello: {
        auto* hello = std::get_if<transport::Hello>(&message);
        if (!hello) return Fail(Status::CorruptData("control handshake: expected Hello"));
        return OnHello(*hello);
      }
      case State::kAwaitAuth: {
        auto* auth = std::get_if<transport::AuthResponse>(&message);
        if (!auth) return Fail(Status::CorruptData("control handshake: expected AuthResponse"));
        const auto expected = AuthMac(options_.secret, kClientLabel, server_nonce_, client_nonce_);
        if (!transport::DigestEqual(expected, auth->mac)) {
          return Refuse(StatusCode::kPermissionDenied, "authentication failed: the peer does not know the shared secret");
        }
        return SendWelcome(true);
      }
      case State::kAwaitChallengeOrWelcome: {
        if (auto* challenge = std::get_if<transport::Challenge>(&message)) {
          if (options_.secret.empty()) {
            return Shut(Status::PermissionDenied("server " + description_ +
                                                 " requires a shared secret and none was configured (--secret-file)"));
          }
          server_nonce_ = challenge->server_nonce;
          transport::AuthResponse response;
          response.mac = AuthMac(options_.secret, kClientLabel, server_nonce_, client_nonce_);
          Enqueue(transport::EncodeFrame(HandshakeMessage(response)));
          state_ = State::kAwaitWelcome;
          return;
        }
        [[fallthrough]];
      }
      case State::kAwaitWelcome: {
        auto* welcome = std::get_if<transport::Welcome>(&message);
        if (!welcome) return Fail(Status::CorruptData("control handshake: expected Welcome"));
        if (welcome->version != kProtocolVersion) {
          return Shut(Status::Unsupported("protocol version: server speaks " + std::to_string(welcome->version) +
                                          ", this client speaks " + std::to_string(kProtocolVersion)));
        }
        if (!options_.secret.empty()) {
          const auto expected = AuthMac(options_.secret, kServerLabel, client_nonce_, server_nonce_);
          if (!welcome->authenticated || !transport::DigestEqual(expected, welcome->server_proof)) {
            return Shut(Status::PermissionDenied("authentication: server " + description_ +
                                                 " did not prove it knows the shared secret"));
          }
        }
        peer_address_ = welcome->worker_address;
        return Establish();
      }
      default:
        return Fail(Status::CorruptData("control: handshake message after the handshake finished"));
    }
  }

  void OnHello(const transport::Hello& hello) {
    if (hello.version != kProtocolVersion) {
      return Refuse(StatusCode::kUnsupported, "protocol version: client speaks " + std::to_string(hello.version) +
                                                  ", this server speaks " + std::to_string(kProtocolVersion));
    }
    // 0 on either side means "not stated" (a receiver then checks the manifest's shapes instead).
    if (hello.model_hash != 0 && options_.model_hash != 0 && hello.model_hash != options_.model_hash) {
      return Refuse(StatusCode::kInvalidArgument, "model hash: client has " + Hex(hello.model_hash) +
                                                      ", this server serves " + Hex(options_.model_hash));
    }
    if (hello.profile_hash != 0 && options_.profile_hash != 0 && hello.profile_hash != options_.profile_hash) {
      return Refuse(StatusCode::kInvalidArgument, "profile hash: client has " + Hex(hello.profile_hash) +
                                                      ", this server uses " + Hex(options_.profile_hash));
    }
    if (hello.worker_address.empty()) return Fail(Status::CorruptData("control handshake: Hello without a worker address"));
    peer_address_ = hello.worker_address;
    client_nonce_ = hello.client_nonce;
    if (options_.secret.empty()) return SendWelcome(false);
    server_nonce_ = RandomNonce();
    Enqueue(transport::EncodeFrame(HandshakeMessage(transport::Challenge{server_nonce_})));
    state_ = State::kAwaitAuth;
  }

  void SendWelcome(bool authenticated) {
    transport::Welcome welcome;
    welcome.authenticated = authenticated ? 1 : 0;
    if (authenticated) welcome.server_proof = AuthMac(options_.secret, kServerLabel, client_nonce_, server_nonce_);
    welcome.worker_address = own_address_;
    Enqueue(transport::EncodeFrame(HandshakeMessage(welcome)));
    Establish();
  }

  void Establish() {
    state_ = State::kEstablished;
    open_.store(true);
    handshake_timer_.cancel();
    ArmKeepalive();
    if (auto established = std::move(established_)) established(shared_from_this(), Status::Ok());
  }

  // A refusal the peer can read: sent, then the connection closes.
  void Refuse(StatusCode code, std::string message) {
    Status reason(code, "refused " + description_ + ": " + message);
    auto frame = transport::EncodeFrame(HandshakeMessage(transport::Refuse{code, std::move(message)}));
    SendFinal(std::move(frame), std::move(reason));
  }

  // A protocol violation by the peer: it gets an Error message, then the connection closes.
  void Fail(Status reason) {
    if (state_ == State::kClosed) return;
    if (state_ != State::kEstablished && role_ == Role::kServer) {
      return Refuse(reason.code(), reason.message());
    }
    auto frame = transport::EncodeFrame(AnyMessage(ControlMessage(ErrorMessage{reason.code(), reason.message()})));
    SendFinal(std::move(frame), std::move(reason));
  }

  // Queues a last frame, then closes once it is written (or after 1 s if the peer does not read).
  void SendFinal(std::vector<uint8_t> frame, Status reason) {
    if (state_ == State::kClosed) return;
    MarkClosed(std::move(reason));
    flush_then_close_ = true;
    write_queue_.push_back(std::move(frame));
    handshake_timer_.expires_after(std::chrono::seconds(1));
    handshake_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->CloseSocket();
    });
    if (!writing_) WriteNext();
  }

  void Shut(Status reason) {
    if (state_ == State::kClosed) return;
    MarkClosed(std::move(reason));
    CloseSocket();
  }

  void MarkClosed(Status reason) {
    state_ = State::kClosed;
    open_.store(false);
    close_reason_ = std::move(reason);
    idle_timer_.cancel();
    keepalive_timer_.cancel();
    handshake_timer_.cancel();
    // A write in progress still uses the front buffer; everything behind it is dropped.
    while (write_queue_.size() > (writing_ ? 1u : 0u)) write_queue_.pop_back();
    queued_bytes_ = 0;
    if (auto established = std::move(established_)) established(nullptr, close_reason_);
    if (started_) DeliverClose();
  }

  void DeliverClose() {
    on_message_ = nullptr;
    if (auto on_close = std::move(on_close_)) on_close(close_reason_);
  }

  void CloseSocket() {
    boost::system::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  void Enqueue(std::vector<uint8_t> frame) {
    if (state_ == State::kClosed) return;
    if (queued_bytes_ + frame.size() > options_.max_queued_bytes) {
      return Shut(Status::ResourceExhausted("control connection to " + description_ + ": " +
                                            std::to_string(queued_bytes_ + frame.size()) +
                                            " unsent bytes exceed max_queued_bytes = " +
                                            std::to_string(options_.max_queued_bytes) + " (peer not reading)"));
    }
    queued_bytes_ += frame.size();
    write_queue_.push_back(std::move(frame));
    if (!writing_) WriteNext();
  }

  void WriteNext() {
    if (write_queue_.empty()) {
      if (flush_then_close_) CloseSocket();
      return;
    }
    if (state_ == State::kClosed && !flush_then_close_) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(write_queue_.front()),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        self->writing_ = false;
                        if (!self->write_queue_.empty()) {
                          if (self->state_ != State::kClosed) self->queued_bytes_ -= self->write_queue_.front().size();
                          self->write_queue_.pop_front();
                        }
                        if (ec) {
                          if (self->state_ == State::kClosed) return self->CloseSocket();
                          return self->OnReadError(ec);
                        }
                        self->WriteNext();
                      });
  }

  asio::io_context& io_;
  tcp::socket socket_;
  Role role_;
  ControlOptions options_;
  std::vector<uint8_t> own_address_;
  std::vector<uint8_t> peer_address_;
  std::string description_;
  asio::steady_timer handshake_timer_, idle_timer_, keepalive_timer_;
  State state_ = State::kAwaitHello;
  std::atomic<bool> open_{false};
  bool started_ = false;
  bool reading_ = false;
  bool writing_ = false;
  bool flush_then_close_ = false;
  std::array<uint8_t, transport::kFrameHeaderBytes> header_{};
  std::vector<uint8_t> payload_;
  std::deque<std::vector<uint8_t>> write_queue_;
  uint64_t queued_bytes_ = 0;
  uint64_t ping_nonce_ = 0;
  transport::Nonce client_nonce_{}, server_nonce_{};
  Established established_;
  ControlConnection::MessageHandler on_message_;
  ControlConnection::CloseHandler on_close_;
  Status close_reason_;
};

// The public face of a Connection. A client handle also owns the I/O thread its connection runs on.
class Handle final : public ControlConnection {
 public:
  Handle(std::shared_ptr<Connection> connection, std::unique_ptr<asio::io_context> io, std::thread thread)
      : connection_(std::move(connection)), io_(std::move(io)), thread_(std::move(thread)) {}
  ~Handle() override {
    connection_->Close(Status::Cancelled("control connection closed locally"));
    if (io_) {
      // Let the close run, then stop the loop; joining is bounded because every handler is short.
      asio::post(*io_, [io = io_.get()] { io->stop(); });
      if (thread_.joinable()) thread_.join();
      // The socket belongs to io_: release the connection before the loop is destroyed.
      connection_.reset();
    }
  }
  void Start(MessageHandler on_message, CloseHandler on_close) override {
    connection_->Start(std::move(on_message), std::move(on_close));
  }
  void Send(ControlMessage message) override { connection_->Send(std::move(message)); }
  void Close(Status reason) override { connection_->Close(std::move(reason)); }
  bool is_open() const override { return connection_->is_open(); }
  const std::vector<uint8_t>& peer_worker_address() const override { return connection_->peer_address(); }
  std::string peer_description() const override { return connection_->description(); }
  Result<TcpLinkInfo> ReadLinkInfo() const override { return connection_->ReadLinkInfo(); }

 private:
  std::shared_ptr<Connection> connection_;
  std::unique_ptr<asio::io_context> io_;
  std::thread thread_;
};

class Server final : public ControlServer {
 public:
  Server(ControlOptions options, std::vector<uint8_t> worker_address, AcceptHandler on_accept)
      : options_(std::move(options)),
        address_(std::move(worker_address)),
        on_accept_(std::move(on_accept)),
        acceptor_(io_),
        guard_(asio::make_work_guard(io_)) {}

  ~Server() override { Stop(); }

  Status Listen(const std::string& host, int port) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (ec) return Status::InvalidArgument("listen address '" + host + "': " + ec.message());
    tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Status::IoError("listening on " + host + ":" + std::to_string(port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { io_.run(); });
    return Status::Ok();
  }

  int port() const override { return port_; }

  void Stop() override {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      boost::system::error_code ec;
      acceptor_.close(ec);
      std::lock_guard lock(mu_);
      for (auto& weak : connections_) {
        if (auto c = weak.lock()) c->Close(Status::Cancelled("control server stopped"));
      }
    });
    // The posted closes run before the loop stops: post order is preserved on one thread.
    asio::post(io_, [this] { guard_.reset(); io_.stop(); });
    thread_.join();
  }

 private:
  void Accept() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec) return;  // the acceptor was closed
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      auto connection = std::make_shared<Connection>(io_, std::move(socket), Role::kServer, options_, address_);
      {
        std::lock_guard lock(mu_);
        std::erase_if(connections_, [](const std::weak_ptr<Connection>& w) { return w.expired(); });
        connections_.push_back(connection);
      }
      connection->BeginHandshake([this](std::shared_ptr<Connection> c, Status status) {
        if (status.ok() && on_accept_) on_accept_(std::make_shared<Handle>(std::move(c), nullptr, std::thread()));
      });
      Accept();
    });
  }

  ControlOptions options_;
  std::vector<uint8_t> address_;
  AcceptHandler on_accept_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::executor_work_guard<asio::io_context::executor_type> guard_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::weak_ptr<Connection>> connections_;
};

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::Listen(const std::string& host, int port,
                                                             const ControlOptions& options,
                                                             const std::vector<uint8_t>& worker_address,
                                                             AcceptHandler on_accept) {
  if (port < 0 || port > 65535) return Status::InvalidArgument("listen port = " + std::to_string(port) + " is not in 0..65535");
  auto server = std::make_unique<Server>(options, worker_address, std::move(on_accept));
  KVSTREAM_RETURN_IF_ERROR(server->Listen(host, port));
  return std::unique_ptr<ControlServer>(std::move(server));
}

Result<std::shared_ptr<ControlConnection>> ConnectControl(const std::string& host, int port,
                                                          const ControlOptions& options,
                                                          const std::vector<uint8_t>& worker_address) {
  if (port <= 0 || port > 65535) return Status::InvalidArgument("connect port = " + std::to_string(port) + " is not in 1..65535");
  auto io = std::make_unique<asio::io_context>();
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  std::shared_ptr<Connection> established;
  std::mutex established_mu;
  auto socket = std::make_shared<tcp::socket>(*io);
  auto resolver = std::make_shared<tcp::resolver>(*io);
  auto timer = std::make_shared<asio::steady_timer>(*io);
  const std::string where = host + ":" + std::to_string(port);

  timer->expires_after(std::chrono::milliseconds(options.connect_timeout_ms));
  timer->async_wait([socket, resolver, promise, where, options](const boost::system::error_code& ec) {
    if (ec) return;
    resolver->cancel();
    boost::system::error_code ignored;
    socket->close(ignored);
  });
  resolver->async_resolve(host, std::to_string(port), [&, socket, resolver, timer, promise, where](
                                                           const boost::system::error_code& ec, tcp::resolver::results_type results) {
    if (ec) {
      timer->cancel();
      promise->set_value(Status::Unavailable("resolving " + where + ": " + ec.message()));
      return;
    }
    asio::async_connect(*socket, results, [&, socket, timer, promise, where](const boost::system::error_code& ec, const tcp::endpoint&) {
      timer->cancel();
      if (ec) {
        const bool timed_out = ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor;
        promise->set_value(timed_out ? Status::Timeout("connecting to " + where + " took longer than connect_timeout_ms = " +
                                                       std::to_string(options.connect_timeout_ms))
                                     : Status::Unavailable("connecting to " + where + ": " + ec.message()));
        return;
      }
      boost::system::error_code ignored;
      socket->set_option(tcp::no_delay(true), ignored);
      auto connection = std::make_shared<Connection>(*io, std::move(*socket), Role::kClient, options, worker_address);
      connection->BeginHandshake([&, promise](std::shared_ptr<Connection> c, Status status) {
        if (status.ok()) {
          std::lock_guard lock(established_mu);
          established = std::move(c);
        }
        promise->set_value(std::move(status));
      });
    });
  });
  std::thread thread([io = io.get()] {
    auto guard = asio::make_work_guard(*io);
    io->run();
  });
  // The handshake has its own timer; this outer bound only protects against a wedged loop.
  Status status = future.wait_for(std::chrono::milliseconds(options.connect_timeout_ms + 2000)) == std::future_status::ready
                      ? future.get()
                      : Status::Timeout("connecting to " + where + ": no answer within connect_timeout_ms");
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(established_mu);
    connection = established;
  }
  if (!status.ok() || !connection) {
    asio::post(*io, [io = io.get()] { io->stop(); });
    thread.join();
    return status.ok() ? Status::Internal("control handshake finished without a connection") : status;
  }
  return std::shared_ptr<ControlConnection>(std::make_shared<Handle>(std::move(connection), std::move(io), std::move(thread)));
}

}  // namespace kvstream
