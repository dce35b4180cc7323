// cluster/netns_link.cpp — namespaces, veth and tbf through ip(8) and tc(8) (see netns_link.h).
#include "bench/cluster/netns_link.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace kvstream::cluster {
namespace {

// Distinct names for links made by one process, and by processes running side by side.
std::atomic<int> next_link{0};

}  // namespace

std::string TcRate(double rate_bps) {
  const long long kbit = std::max(8LL, static_cast<long long>(std::llround(rate_bps / 1e3)));
  return std::to_string(kbit) + "kbit";
}

Result<std::unique_ptr<NetnsLink>> NetnsLink::Create(const NetnsLinkOptions& options) {
  if (!(options.rate_bps >= 8e3)) {
    return Status::InvalidArgument("NetnsLink: rate_bps = " + std::to_string(options.rate_bps) + ", must be >= 8000");
  }
  if (::geteuid() != 0) {
    return Status(StatusCode::kPermissionDenied, "cannot create namespaces: not root (euid " + std::to_string(::geteuid()) + ")");
  }
  std::unique_ptr<NetnsLink> link(new NetnsLink());
  Status s = link->Build(options);
  if (!s.ok()) return Status(StatusCode::kPermissionDenied, "cannot create namespaces: " + s.message());
  return link;
}

Status NetnsLink::Build(const NetnsLinkOptions& options) {
  const int n = next_link.fetch_add(1);
  const std::string id = std::to_string(::getpid() % 100000) + "x" + std::to_string(n);
  ns_[kA] = "kvsA" + id;
  ns_[kB] = "kvsB" + id;
  const int subnet = 1 + (::getpid() * 7 + n) % 250;
  address_[kA] = "10.77." + std::to_string(subnet) + ".1";
  address_[kB] = "10.77." + std::to_string(subnet) + ".2";
  burst_ = options.burst;
  latency_ = options.latency;
  rate_bps_ = options.rate_bps;
  for (int side : {kA, kB}) {
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "netns", "add", ns_[side]}));
    made_[side] = true;
  }
  // Interface names are at most 15 characters; the veth is created straight into the namespaces.
  const std::string va = "kva" + id, vb = "kvb" + id;
  KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "link", "add", va.substr(0, 15), "netns", ns_[kA], "type", "veth", "peer", "name",
                                       vb.substr(0, 15), "netns", ns_[kB]}));
  const std::string names[2] = {va.substr(0, 15), vb.substr(0, 15)};
  for (int side : {kA, kB}) {
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns_[side], "link", "set", names[side], "name", kNetnsDevice}));
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns_[side], "addr", "add", address_[side] + "/24", "dev", kNetnsDevice}));
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns_[side], "link", "set", kNetnsDevice, "up"}));
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "-n", ns_[side], "link", "set", "lo", "up"}));
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "netns", "exec", ns_[side], "tc", "qdisc", "add", "dev", kNetnsDevice, "root",
                                         "tbf", "rate", TcRate(rate_bps_), "burst", Burst(rate_bps_), "latency", latency_}));
  }
  // A veth end reports carrier a moment after both ends are up; UCX skips a device that is not running.
  for (int side : {kA, kB}) {
    std::string state;
    for (int attempt = 0; attempt < 100; ++attempt) {
      KVSTREAM_ASSIGN_OR_RETURN(Child child, Spawn({"ip", "-n", ns_[side], "-o", "link", "show", kNetnsDevice}));
      state = Reap(child, 5, false);
      if (state.find("state UP") != std::string::npos) break;
      ::usleep(50000);
    }
    if (state.find("state UP") == std::string::npos) {
      return Status::Timeout(std::string(kNetnsDevice) + " in " + ns_[side] + " did not come up within 5 s: " + state);
    }
  }
  return Status::Ok();
}

NetnsLink::~NetnsLink() {
  for (int side : {kA, kB}) {
    if (made_[side]) (void)RunCommand({"ip", "netns", "del", ns_[side]});
  }
}

std::string NetnsLink::Burst(double rate_bps) const {
  if (!burst_.empty()) return burst_;
  return std::to_string(std::max(16000LL, static_cast<long long>(rate_bps / 8 * 0.002))) + "b";
}

double NetnsLink::rate_bps() const {
  std::lock_guard lock(mu_);
  return rate_bps_;
}

Status NetnsLink::SetRate(double rate_bps) {
  if (!(rate_bps >= 8e3)) return Status::InvalidArgument("SetRate: rate_bps = " + std::to_string(rate_bps) + ", must be >= 8000");
  std::lock_guard lock(mu_);
  for (int side : {kA, kB}) {
    KVSTREAM_RETURN_IF_ERROR(RunCommand({"ip", "netns", "exec", ns_[side], "tc", "qdisc", "change", "dev", kNetnsDevice, "root",
                                         "tbf", "rate", TcRate(rate_bps), "burst", Burst(rate_bps), "latency", latency_}));
  }
  rate_bps_ = rate_bps;
  return Status::Ok();
}

std::vector<std::string> NetnsLink::UcxEnv() {
  return {"UCX_TLS=tcp", std::string("UCX_NET_DEVICES=") + kNetnsDevice};
}

Result<Child> NetnsLink::SpawnIn(Side side, const std::vector<std::string>& argv) const {
  std::vector<std::string> full = {"ip", "netns", "exec", ns_[side]};
  full.insert(full.end(), argv.begin(), argv.end());
  return Spawn(full, UcxEnv());
}

Result<Child> NetnsLink::ForkIn(Side side, const std::function<int(int result_fd)>& body) const {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  const std::string path = "/run/netns/" + ns_[side];
  const int ns_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns_fd < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Status::IoError("open " + path + ": " + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(ns_fd);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    return Status::IoError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(pipefd[0]);
    // As `ip netns exec`: the network namespace, then a private mount namespace with a sysfs of it.
    if (::setns(ns_fd, CLONE_NEWNET) != 0 || ::unshare(CLONE_NEWNS) != 0 ||
        ::mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0 || ::umount2("/sys", MNT_DETACH) != 0 ||
        ::mount(ns_[side].c_str(), "/sys", "sysfs", 0, nullptr) != 0) {
      const std::string error = "entering namespace " + ns_[side] + ": " + std::strerror(errno) + "\n";
      (void)!::write(pipefd[1], error.data(), error.size());
      ::_exit(125);
    }
    for (const auto& e : UcxEnv()) ::putenv(::strdup(e.c_str()));
    ::_exit(body(pipefd[1]));
  }
  ::close(ns_fd);
  ::close(pipefd[1]);
  return Child{pid, pipefd[0]};
}

}  // namespace kvstream::cluster
