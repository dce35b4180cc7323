// `kvstream bench transport`: the data plane against ucx_perftest on loopback, and KV-ready time of a real
// context over a link shaped to a given rate between two network namespaces. The flags become
// bench::TransportBenchOptions, bench::RunTransportBench measures (bench/transport_bench.h), and this
// prints the rows as JSON lines or tables.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/machine.h"
#include "bench/transport_bench.h"
#include "bench/ucx_version.h"
#include "kvstream/cuda.h"
#include "kvstream/transport.h"
#include "tools/codec_files.h"
#include "tools/command.h"

namespace kvstream::cli {
namespace {

Result<bench::TransportBenchOptions> ParseOptions(const Args& args) {
  bench::TransportBenchOptions o;
  KVSTREAM_ASSIGN_OR_RETURN(o.window, args.GetInt("window", o.window));
  KVSTREAM_ASSIGN_OR_RETURN(o.total_mb, args.GetInt("total-mb", o.total_mb));
  KVSTREAM_ASSIGN_OR_RETURN(o.link_gbps, args.GetDouble("link-gbps", o.link_gbps));
  KVSTREAM_ASSIGN_OR_RETURN(o.repetitions, args.GetInt("repetitions", o.repetitions));
  if (args.Has("sizes")) {
    o.sizes.clear();
    for (const std::string& item : SplitList(args.GetString("sizes"))) {
      const long long s = std::atoll(item.c_str());
      if (s < 1 || s > (1ll << 30)) return Status::InvalidArgument("--sizes: '" + item + "' is not in 1..2^30 bytes");
      o.sizes.push_back(static_cast<uint64_t>(s));
    }
  }
  o.raw = !args.Has("skip-raw");
  o.fetch = !args.Has("skip-fetch");
  KVSTREAM_ASSIGN_OR_RETURN(o.tokens, args.GetInt("tokens", o.tokens));
  o.model = args.GetString("model", o.model);
  if (args.Has("levels")) {
    o.levels.clear();
    for (const std::string& item : SplitList(args.GetString("levels"))) {
      Level level;
      if (!ParseLevel(item, &level)) return Status::InvalidArgument("--levels: '" + item + "' is not a level");
      o.levels.push_back(level);
    }
  }
  o.profile = args.GetString("profile", o.profile);
  KVSTREAM_ASSIGN_OR_RETURN(o.scheme, ParseQuantScheme(args.GetString("scheme", "channel-uniform")));
  KVSTREAM_RETURN_IF_ERROR(ParseFineRows(args, &o.fine_fraction, &o.fine_level));
  KVSTREAM_ASSIGN_OR_RETURN(o.decode_threads, args.GetInt("decode-threads", o.decode_threads));
  const std::string device = args.GetString("device", "cpu");
  if (device == "cuda") {
    std::string why;
    if (o.fetch && !GpuAvailable(&why)) return Status::Unsupported("bench transport --device cuda: " + why);
    o.devices = {"cpu", "cuda"};  // the CPU rows in the same run, as the baseline
  } else if (device != "cpu") {
    return Status::InvalidArgument("--device " + device + ": expected cpu or cuda");
  }
  KVSTREAM_RETURN_IF_ERROR(bench::CheckTransportBenchOptions(o));
  return o;
}

Status RunBenchTransport(const Args& args) {
  const bool json = args.Has("json");
  KVSTREAM_ASSIGN_OR_RETURN(const bench::TransportBenchOptions o, ParseOptions(args));
  const bench::Machine machine = bench::ThisMachine();
  // Whether this UCX moves GPU memory (the ucx-cuda path needs it; without it GPU fetches use staging).
  KVSTREAM_ASSIGN_OR_RETURN(std::shared_ptr<DataPlane> probe, DataPlane::Create());
  const bool ucx_cuda = probe->cuda_memory();
  probe.reset();
  if (json) {
    const nlohmann::json header = {{"header", true}, {"bench", "transport"}, {"date", bench::UtcNow()},
                                   {"machine", bench::MachineJson(machine)}, {"ucx", bench::UcxVersion()},
                                   {"ucx_cuda", ucx_cuda}};
    std::printf("%s\n", header.dump().c_str());
  } else {
    std::printf("kvstream bench transport — machine: %s; UCX %s (%s)\n\n", bench::DescribeMachine(machine).c_str(),
                bench::UcxVersion().c_str(), ucx_cuda ? "moves CUDA memory" : "no CUDA memory: GPU fetches use staging");
  }
  if (o.raw && !json) {
    std::printf("%-10s %12s %12s %18s %8s %21s\n", "kind", "msg_bytes", "gbps_ours", "gbps_ucx_perftest", "ratio",
                "gbps_perftest_no_err");
  }
  auto print_raw = [&](const bench::UcxRawRow& r) {
    const double o_gbps = r.gbps_ours, t = r.gbps_ucx_perftest, u = r.gbps_ucx_perftest_no_err;
    if (json) {
      std::printf("{\"kind\": \"ucx_raw\", \"msg_bytes\": %llu, \"iters\": %d, \"window\": %lld, \"repetitions\": %lld, "
                  "\"gbps_ours\": %.4f, \"gbps_ucx_perftest\": %.4f, \"ratio\": %.4f, \"gbps_ucx_perftest_no_err\": %.4f, "
                  "\"ratio_no_err\": %.4f}\n",
                  static_cast<unsigned long long>(r.msg_bytes), r.iters, static_cast<long long>(o.window),
                  static_cast<long long>(o.repetitions), o_gbps, t, o_gbps / t, u, o_gbps / u);
    } else {
      std::printf("%-10s %12llu %12.3f %18.3f %8.3f %21.3f\n", "ucx_raw", static_cast<unsigned long long>(r.msg_bytes), o_gbps,
                  t, o_gbps / t, u);
    }
    std::fflush(stdout);
  };
  KVSTREAM_ASSIGN_OR_RETURN(const bench::TransportBenchReport report, bench::RunTransportBench(o, print_raw));
  if (!o.fetch) return Status::Ok();
  if (!report.fetch_skipped.empty()) {
    std::fprintf(json ? stderr : stdout, "%s\n", report.fetch_skipped.c_str());
    return Status::Ok();
  }
  if (!json) {
    std::printf("\n%-10s %-16s %-6s %-8s %10s %14s %12s %13s %10s\n", "kind", "method", "device", "path", "link_gbps",
                "bytes", "kv_ready_ms", "last_byte_ms", "pipelined");
  }
  for (const bench::FetchRow& r : report.fetch) {
    if (json) {
      std::printf("{\"kind\": \"fetch\", \"method\": \"%s\", \"device\": \"%s\", \"path\": \"%s\", \"link_gbps\": %.3f, "
                  "\"bytes\": %llu, \"kv_ready_ms\": %.3f, "
                  "\"kv_ready_ms_min\": %.3f, \"kv_ready_ms_max\": %.3f, \"last_byte_ms\": %.3f, \"fetches\": %d, "
                  "\"pipelined\": %s, \"speedup_vs_int8\": %.3f}\n",
                  r.method.c_str(), r.device.c_str(), r.path.c_str(), o.link_gbps, static_cast<unsigned long long>(r.bytes), r.kv_ready_ms, r.kv_ready_ms_min,
                  r.kv_ready_ms_max, r.last_byte_ms, r.fetches, r.pipelined ? "true" : "false", r.speedup_vs_int8);
    } else {
      std::printf("%-10s %-16s %-6s %-8s %10.3f %14llu %12.2f %13.2f %10s\n", "fetch", r.method.c_str(), r.device.c_str(),
                  r.path.c_str(), o.link_gbps,
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
    "                                [--decode-threads T] [--device cpu|cuda]\n\n"
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
    "                  decoders did), fetches, pipelined, speedup_vs_int8 (against int8 on the same device),\n"
    "                  device, path (host, or staging: through the device pipeline)\n"
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
    "                  default 1)\n"
    "  --device D      cpu (default): fetch into host memory; cuda: fetch rows into GPU 0's memory too,\n"
    "                  beside the cpu rows (fails in one line where there is no GPU)",
    {"sizes", "window", "total-mb", "repetitions", "link-gbps", "model", "tokens", "levels", "profile", "scheme",
     "fine-fraction", "fine-level", "decode-threads", "device"},
    {"json", "skip-raw", "skip-fetch"},
    RunBenchTransport,
});

}  // namespace kvstream::cli
