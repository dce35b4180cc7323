// Our data plane against ucx_perftest on one host (see the header).
#include "bench/ucx_raw_bench.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/cluster/process.h"
#include "kvstream/transport.h"

namespace kvstream::bench {
namespace {

using Clock = std::chrono::steady_clock;

using cluster::Child;
using cluster::Reap;
using cluster::Spawn;

bool WriteAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(data);
  while (size > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeout_ms) <= 0) return false;
    const ssize_t n = ::read(fd, p, size);
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// How many receives the receiving process keeps posted beyond the messages that have all arrived. The
// sender's own window bounds what is in flight; posting further ahead keeps "is message i posted yet?"
// (learnt through the progress pipe, every window/2 arrivals) from holding the sender back, as nothing
// holds back ucx_perftest's sender, whose receiver takes whatever arrives.
int PostedAhead(int window) { return 2 * window; }

// The receiving process of DataPlaneThroughput: keeps PostedAhead(window) receives posted (ids 0..total-1 in
// order, message i's completion posting i + PostedAhead) and reports on `progress_fd` how many leading
// messages have all arrived, whenever that grew by window/2 and at the last. Its main thread sleeps until
// the last: nothing but the data plane's progress thread runs per message, as in ucx_perftest's
// single-threaded receiver. Every receive lands in one buffer, as in ucx_perftest, so that both move the
// same bytes through the same memory (with a buffer per message of 4 MiB the destinations outgrow the
// caches, and the comparison measures the memory system instead).
[[noreturn]] void ThroughputReceiver(uint64_t size, int total, int window, int address_fd, int progress_fd) {
  int code = 1;
  {
    auto plane = DataPlane::Create();
    if (plane.ok()) {
      const auto buffer = std::make_shared<std::vector<uint8_t>>(size);
      const int ahead = PostedAhead(window);
      std::mutex mu;
      std::condition_variable cv;
      std::vector<char> arrived(static_cast<size_t>(total), 0);
      int received = 0;  // messages 0..received-1 have all arrived (they may complete out of order)
      int reported = 0;
      bool failed = false;
      std::function<void(int)> post = [&](int i) {
        Status s = (*plane)->ExpectReceive(1 + i, buffer->data(), size, Device::kHost, buffer, [&, i](Status st, uint64_t, uint32_t) {
          if (i + ahead < total) post(i + ahead);
          std::lock_guard lock(mu);
          failed |= !st.ok();
          arrived[static_cast<size_t>(i)] = 1;
          while (received < total && arrived[static_cast<size_t>(received)]) ++received;
          const bool last = received == total || !st.ok();
          if (received - reported >= std::max(1, window / 2) || (last && received > reported)) {
            reported = received;
            const uint64_t done = static_cast<uint64_t>(received);
            WriteAll(progress_fd, &done, sizeof done);
          }
          if (last) cv.notify_all();
        });
        if (!s.ok()) {
          std::lock_guard lock(mu);
          failed = true;
          cv.notify_all();
        }
      };
      for (int i = 0; i < std::min(ahead, total); ++i) post(i);
      // The address goes out only now: the sender may send as soon as it has it.
      const uint32_t length = static_cast<uint32_t>((*plane)->address().size());
      WriteAll(address_fd, &length, sizeof length);
      WriteAll(address_fd, (*plane)->address().data(), length);
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(120), [&] { return failed || received == total; });
      code = (!failed && received == total) ? 0 : 1;
    }
  }
  ::_exit(code);
}

}  // namespace

Result<double> DataPlaneThroughput(uint64_t size, int iters, int window) {
  const int warmup = std::max(window, iters / 10);
  const int total = warmup + iters;
  int address_pipe[2], progress_pipe[2];
  if (::pipe2(address_pipe, O_CLOEXEC) != 0 || ::pipe2(progress_pipe, O_CLOEXEC) != 0) {
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  const pid_t pid = ::fork();  // before this process starts any thread of its own for this run
  if (pid < 0) return Status::IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) ThroughputReceiver(size, total, window, address_pipe[1], progress_pipe[1]);
  ::close(address_pipe[1]);
  ::close(progress_pipe[1]);
  Child child{pid, address_pipe[0]};
  auto finish = [&](Status s) -> Status {
    ::close(progress_pipe[0]);
    int code = -1;
    Reap(child, s.ok() ? 30 : 1, !s.ok(), &code);
    if (s.ok() && code != 0) return Status::Internal("bench receiver process failed (exit " + std::to_string(code) + ")");
    return s;
  };
  uint32_t length = 0;
  if (!ReadAll(address_pipe[0], &length, sizeof length, 10000) || length == 0 || length > 65536) {
    return finish(Status::Unavailable("bench receiver process did not send its worker address"));
  }
  std::vector<uint8_t> address(length);
  if (!ReadAll(address_pipe[0], address.data(), length, 10000)) return finish(Status::Unavailable("truncated worker address"));

  double seconds = 0;
  uint64_t measured = 0;
  Status status = [&]() -> Status {
    KVSTREAM_ASSIGN_OR_RETURN(auto sender, DataPlane::Create());
    KVSTREAM_ASSIGN_OR_RETURN(PeerId peer, sender->Connect(address));
    auto payload = std::make_shared<std::vector<uint8_t>>(size, 0x5a);
    std::mutex mu;
    std::condition_variable cv;
    uint64_t received = 0;  // as last reported by the receiver
    int next = 0;           // the next message to send
    int outstanding = 0;
    Status failure;
    Clock::time_point t_warm, t_end;
    uint64_t measured_from = 0;
    // Claims the messages that may go now (under mu): message i once it is posted and the window has room.
    auto claim = [&] {
      std::vector<int> ids;
      const uint64_t posted = received + static_cast<uint64_t>(PostedAhead(window));
      while (failure.ok() && next < total && outstanding < window && static_cast<uint64_t>(next) < posted) {
        ids.push_back(next++);
        ++outstanding;
      }
      return ids;
    };
    // Sends outside mu: a send refused at once runs its callback before Send returns.
    std::function<void(std::vector<int>)> send = [&](std::vector<int> ids) {
      for (int i : ids) {
        sender->Send(peer, 1 + i, 0, payload->data(), size, Device::kHost, payload, [&](Status s) {
          std::vector<int> more;
          {
            std::lock_guard lock(mu);
            --outstanding;
            if (!s.ok() && failure.ok()) failure = s;
            if (!failure.ok() || (next == total && outstanding == 0)) cv.notify_all();
            more = claim();
          }
          send(std::move(more));
        });
      }
    };
    std::thread reader([&] {
      uint64_t done = 0;
      while (ReadAll(progress_pipe[0], &done, sizeof done, 60000)) {
        std::vector<int> more;
        {
          std::lock_guard lock(mu);
          // Reports come in steps: the first one at or past the warm-up starts the clock.
          if (received < static_cast<uint64_t>(warmup) && done >= static_cast<uint64_t>(warmup)) {
            t_warm = Clock::now();
            measured_from = done;
          }
          received = done;
          if (done == static_cast<uint64_t>(total)) {
            t_end = Clock::now();
            cv.notify_all();
            break;
          }
          more = claim();
        }
        send(std::move(more));
      }
      std::lock_guard lock(mu);
      if (received != static_cast<uint64_t>(total) && failure.ok()) {
        failure = Status::Unavailable("bench receiver process stopped reporting after " + std::to_string(received) + " messages");
      }
      cv.notify_all();
    });
    std::vector<int> first;
    {
      std::lock_guard lock(mu);
      first = claim();
    }
    send(std::move(first));
    {
      std::unique_lock lock(mu);
      if (!cv.wait_for(lock, std::chrono::seconds(90), [&] {
            return !failure.ok() || (received == static_cast<uint64_t>(total) && outstanding == 0);
          }) &&
          failure.ok()) {
        failure = Status::Timeout("bench: messages did not all arrive within 90 s");
      }
    }
    reader.join();
    // Completes whatever is still outstanding (after a failure) while the callbacks' state is alive.
    sender.reset();
    seconds = std::chrono::duration<double>(t_end - t_warm).count();
    measured = static_cast<uint64_t>(total) - measured_from;
    return failure;
  }();
  status = finish(status);
  KVSTREAM_RETURN_IF_ERROR(status);
  return 8.0 * static_cast<double>(size) * static_cast<double>(measured) / seconds / 1e9;
}

Result<double> PerftestThroughput(uint64_t size, int iters, int window, int port, bool peer_errors) {
  std::vector<std::string> common = {"-t", "ucp_am_bw", "-s", std::to_string(size), "-n", std::to_string(iters),
                                     "-w", std::to_string(std::max(window, iters / 10)), "-O", std::to_string(window),
                                     "-p", std::to_string(port)};
  if (peer_errors) common.push_back("-e");
  std::vector<std::string> server_argv = {"ucx_perftest"};
  server_argv.insert(server_argv.end(), common.begin(), common.end());
  KVSTREAM_ASSIGN_OR_RETURN(Child server, Spawn(server_argv, {}));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::string> client_argv = {"ucx_perftest", "127.0.0.1"};
  client_argv.insert(client_argv.end(), common.begin(), common.end());
  auto client = Spawn(client_argv, {});
  if (!client.ok()) {
    Reap(server, 1, true);
    return client.status();
  }
  const std::string out = Reap(*client, 120, false);
  Reap(server, 5, false);
  const size_t at = out.find("Final:");
  if (at == std::string::npos) return Status::Unavailable("ucx_perftest printed no Final line: " + out.substr(0, 2000));
  std::istringstream line(out.substr(at + 6));
  double iters_done, p50, avg_us, overall_us, bw_avg, bw_overall;
  if (!(line >> iters_done >> p50 >> avg_us >> overall_us >> bw_avg >> bw_overall)) {
    return Status::CorruptData("cannot parse ucx_perftest's Final line: " + out.substr(at, 200));
  }
  return bw_overall * 1048576.0 * 8 / 1e9;  // ucx_perftest's MB is 2^20 bytes
}

}  // namespace kvstream::bench
