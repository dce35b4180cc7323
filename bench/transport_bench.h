// `kvstream bench transport`: the data plane against ucx_perftest on this host (ucx_raw rows,
// bench/ucx_raw_bench.h), and the KV-ready time of a real context over a link shaped to a given rate
// between two network namespaces (fetch rows).
//
// fetch rows: `kvstream serve` (this executable, or TransportBenchOptions::kvstream) runs in namespace A
// and `kvstream fetch` in namespace B of a cluster::NetnsLink (veth shaped with tc tbf both ways;
// processes started through `ip netns exec`, which also remounts /sys, where UCX finds network devices),
// UCX pinned to tcp on the veth so shared memory cannot bypass the link (docs/cluster.md). Per level, one
// connection fetches the context 1 + repetitions times: the first warms UCX's endpoints, the others are
// measured; lossy levels are fetched pipelined (2 chunks in flight) and not (1).
//
// Option fields mirror the command's flags one to one (named beside each); errors name the flag.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct TransportBenchOptions {
  // ucx_raw rows
  bool raw = true;                // measure them (--skip-raw: not)
  std::vector<uint64_t> sizes = {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{4} << 20};  // message bytes, 1..2^30 (--sizes)
  int64_t window = 16;            // outstanding sends, 1..1024 (--window)
  int64_t total_mb = 512;         // MiB moved per size and run (at least 64 messages), 1..65536 (--total-mb)
  // ucx_raw: runs of each side per size, interleaved; fetch: measured fetches per method; medians are
  // reported. 1..99 (--repetitions).
  int64_t repetitions = 3;
  // fetch rows
  bool fetch = true;              // measure them (--skip-fetch: not)
  double link_gbps = 1.0;         // the shaped link's rate, > 0 (--link-gbps)
  std::string model = "smollm2";  // the model whose KV is served (--model)
  int64_t tokens = 4096;          // context tokens (--tokens)
  std::vector<Level> levels = {kLevelFp16, kLevelInt8, 1, 2, 3, 4, 5, 6};  // methods, in order (--levels)
  std::string profile;            // codec profile file for server and fetcher; empty: in-chunk tables (--profile)
  QuantScheme scheme = QuantScheme::kChannelUniform;  // the server's lossy quantiser (--scheme)
  double fine_fraction = 0.08;    // the server's fine rows, [0, 1], as `kvstream serve`'s default (--fine-fraction)
  Level fine_level = 2;           // 1..15 (--fine-level)
  int64_t decode_threads = 1;     // the fetcher's decode threads, 1..64 (--decode-threads)
  // Where the fetcher puts the KV, one set of rows each: "cpu" (host memory) and/or "cuda" (GPU 0's
  // memory, the device pipeline); --device cuda measures both, CPU rows first (--device).
  std::vector<std::string> devices = {"cpu"};
  std::filesystem::path kvstream; // the kvstream executable started as server and fetcher; empty: this one
};

struct UcxRawRow {
  uint64_t msg_bytes = 0;
  int iters = 0;                  // measured messages per run
  double gbps_ours = 0;           // medians of the runs
  double gbps_ucx_perftest = 0;   // with peer error handling (-e), as the DataPlane
  double gbps_ucx_perftest_no_err = 0;
};

struct FetchRow {
  std::string method;             // fp16, int8, kvstream-L<n> (kvstream-<scheme>-L<n> for another scheme)
  std::string device = "cpu";     // the fetcher's --device
  std::string path = "host";      // where the payloads landed (FetchResult::path)
  uint64_t bytes = 0;             // payload bytes of one fetch
  double kv_ready_ms = 0;         // the median of the measured fetches
  double kv_ready_ms_min = 0, kv_ready_ms_max = 0;
  double last_byte_ms = 0;        // the median of when the fetches' last payload byte arrived
  int fetches = 0;                // measured fetches
  bool pipelined = true;
  double speedup_vs_int8 = 0;     // int8's kv_ready_ms (same device) / this one's; 0 without an int8 row
};

struct TransportBenchReport {
  std::vector<UcxRawRow> raw;
  std::vector<FetchRow> fetch;
  // Not empty when the shaped link could not be made (not root): "fetch rows skipped: <why>", and no
  // fetch rows.
  std::string fetch_skipped;
};

// The options' ranges, as above.
Status CheckTransportBenchOptions(const TransportBenchOptions& options);

// Runs the ucx_raw rows (each passed to `on_raw_row`, when set, as it is measured), then the fetch rows.
Result<TransportBenchReport> RunTransportBench(const TransportBenchOptions& options,
                                               const std::function<void(const UcxRawRow&)>& on_raw_row = {});

}  // namespace kvstream::bench
