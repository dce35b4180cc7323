// transport/tcp_info.cpp — the kernel's view of a TCP connection (Linux TCP_INFO).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "kvstream/transport.h"

namespace kvstream {

Result<TcpLinkInfo> ReadTcpLinkInfo(int fd) {
  struct tcp_info info;
  std::memset(&info, 0, sizeof(info));
  socklen_t length = sizeof(info);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) {
    return Status::IoError("getsockopt(fd " + std::to_string(fd) + ", TCP_INFO): " + std::strerror(errno));
  }
  TcpLinkInfo out;
  out.rtt_s = info.tcpi_rtt * 1e-6;
  // Older kernels return a shorter struct; fields past `length` were not filled.
  if (length >= offsetof(struct tcp_info, tcpi_delivery_rate) + sizeof(info.tcpi_delivery_rate)) {
    out.delivery_rate_bps = static_cast<double>(info.tcpi_delivery_rate) * 8.0;
    out.app_limited = info.tcpi_delivery_rate_app_limited != 0;
  }
  if (length >= offsetof(struct tcp_info, tcpi_min_rtt) + sizeof(info.tcpi_min_rtt)) {
    out.min_rtt_s = info.tcpi_min_rtt * 1e-6;
  }
  return out;
}

}  // namespace kvstream
