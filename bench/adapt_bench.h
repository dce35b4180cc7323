// `kvstream bench adapt`: level policies compared on a link trace, on the trace-driven simulator
// (bench/simulator.h) or with real fetches over a veth link between two network namespaces whose tc tbf
// rate follows the trace (bench/adapt_real_link.h).
//
// Every policy (kvstream, cachegen-rule, fixed-<level> for each offered level) fetches the same requests
// (bench/adapt_workload.h) over the same trace in the same run and gives one summary row; both links give
// the same rows. The trace and the default manifest are looked up in the data folder (bench/data_dir.h).
// The simulated link is deterministic: the same options give the same rows.
//
// Option fields mirror the command's flags one to one (named beside each); errors name the flag.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/adapt_manifest.h"
#include "bench/adapt_real_link.h"
#include "bench/adapt_workload.h"
#include "bench/manifest_file.h"
#include "bench/trace.h"
#include "kvstream/scheduler.h"
#include "kvstream/status.h"

namespace kvstream::bench {

enum class AdaptLink {
  kSim,   // the deterministic trace-driven simulator
  kReal,  // real fetches between network namespaces (needs root)
};
// "sim", "real": the summary rows' "link".
const char* AdaptLinkName(AdaptLink link);

struct AdaptBenchOptions {
  // A trace name looked up as <data>/traces/NAME.trace (constant, drop10x, step-up, oscillating,
  // random-walk) or a file of "time_s rate_mbps" lines; required (--trace).
  std::string trace;
  AdaptLink link = AdaptLink::kSim;  // (--link sim|real)
  std::optional<int64_t> requests;   // per policy, 1..100000; unset: 40, or 10 on the real link (--requests)
  int64_t concurrency = 1;           // requests sharing the link at once, 1..64; 1 on the real link (--concurrency)
  double deadline_ms = 2000;         // mean deadline, (0, 3600000); each request's is +-10% (--deadline-ms)
  double rtt_ms = 1;                 // the simulated link's round trip and the policies' RTT prior, [0, 10000) (--rtt-ms)
  double time_scale = 1;             // the trace's time axis is stretched by this, (0, 1000] (--time-scale)
  uint64_t seed = 1;                 // the workload's (--seed)
  double prior_mbps = 0;             // the adaptive policies' bandwidth prior; 0: the trace's first rate (--prior-mbps)
  // kvstream plans to survive the link falling to 1/drop_factor of its estimate, [1, 1000] (--drop-factor).
  double drop_factor = KvstreamPolicyOptions{}.drop_factor;
  std::string manifest;              // a manifest file; empty: <data>/traces/smollm2-4k.manifest.json (--manifest)
  // Set: the manifest is measured from a real context instead (--manifest-from-model and its flags).
  std::optional<ManifestFromModelOptions> manifest_from_model;
  std::string write_manifest;        // with manifest_from_model: also saved here as JSON (--write-manifest)
  // Policy names as MakeLevelPolicy takes them; empty: kvstream, cachegen-rule and fixed-<level> for every
  // level of the manifest (but text on the real link) (--policies).
  std::vector<std::string> policies;
  RealLinkOptions real;              // the real link's server and time limit
};

struct AdaptBenchReport {
  AdaptBenchOptions options;         // as run: requests and policies filled in
  LinkTrace trace;                   // its time axis scaled by options.time_scale
  std::string manifest;              // where the manifest came from: its file, or "from model M"
  ManifestFile base;                 // the manifest the workload varies
  Workload workload;
  std::vector<PolicyRun> runs;       // one per policy, in order
  std::vector<nlohmann::ordered_json> rows;  // AdaptSummary of each run, with "link"
};

// Checks the options, loads the trace and the manifest (or measures it), makes the workload and runs
// every policy on it.
Result<AdaptBenchReport> RunAdaptBench(const AdaptBenchOptions& options);

// One policy's summary row: bench, trace, policy, requests, mean_deadline_ms, slo_attainment,
// mean_quality, mean_level (over the tokens sent at lossy levels; null when none were), p95_ready_ms,
// mean_ready_ms, level_mix (fraction of tokens per level), and for "kvstream" flagged_infeasible,
// missed_and_flagged and mean_flagged_at_ms (null when nothing missed / was flagged).
nlohmann::ordered_json AdaptSummary(const PolicyRun& run, const std::string& trace, const Workload& w);

// What the plot needs: the trace up to the horizon, the deadline, the levels and the first batch's
// requests with their chunk timelines.
nlohmann::ordered_json AdaptTimeline(const PolicyRun& run, const LinkTrace& trace, const Workload& w, int concurrency);

// Writes adapt-[real-]TRACE.jsonl (the rows) and per policy adapt-[real-]TRACE-POLICY.timeline.json into
// `dir` (created if missing), and with `plot` a PNG beside each timeline drawn by <data>/plot_adapt.py
// (needs python3-matplotlib).
Status WriteAdaptOutputs(const AdaptBenchReport& report, const std::filesystem::path& dir, bool plot);

}  // namespace kvstream::bench
