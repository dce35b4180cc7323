// `kvstream bench transport` (see the header).
#include "bench/transport_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "bench/cluster/netns_link.h"
#include "bench/cluster/process.h"
#include "bench/data_dir.h"
#include "bench/statistics.h"
#include "bench/ucx_raw_bench.h"

namespace kvstream::bench {
namespace {

using cluster::Child;
using cluster::ReadUntil;
using cluster::Reap;

// The median of `repetitions` runs of each side, interleaved, so that a burst of load elsewhere on the
// machine hits both sides alike.
Result<UcxRawRow> RawRow(const TransportBenchOptions& o, uint64_t size, int* port) {
  UcxRawRow row;
  row.msg_bytes = size;
  row.iters = static_cast<int>(std::max<uint64_t>(64, (static_cast<uint64_t>(o.total_mb) << 20) / size));
  const int window = static_cast<int>(o.window);
  std::vector<double> ours, theirs, theirs_no_err;
  for (int r = 0; r < o.repetitions; ++r) {
    KVSTREAM_ASSIGN_OR_RETURN(double ours_gbps, DataPlaneThroughput(size, row.iters, window));
    KVSTREAM_ASSIGN_OR_RETURN(double theirs_gbps, PerftestThroughput(size, row.iters, window, (*port)++, true));
    KVSTREAM_ASSIGN_OR_RETURN(double no_err_gbps, PerftestThroughput(size, row.iters, window, (*port)++, false));
    ours.push_back(ours_gbps);
    theirs.push_back(theirs_gbps);
    theirs_no_err.push_back(no_err_gbps);
  }
  row.gbps_ours = Median(ours);
  row.gbps_ucx_perftest = Median(theirs);
  row.gbps_ucx_perftest_no_err = Median(theirs_no_err);
  return row;
}

std::string LevelList(const std::vector<Level>& levels) {
  std::string s;
  for (Level l : levels) s += (s.empty() ? "" : ",") + LevelName(l);
  return s;
}

// One fetch row per method, or *skipped and none when the link cannot be made.
Status ShapedFetches(const TransportBenchOptions& o, std::vector<FetchRow>* rows, std::string* skipped) {
  cluster::NetnsLinkOptions link_options;
  link_options.rate_bps = o.link_gbps * 1e9;
  auto link = cluster::NetnsLink::Create(link_options);
  if (!link.ok()) {
    *skipped = "fetch rows skipped: " + link.status().message();
    return Status::Ok();
  }
  const cluster::NetnsLink& ns = **link;
  const std::string server_address = ns.address(cluster::NetnsLink::kA) + ":17077";
  const std::string scheme = SchemeName(o.scheme);
  std::filesystem::path self_path = o.kvstream;
  if (self_path.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(self_path, ThisExecutable());
  }
  const std::string self = self_path.string();
  std::vector<std::string> serve = {self, "serve", "--listen", server_address, "--model", o.model, "--tokens",
                                    std::to_string(o.tokens), "--levels", LevelList(o.levels), "--duration-s", "1200", "--scheme", scheme,
                                    "--fine-fraction", std::to_string(o.fine_fraction), "--fine-level",
                                    std::to_string(o.fine_level)};
  if (!o.profile.empty()) serve.insert(serve.end(), {"--profile", o.profile});
  KVSTREAM_ASSIGN_OR_RETURN(Child server, ns.SpawnIn(cluster::NetnsLink::kA, serve));
  auto ready = ReadUntil(server, "serving", 900);
  if (!ready.ok()) {
    Reap(server, 5, true);
    return ready.status().WithContext("starting the server in " + ns.name(cluster::NetnsLink::kA));
  }
  // The fetcher runs as `kvstream fetch` inside namespace B: UCX finds network devices through /sys, which
  // only `ip netns exec` remounts for the namespace.
  Status fetched = [&]() -> Status {
    for (const std::string& device : o.devices) {
      for (const Level level : o.levels) {
        const std::string method = level == kLevelFp16   ? "fp16"
                                   : level == kLevelInt8 ? "int8"
                                                         : "kvstream-" + (o.scheme == QuantScheme::kChannelUniform ? "" : scheme + "-") +
                                                               LevelName(level);
        for (bool pipelined : {true, false}) {
          if (!IsLossyLevel(level) && !pipelined) continue;
          // Fetches on one connection: the first warms UCX's endpoints, the median of the others is reported
          // (one fetch of a context takes tens of milliseconds on a VM whose neighbours come and go).
          std::vector<std::string> fetch = {self, "fetch", "--connect", server_address, "--context", "0", "--level", LevelName(level),
                                            "--inflight", pipelined ? "2" : "1", "--repeat", std::to_string(1 + o.repetitions),
                                            "--json", "--decode-threads", std::to_string(o.decode_threads), "--device", device};
          if (!o.profile.empty()) fetch.insert(fetch.end(), {"--profile", o.profile});
          KVSTREAM_ASSIGN_OR_RETURN(Child client, ns.SpawnIn(cluster::NetnsLink::kB, fetch));
          int code = -1;
          const std::string out = Reap(client, 300, false, &code);
          std::vector<std::string> lines;
          for (size_t at = out.find("{\"context\""); at != std::string::npos; at = out.find("{\"context\"", at + 1)) {
            lines.push_back(out.substr(at, out.find('\n', at) - at));
          }
          if (code != 0 || lines.size() != static_cast<size_t>(1 + o.repetitions)) {
            return Status::Unavailable("fetch in " + ns.name(cluster::NetnsLink::kB) + " failed: " + out.substr(0, 2000));
          }
          // A field of one of the fetch's JSON lines: where its value starts, or npos.
          auto field = [](const std::string& line, const std::string& key) {
            const size_t at = line.find("\"" + key + "\": ");
            return at == std::string::npos ? at : at + key.size() + 4;
          };
          auto number = [&](const std::string& line, const std::string& key) {
            const size_t at = field(line, key);
            return at == std::string::npos ? -1.0 : std::atof(line.c_str() + at);
          };
          std::vector<double> ms, last_byte_ms;
          for (size_t i = 1; i < lines.size(); ++i) {
            ms.push_back(number(lines[i], "kv_ready_ms"));
            last_byte_ms.push_back(number(lines[i], "last_byte_ms"));
          }
          const auto [fastest, slowest] = std::minmax_element(ms.begin(), ms.end());
          FetchRow row;
          row.method = method;
          row.device = device;
          if (const size_t at = field(lines.back(), "path"); at != std::string::npos && lines.back()[at] == '"') {
            row.path = lines.back().substr(at + 1, lines.back().find('"', at + 1) - at - 1);
          }
          row.bytes = static_cast<uint64_t>(number(lines.back(), "bytes"));
          row.kv_ready_ms = Median(ms);
          row.kv_ready_ms_min = *fastest;
          row.kv_ready_ms_max = *slowest;
          row.last_byte_ms = Median(last_byte_ms);
          row.fetches = static_cast<int>(ms.size());
          row.pipelined = pipelined;
          rows->push_back(row);
        }
      }
    }
    return Status::Ok();
  }();
  Reap(server, 10, true);
  return fetched;
}

}  // namespace

Status CheckTransportBenchOptions(const TransportBenchOptions& o) {
  if (o.window < 1 || o.window > 1024 || o.total_mb < 1 || o.total_mb > (1 << 16) || !(o.link_gbps > 0) ||
      o.repetitions < 1 || o.repetitions > 99) {
    return Status::InvalidArgument("--window must be 1..1024, --total-mb 1..65536, --link-gbps positive, --repetitions 1..99");
  }
  for (uint64_t s : o.sizes) {
    if (s < 1 || s > (uint64_t{1} << 30)) return Status::InvalidArgument("--sizes: " + std::to_string(s) + " is not in 1..2^30 bytes");
  }
  for (Level l : o.levels) {
    if (!IsValidLevel(l) || l == kLevelText) return Status::InvalidArgument("--levels: " + LevelName(l) + " is not fp16, int8 or a lossy level");
  }
  if (o.decode_threads < 1 || o.decode_threads > 64) return Status::InvalidArgument("--decode-threads must be in 1..64");
  for (const std::string& d : o.devices) {
    if (d != "cpu" && d != "cuda") return Status::InvalidArgument("--device " + d + ": expected cpu or cuda");
  }
  if (!(o.fine_fraction >= 0.0 && o.fine_fraction <= 1.0)) {
    return Status::InvalidArgument("--fine-fraction = " + std::to_string(o.fine_fraction) + " outside [0, 1]");
  }
  if (o.fine_level < 1 || o.fine_level > 15) {
    return Status::InvalidArgument("--fine-level = " + std::to_string(o.fine_level) + " outside 1..15");
  }
  return Status::Ok();
}

Result<TransportBenchReport> RunTransportBench(const TransportBenchOptions& o,
                                               const std::function<void(const UcxRawRow&)>& on_raw_row) {
  KVSTREAM_RETURN_IF_ERROR(CheckTransportBenchOptions(o));
  TransportBenchReport report;
  if (o.raw) {
    int port = 13400 + ::getpid() % 500;
    for (uint64_t size : o.sizes) {
      KVSTREAM_ASSIGN_OR_RETURN(UcxRawRow row, RawRow(o, size, &port));
      if (on_raw_row) on_raw_row(row);
      report.raw.push_back(row);
    }
  }
  if (!o.fetch) return report;
  KVSTREAM_RETURN_IF_ERROR(ShapedFetches(o, &report.fetch, &report.fetch_skipped));
  std::map<std::string, double> int8_ms;  // per device
  for (const FetchRow& r : report.fetch) {
    if (r.method == "int8") int8_ms[r.device] = r.kv_ready_ms;
  }
  for (FetchRow& r : report.fetch) {
    const auto it = int8_ms.find(r.device);
    r.speedup_vs_int8 = it != int8_ms.end() ? it->second / r.kv_ready_ms : 0.0;
  }
  return report;
}

}  // namespace kvstream::bench
