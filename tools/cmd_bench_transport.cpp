// `kvstream bench transport`: the data plane against ucx_perftest on loopback, and KV-ready time of a real
// context over a link shaped to a given rate between two network namespaces.
//
// ucx_raw rows: our DataPlane moves `iters` messages of each size between two workers of this process with
// a window of outstanding sends, each landing in a posted buffer; ucx_perftest (ucp_am_bw, the same message
// size, iteration count and window) runs in the same benchmark between two processes.
// fetch rows: `kvstream serve` runs in namespace A and `kvstream fetch` in namespace B of a
// cluster::NetnsLink (veth shaped with tc tbf both ways; processes started through `ip netns exec`, which
// also remounts /sys, where UCX finds network devices), UCX pinned to tcp on the veth so shared memory
// cannot bypass the link (docs/cluster.md).
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>

#include "bench/cluster/netns_link.h"
#include "bench/cluster/process.h"
#include "common/half.h"
#include "kvstream/stream.h"
#include "kvstream/transport.h"
#include "tools/codec_files.h"
#include "tools/command.h"
#include "bench/machine.h"
#include "bench/ucx_version.h"
#include "tools/stream_cli.h"

namespace kvstream::cli {
namespace {

using Clock = std::chrono::steady_clock;

using cluster::Child;
using cluster::ReadUntil;
using cluster::Reap;
using cluster::Spawn;

// ---- ucx_raw --------------------------------------------------------------------------------------------

struct RawRow {
  uint64_t msg_bytes = 0;
  double gbps_ours = 0;
  double gbps_perftest = 0;
};

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

// The receiving process of OurThroughput: keeps PostedAhead(window) receives posted (ids 0..total-1 in
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

// Moves messages from this process's DataPlane to one in a child process (as ucx_perftest does, so UCX
// can use the same shared-memory transports), `window` outstanding; returns Gbit/s over `iters` messages
// after a warm-up. Each send's completion callback sends the next message (on the progress thread, as
// ucx_perftest's loop does in its one thread), so no harness thread wakes per message.
Result<double> OurThroughput(uint64_t size, int iters, int window) {
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

// ucx_perftest ucp_am_bw between two processes on loopback; returns Gbit/s ("overall" bandwidth).
// `peer_errors`: endpoints with peer error handling (-e), as our DataPlane creates them. UCX 1.13's
// shared-memory transports have no peer failure handler, so with it both sides use tcp on loopback.
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

// The middle value (the upper of the two middle ones for an even count).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---- shaped fetch ---------------------------------------------------------------------------------------

struct FetchRow {
  std::string method;
  uint64_t bytes = 0;
  double kv_ready_ms = 0;  // the median of the measured fetches
  double kv_ready_ms_min = 0, kv_ready_ms_max = 0;
  double last_byte_ms = 0;  // the median of when the fetches' last payload byte arrived
  int fetches = 0;
  bool pipelined = true;
};

Status ShapedFetches(const Args& args, double gbps, int64_t repetitions, std::vector<FetchRow>* rows,
                     std::string* skipped) {
  cluster::NetnsLinkOptions link_options;
  link_options.rate_bps = gbps * 1e9;
  auto link = cluster::NetnsLink::Create(link_options);
  if (!link.ok()) {
    *skipped = "fetch rows skipped: " + link.status().message();
    return Status::Ok();
  }
  const cluster::NetnsLink& ns = **link;
  const std::string server_address = ns.address(cluster::NetnsLink::kA) + ":17077";
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens, args.GetInt("tokens", 4096));
  const std::string model = args.GetString("model", "smollm2");
  const std::string levels = args.GetString("levels", "fp16,int8,1,2,3,4,5,6");
  const std::string profile = args.GetString("profile", "");
  const std::string scheme = args.GetString("scheme", "channel-uniform");
  double fine_fraction = 0;
  Level fine_level = 0;
  KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &fine_fraction, &fine_level));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t decode_threads, args.GetInt("decode-threads", 1));
  if (decode_threads < 1 || decode_threads > 64) return Status::InvalidArgument("--decode-threads must be in 1..64");
  KVSTREAM_RETURN_IF_ERROR(ParseScheme(scheme).status());
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Status::IoError("readlink /proc/self/exe failed");
  self[n] = '\0';
  std::vector<std::string> serve = {self, "serve", "--listen", server_address, "--model", model, "--tokens",
                                    std::to_string(tokens), "--levels", levels, "--duration-s", "1200", "--scheme", scheme,
                                    "--fine-fraction", std::to_string(fine_fraction), "--fine-level",
                                    std::to_string(fine_level)};
  if (!profile.empty()) serve.insert(serve.end(), {"--profile", profile});
  KVSTREAM_ASSIGN_OR_RETURN(Child server, ns.SpawnIn(cluster::NetnsLink::kA, serve));
  auto ready = ReadUntil(server, "serving", 900);
  if (!ready.ok()) {
    Reap(server, 5, true);
    return ready.status().WithContext("starting the server in " + ns.name(cluster::NetnsLink::kA));
  }
  // The fetcher runs as `kvstream fetch` inside namespace B: UCX finds network devices through /sys, which
  // only `ip netns exec` remounts for the namespace.
  Status fetched = [&]() -> Status {
    for (const std::string& item : SplitList(levels)) {
      Level level;
      if (!ParseLevel(item, &level)) return Status::InvalidArgument("--levels: '" + item + "' is not a level");
      const std::string method = level == kLevelFp16   ? "fp16"
                                 : level == kLevelInt8 ? "int8"
                                                       : "kvstream-" + (scheme == "channel-uniform" ? "" : scheme + "-") +
                                                             LevelName(level);
      for (bool pipelined : {true, false}) {
        if (!IsLossyLevel(level) && !pipelined) continue;
        // Fetches on one connection: the first warms UCX's endpoints, the median of the others is reported
        // (one fetch of a context takes tens of milliseconds on a VM whose neighbours come and go).
        std::vector<std::string> fetch = {self, "fetch", "--connect", server_address, "--context", "0", "--level", item,
                                          "--inflight", pipelined ? "2" : "1", "--repeat", std::to_string(1 + repetitions),
                                          "--json", "--decode-threads", std::to_string(decode_threads)};
        if (!profile.empty()) fetch.insert(fetch.end(), {"--profile", profile});
        KVSTREAM_ASSIGN_OR_RETURN(Child client, ns.SpawnIn(cluster::NetnsLink::kB, fetch));
        int code = -1;
        const std::string out = Reap(client, 300, false, &code);
        std::vector<std::string> lines;
        for (size_t at = out.find("{\"context\""); at != std::string::npos; at = out.find("{\"context\"", at + 1)) {
          lines.push_back(out.substr(at, out.find('\n', at) - at));
        }
        if (code != 0 || lines.size() != static_cast<size_t>(1 + repetitions)) {
          return Status::Unavailable("fetch in " + ns.name(cluster::NetnsLink::kB) + " failed: " + out.substr(0, 2000));
        }
        auto number = [](const std::string& line, const std::string& key) {
          const size_t at = line.find("\"" + key + "\": ");
          return at == std::string::npos ? -1.0 : std::atof(line.c_str() + at + key.size() + 4);
        };
        std::vector<double> ms, last_byte_ms;
        for (size_t i = 1; i < lines.size(); ++i) {
          ms.push_back(number(lines[i], "kv_ready_ms"));
          last_byte_ms.push_back(number(lines[i], "last_byte_ms"));
        }
        const auto [fastest, slowest] = std::minmax_element(ms.begin(), ms.end());
        rows->push_back({method, static_cast<uint64_t>(number(lines.back(), "bytes")), Median(ms), *fastest, *slowest,
                         Median(last_byte_ms), static_cast<int>(ms.size()), pipelined});
      }
    }
    return Status::Ok();
  }();
  Reap(server, 10, true);
  return fetched;
}

Status RunBenchTransport(const Args& args) {
  const bool json = args.Has("json");
  KVSTREAM_ASSIGN_OR_RETURN(int64_t window, args.GetInt("window", 16));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t total_mb, args.GetInt("total-mb", 512));
  KVSTREAM_ASSIGN_OR_RETURN(double link_gbps, args.GetDouble("link-gbps", 1.0));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t repetitions, args.GetInt("repetitions", 3));
  if (window < 1 || window > 1024 || total_mb < 1 || total_mb > (1 << 16) || !(link_gbps > 0) || repetitions < 1 ||
      repetitions > 99) {
    return Status::InvalidArgument("--window must be 1..1024, --total-mb 1..65536, --link-gbps positive, --repetitions 1..99");
  }
  std::vector<uint64_t> sizes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{4} << 20};
  if (args.Has("sizes")) {
    sizes.clear();
    for (const std::string& item : SplitList(args.GetString("sizes"))) {
      const long long s = std::atoll(item.c_str());
      if (s < 1 || s > (1ll << 30)) return Status::InvalidArgument("--sizes: '" + item + "' is not in 1..2^30 bytes");
      sizes.push_back(static_cast<uint64_t>(s));
    }
  }
  const bench::Machine machine = bench::ThisMachine();
  if (json) {
    const nlohmann::json header = {{"header", true}, {"bench", "transport"}, {"date", bench::UtcNow()},
                                   {"machine", bench::MachineJson(machine)}, {"ucx", bench::UcxVersion()}};
    std::printf("%s\n", header.dump().c_str());
  } else {
    std::printf("kvstream bench transport — machine: %s; UCX %s\n\n", bench::DescribeMachine(machine).c_str(), bench::UcxVersion().c_str());
  }
  if (!args.Has("skip-raw")) {
    if (!json) {
      std::printf("%-10s %12s %12s %18s %8s %21s\n", "kind", "msg_bytes", "gbps_ours", "gbps_ucx_perftest", "ratio",
                  "gbps_perftest_no_err");
    }
    int port = 13400 + ::getpid() % 500;
    // The median of `repetitions` runs of each, interleaved, so that a burst of load elsewhere on the
    // machine hits both sides alike.
    for (uint64_t size : sizes) {
      const int iters = static_cast<int>(std::max<uint64_t>(64, (static_cast<uint64_t>(total_mb) << 20) / size));
      std::vector<double> ours, theirs, theirs_no_err;
      for (int r = 0; r < repetitions; ++r) {
        KVSTREAM_ASSIGN_OR_RETURN(double o, OurThroughput(size, iters, static_cast<int>(window)));
        KVSTREAM_ASSIGN_OR_RETURN(double t, PerftestThroughput(size, iters, static_cast<int>(window), port++, true));
        KVSTREAM_ASSIGN_OR_RETURN(double u, PerftestThroughput(size, iters, static_cast<int>(window), port++, false));
        ours.push_back(o);
        theirs.push_back(t);
        theirs_no_err.push_back(u);
      }
      const double o = Median(ours), t = Median(theirs), u = Median(theirs_no_err);
      if (json) {
        std::printf("{\"kind\": \"ucx_raw\", \"msg_bytes\": %llu, \"iters\": %d, \"window\": %lld, \"repetitions\": %lld, "
                    "\"gbps_ours\": %.4f, \"gbps_ucx_perftest\": %.4f, \"ratio\": %.4f, \"gbps_ucx_perftest_no_err\": %.4f, "
                    "\"ratio_no_err\": %.4f}\n",
                    static_cast<unsigned long long>(size), iters, static_cast<long long>(window),
                    static_cast<long long>(repetitions), o, t, o / t, u, o / u);
      } else {
        std::printf("%-10s %12llu %12.3f %18.3f %8.3f %21.3f\n", "ucx_raw", static_cast<unsigned long long>(size), o, t, o / t, u);
      }
      std::fflush(stdout);
    }
  }
  if (args.Has("skip-fetch")) return Status::Ok();
  std::vector<FetchRow> rows;
  std::string skipped;
  KVSTREAM_RETURN_IF_ERROR(ShapedFetches(args, link_gbps, repetitions, &rows, &skipped));
  if (!skipped.empty()) {
    std::fprintf(json ? stderr : stdout, "%s\n", skipped.c_str());
    return Status::Ok();
  }
  if (!json) {
    std::printf("\n%-10s %-16s %10s %14s %12s %13s %10s\n", "kind", "method", "link_gbps", "bytes", "kv_ready_ms",
                "last_byte_ms", "pipelined");
  }
  double int8_ms = 0;
  for (const FetchRow& r : rows) {
    if (r.method == "int8") int8_ms = r.kv_ready_ms;
  }
  for (const FetchRow& r : rows) {
    if (json) {
      std::printf("{\"kind\": \"fetch\", \"method\": \"%s\", \"link_gbps\": %.3f, \"bytes\": %llu, \"kv_ready_ms\": %.3f, "
                  "\"kv_ready_ms_min\": %.3f, \"kv_ready_ms_max\": %.3f, \"last_byte_ms\": %.3f, \"fetches\": %d, "
                  "\"pipelined\": %s, \"speedup_vs_int8\": %.3f}\n",
                  r.method.c_str(), link_gbps, static_cast<unsigned long long>(r.bytes), r.kv_ready_ms, r.kv_ready_ms_min,
                  r.kv_ready_ms_max, r.last_byte_ms, r.fetches, r.pipelined ? "true" : "false",
                  int8_ms > 0 ? int8_ms / r.kv_ready_ms : 0.0);
    } else {
      std::printf("%-10s %-16s %10.3f %14llu %12.2f %13.2f %10s\n", "fetch", r.method.c_str(), link_gbps,
                  static_cast<unsigned long long>(r.bytes), r.kv_ready_ms, r.last_byte_ms, r.pipelined ? "true" : "false");
    }
  }
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(bench_transport, {
    "bench transport",
    "data plane vs ucx_perftest on loopback; KV-ready time over a shaped link",
    "usage: kvstream bench transport [--json] [--sizes LIST] [--window N] [--total-mb MB] [--repetitions R] [--skip-raw]\n"
    "                                [--skip-fetch] [--link-gbps G] [--model M] [--tokens T] [--levels LIST]\n"
    "                                [--profile P] [--scheme S] [--fine-fraction F] [--fine-level L]\n"
    "                                [--decode-threads T]\n\n"
    "ucx_raw rows: our DataPlane and ucx_perftest (ucp_am_bw) move the same messages on this host. The\n"
    "baseline creates its endpoints with peer error handling (-e), as the DataPlane does (it must notice dead\n"
    "peers); UCX 1.13's shared-memory transports cannot, so both run over tcp on loopback. The perftest without\n"
    "error handling (shared memory) is reported beside it (gbps_ucx_perftest_no_err).\n"
    "fetch rows: a real context served from network namespace A, fetched in namespace B over a veth link\n"
    "shaped with tc tbf (needs root; namespaces are created and removed by the benchmark).\n\n"
    "  --json          one JSON object per line: first a header (date, machine, UCX version), then one per\n"
    "                  row: ucx_raw keys msg_bytes, gbps_ours, gbps_ucx_perftest, ratio,\n"
    "                  gbps_ucx_perftest_no_err, ratio_no_err (medians of --repetitions runs);\n"
    "                  fetch keys method, link_gbps, bytes, kv_ready_ms (median of --repetitions fetches after\n"
    "                  a warm-up one), kv_ready_ms_min, kv_ready_ms_max, last_byte_ms (median of when the last\n"
    "                  payload byte arrived: ready soon after it, the link set the time; long after, the\n"
    "                  decoders did), fetches, pipelined, speedup_vs_int8\n"
    "  --sizes LIST    message sizes in bytes (default 65536,1048576,4194304)\n"
    "  --window N      outstanding sends (default 16; our receiver keeps twice as many receives posted)\n"
    "  --total-mb MB   bytes moved per size (default 512)\n"
    "  --repetitions R ucx_raw: runs of each side per size, interleaved; fetch: measured fetches of each\n"
    "                  method; medians are reported (default 3)\n"
    "  --link-gbps G   shaped link rate (default 1)\n"
    "  --model M       model whose KV is fetched (default smollm2)\n"
    "  --tokens T      context tokens (default 4096)\n"
    "  --levels LIST   methods: fp16, int8 and lossy levels (default fp16,int8,1,2,3,4,5,6)\n"
    "  --profile P     codec profile (kvstream profile) for server and fetcher (default none: in-chunk tables)\n"
    "  --scheme S      the server's lossy quantiser: channel-uniform (default), transform or predicted (need a\n"
    "                  --profile made with --transform or --predict; methods are then named\n"
    "                  kvstream-transform-L<n> or kvstream-predicted-L<n>)\n" +
        FineRowsHelp(18) +
    "  --decode-threads T  the fetcher's decode threads (several chunks at once, or one chunk's parts;\n"
    "                  default 1)",
    {"sizes", "window", "total-mb", "repetitions", "link-gbps", "model", "tokens", "levels", "profile", "scheme",
     "fine-fraction", "fine-level", "decode-threads"},
    {"json", "skip-raw", "skip-fetch"},
    RunBenchTransport,
});

}  // namespace kvstream::cli
