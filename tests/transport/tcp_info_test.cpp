// TCP_INFO: read from a real loopback connection; refused on a non-socket.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "kvstream/transport.h"

namespace kvstream {
namespace {

TEST(ReadTcpLinkInfo, ReportsRttAndDeliveryRateOfALoopbackConnection) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(listener, 1) != 0) {
    close(listener);
    GTEST_SKIP() << "cannot listen on loopback here";
  }
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const int server = accept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0);
  std::vector<char> data(1 << 20, 'x');
  size_t sent = 0, received = 0;
  while (received < data.size()) {
    if (sent < data.size()) {
      const ssize_t n = send(client, data.data() + sent, data.size() - sent, MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    std::vector<char> buf(1 << 16);
    const ssize_t n = recv(server, buf.data(), buf.size(), sent < data.size() ? MSG_DONTWAIT : 0);
    if (n > 0) received += static_cast<size_t>(n);
  }
  auto info = ReadTcpLinkInfo(client);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_GT(info->rtt_s, 0);
  EXPECT_LT(info->rtt_s, 1.0);
  EXPECT_GE(info->delivery_rate_bps, 0);
  close(server);
  close(client);
  close(listener);
}

TEST(ReadTcpLinkInfo, FailsWithAnIoErrorOnANonSocket) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  auto info = ReadTcpLinkInfo(fds[0]);
  EXPECT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kIoError);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace kvstream
