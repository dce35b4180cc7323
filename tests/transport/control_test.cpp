// The control plane on 127.0.0.1: handshakes that succeed, mismatches refused with a message naming the
// field, shared-secret authentication, and hostile peers (oversized, unknown, truncated, silent) that are
// disconnected while the server keeps serving everyone else.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "kvstream/transport.h"
#include "transport/control_messages.h"

namespace kvstream {
namespace {

using namespace std::chrono_literals;

const std::vector<uint8_t> kServerAddress = {1, 2, 3, 4};
const std::vector<uint8_t> kClientAddress = {9, 8, 7};

// A server that echoes ManifestRequests back as ManifestReplies and remembers its connections.
struct EchoServer {
  std::unique_ptr<ControlServer> server;
  std::mutex mu;
  std::vector<std::shared_ptr<ControlConnection>> connections;

  explicit EchoServer(ControlOptions options) {
    auto listening = ControlServer::Listen("127.0.0.1", 0, options, kServerAddress, [this](std::shared_ptr<ControlConnection> c) {
      std::lock_guard lock(mu);
      connections.push_back(c);
      std::weak_ptr<ControlConnection> weak = c;
      c->Start(
          [weak](ControlMessage m) {
            auto self = weak.lock();
            if (!self) return;
            if (auto* req = std::get_if<ManifestRequest>(&m)) {
              ManifestReply reply;
              reply.context_id = req->context_id;
              self->Send(reply);
            }
          },
          [](Status) {});
    });
    EXPECT_TRUE(listening.ok()) << listening.status().ToString();
    server = std::move(*listening);
  }
  ~EchoServer() {
    server->Stop();
    std::lock_guard lock(mu);
    connections.clear();
  }
  int port() const { return server->port(); }
};

ControlOptions Options(uint64_t model = 1, uint64_t profile = 2, std::string secret = "") {
  ControlOptions o;
  o.model_hash = model;
  o.profile_hash = profile;
  o.secret = std::move(secret);
  o.connect_timeout_ms = 3000;
  return o;
}

// Sends a ManifestRequest and waits for the echo: proves the connection works end to end. The handlers
// outlive this call (they run until the connection closes), so their state is shared, not on the stack.
bool RoundTrip(ControlConnection& c, const std::string& id) {
  struct State {
    std::promise<std::string> got;
    std::once_flag once;
  };
  auto state = std::make_shared<State>();
  c.Start(
      [state](ControlMessage m) {
        if (auto* r = std::get_if<ManifestReply>(&m)) std::call_once(state->once, [&] { state->got.set_value(r->context_id); });
      },
      [state](Status s) { std::call_once(state->once, [&] { state->got.set_value("closed: " + s.ToString()); }); });
  c.Send(ManifestRequest{id});
  auto f = state->got.get_future();
  if (f.wait_for(5s) != std::future_status::ready) return false;
  return f.get() == id;
}

TEST(ControlPlane, HandshakeExchangesWorkerAddressesAndCarriesMessages) {
  EchoServer server(Options());
  auto client = ConnectControl("127.0.0.1", server.port(), Options(), kClientAddress);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ((*client)->peer_worker_address(), kServerAddress);
  EXPECT_TRUE(RoundTrip(**client, "ctx-1"));
  std::lock_guard lock(server.mu);
  ASSERT_EQ(server.connections.size(), 1u);
  EXPECT_EQ(server.connections[0]->peer_worker_address(), kClientAddress);
}

TEST(ControlPlane, ReadLinkInfoReportsTheSocketsRttUntilClosed) {
  EchoServer server(Options());
  auto client = ConnectControl("127.0.0.1", server.port(), Options(), kClientAddress);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(RoundTrip(**client, "ctx-rtt"));
  auto info = (*client)->ReadLinkInfo();
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->rtt_s, 0);
  EXPECT_LT(info->rtt_s, 1.0);
  (*client)->Close(Status::Cancelled("test"));
  for (int i = 0; i < 100 && (*client)->is_open(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ((*client)->ReadLinkInfo().status().code(), StatusCode::kUnavailable);
}

TEST(ControlPlane, ModelAndProfileMismatchesAreRefusedNamingTheField) {
  EchoServer server(Options(1, 2));
  auto model = ConnectControl("127.0.0.1", server.port(), Options(5, 2), kClientAddress);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("model hash"), std::string::npos) << model.status().ToString();
  auto profile = ConnectControl("127.0.0.1", server.port(), Options(1, 6), kClientAddress);
  ASSERT_FALSE(profile.ok());
  EXPECT_NE(profile.status().message().find("profile hash"), std::string::npos) << profile.status().ToString();
}

TEST(ControlPlane, SharedSecretAuthenticatesBothWays) {
  EchoServer server(Options(1, 2, "correct horse"));
  auto good = ConnectControl("127.0.0.1", server.port(), Options(1, 2, "correct horse"), kClientAddress);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(RoundTrip(**good, "authed"));

  auto wrong = ConnectControl("127.0.0.1", server.port(), Options(1, 2, "battery staple"), kClientAddress);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kPermissionDenied) << wrong.status().ToString();

  auto none = ConnectControl("127.0.0.1", server.port(), Options(1, 2, ""), kClientAddress);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(none.status().message().find("requires a shared secret"), std::string::npos);

  // A client with a secret refuses a server that cannot prove it knows it.
  EchoServer open_server(Options());
  auto unproven = ConnectControl("127.0.0.1", open_server.port(), Options(1, 2, "correct horse"), kClientAddress);
  ASSERT_FALSE(unproven.ok());
  EXPECT_EQ(unproven.status().code(), StatusCode::kPermissionDenied);
}

TEST(ControlPlane, ConnectingToNothingFailsQuickly) {
  int port;
  {
    EchoServer server(Options());
    port = server.port();
  }
  auto client = ConnectControl("127.0.0.1", port, Options(), kClientAddress);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable) << client.status().ToString();
}

// A raw TCP peer for hostile input.
class RawPeer {
 public:
  explicit RawPeer(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawPeer() { ::close(fd_); }
  bool connected() const { return connected_; }
  void Write(const std::vector<uint8_t>& bytes) { [[maybe_unused]] auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL); }
  // Reads until the server closes (true) or 5 s pass (false); returns what arrived.
  bool ReadUntilClosed(std::vector<uint8_t>* got) {
    uint8_t buf[4096];
    for (int i = 0; i < 1000; ++i) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      got->insert(got->end(), buf, buf + n);
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

std::vector<uint8_t> HelloFrame(uint64_t model = 1, uint64_t profile = 2) {
  transport::Hello hello;
  hello.model_hash = model;
  hello.profile_hash = profile;
  hello.worker_address = kClientAddress;
  return transport::EncodeFrame(transport::HandshakeMessage(hello));
}

void ExpectDisconnectedWithError(const std::vector<uint8_t>& bytes, const std::string& expected_text) {
  EchoServer server(Options());
  {
    RawPeer peer(server.port());
    ASSERT_TRUE(peer.connected());
    peer.Write(bytes);
    std::vector<uint8_t> got;
    EXPECT_TRUE(peer.ReadUntilClosed(&got)) << "server did not close the connection";
    const std::string text(got.begin(), got.end());
    EXPECT_NE(text.find(expected_text), std::string::npos) << "reply: " << text;
  }
  // The server still serves well-behaved clients.
  auto client = ConnectControl("127.0.0.1", server.port(), Options(), kClientAddress);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE(RoundTrip(**client, "still-alive"));
}

TEST(ControlPlane, OversizedLengthIsRejectedAndClosed) {
  std::vector<uint8_t> frame = {0xff, 0xff, 0xff, 0x7f, 1, 0, 0, 0};
  ExpectDisconnectedWithError(frame, "max_message_bytes");
}

TEST(ControlPlane, UnknownTypeIsRejectedAndClosed) {
  std::vector<uint8_t> frame = {0, 0, 0, 0, 0x39, 0x30, 0, 0};
  ExpectDisconnectedWithError(frame, "unknown message type 12345");
}

TEST(ControlPlane, TruncatedPayloadIsRejectedAndClosed) {
  auto frame = HelloFrame();
  frame[0] = static_cast<uint8_t>(frame[0] - 5);  // the header claims fewer bytes than the Hello needs
  frame.erase(frame.end() - 5, frame.end());  // (a resize to size - 5 trips GCC 12's -Wstringop-overflow)
  ExpectDisconnectedWithError(frame, "truncated");
}

TEST(ControlPlane, ControlMessageBeforeHandshakeIsRejected) {
  ExpectDisconnectedWithError(transport::EncodeFrame(ControlMessage(ChunkRequest{1, "x", 0, 0})), "before the handshake");
}

TEST(ControlPlane, HostileMessageAfterHandshakeClosesOnlyThatConnection) {
  EchoServer server(Options());
  auto good = ConnectControl("127.0.0.1", server.port(), Options(), kClientAddress);
  ASSERT_TRUE(good.ok());
  RawPeer peer(server.port());
  peer.Write(HelloFrame());
  peer.Write({0xff, 0xff, 0xff, 0x7f, 18, 0, 0, 0});
  std::vector<uint8_t> got;
  EXPECT_TRUE(peer.ReadUntilClosed(&got));
  EXPECT_NE(std::string(got.begin(), got.end()).find("max_message_bytes"), std::string::npos)
      << got.size() << " bytes before close, errno " << errno;
  EXPECT_TRUE(RoundTrip(**good, "unaffected"));
}

TEST(ControlPlane, SilentPeerIsDisconnectedAfterTheHandshakeTimeout) {
  ControlOptions options = Options();
  options.connect_timeout_ms = 300;
  EchoServer server(options);
  RawPeer peer(server.port());
  std::vector<uint8_t> got;
  EXPECT_TRUE(peer.ReadUntilClosed(&got));
  EXPECT_NE(std::string(got.begin(), got.end()).find("connect_timeout_ms"), std::string::npos);
}

TEST(ControlPlane, PeerThatStopsTalkingIsClosedAfterIdleTimeout) {
  ControlOptions options = Options();
  options.idle_timeout_ms = 400;
  options.keepalive_ms = 100000;  // nobody pings
  EchoServer server(options);
  RawPeer peer(server.port());
  peer.Write(HelloFrame());
  std::vector<uint8_t> got;
  EXPECT_TRUE(peer.ReadUntilClosed(&got));
}

TEST(ControlPlane, KeepaliveKeepsAQuietConnectionOpen) {
  ControlOptions options = Options();
  options.idle_timeout_ms = 600;
  options.keepalive_ms = 100;
  EchoServer server(options);
  auto client = ConnectControl("127.0.0.1", server.port(), options, kClientAddress);
  ASSERT_TRUE(client.ok());
  std::this_thread::sleep_for(1500ms);
  EXPECT_TRUE((*client)->is_open());
  EXPECT_TRUE(RoundTrip(**client, "after-quiet"));
}

}  // namespace
}  // namespace kvstream
