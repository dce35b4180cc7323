// cluster/netns_link.h — two network namespaces joined by a veth pair, shaped with tc tbf.
//
// NetnsLink::Create makes namespaces "kvsA<id>" and "kvsB<id>", a veth pair whose ends are both named
// kNetnsDevice inside them (so one UCX_NET_DEVICES value serves both sides), addresses 10.77.<n>.1/24 and
// .2/24 that exist only inside the namespaces, and a tbf qdisc on each end at the given rate. SetRate
// changes both qdiscs in place (`tc qdisc change`), so connections survive a rate change. Destruction
// deletes the namespaces, which removes the veth pair with them; a failed Create removes what it made.
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); without it Create fails with kPermissionDenied and a
// message starting "cannot create namespaces: ". Thread-safe after Create.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bench/cluster/process.h"
#include "kvstream/status.h"

namespace kvstream::cluster {

inline constexpr const char* kNetnsDevice = "kvs0";

struct NetnsLinkOptions {
  double rate_bps = 1e9;        // initial tbf rate, both directions
  // tbf bucket; empty: 2 ms of the current rate, at least 16 kB (256 kB at 1 Gbit/s), recomputed by
  // SetRate, so a slow link is not let through unshaped by a bucket sized for a fast one.
  std::string burst;
  std::string latency = "50ms"; // tbf queueing limit
};

class NetnsLink {
 public:
  enum Side { kA = 0, kB = 1 };
  static Result<std::unique_ptr<NetnsLink>> Create(const NetnsLinkOptions& options = {});
  ~NetnsLink();
  NetnsLink(const NetnsLink&) = delete;
  NetnsLink& operator=(const NetnsLink&) = delete;

  const std::string& name(Side side) const { return ns_[side]; }
  const std::string& address(Side side) const { return address_[side]; }  // without the prefix length
  double rate_bps() const;
  // Changes the tbf rate of both ends.
  Status SetRate(double rate_bps);
  // The environment a UCX process in the namespaces needs: tcp over the veth only (shared memory would
  // bypass the link).
  static std::vector<std::string> UcxEnv();
  // Starts argv inside a namespace through `ip netns exec`, which also remounts /sys for it (UCX finds
  // network devices there), with UcxEnv() added.
  Result<Child> SpawnIn(Side side, const std::vector<std::string>& argv) const;
  // Forks a child that enters the namespace the way `ip netns exec` does and runs `body` with the write
  // end of a pipe; the child exits with body's return value. Child::out_fd reads what body wrote. Call
  // before this process starts threads of its own (only the forking thread exists in the child).
  Result<Child> ForkIn(Side side, const std::function<int(int result_fd)>& body) const;

 private:
  NetnsLink() = default;
  Status Build(const NetnsLinkOptions& options);
  std::string ns_[2];
  std::string address_[2];
  bool made_[2] = {false, false};
  std::string Burst(double rate_bps) const;
  std::string burst_, latency_;
  mutable std::mutex mu_;
  double rate_bps_ = 0;
};

// "800mbit", "2500kbit": tc's rate syntax for a rate in bit/s (at least 8 kbit/s).
std::string TcRate(double rate_bps);

}  // namespace kvstream::cluster
