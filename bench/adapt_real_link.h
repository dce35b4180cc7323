// `kvstream bench adapt --link real`: every policy fetches the workload's requests for real, over a veth
// link between two network namespaces whose tc tbf rate follows the trace (cluster/).
//
// The prefill node is `kvstream serve` (this executable, or RealLinkOptions::kvstream) in namespace A,
// serving the manifest's context (its token count and chunk size, every level but text); a forked decode
// node in namespace B connects once and fetches the context once per request. A TracePlayer restarts the
// trace at each request, as the simulator replays it. A request's quality is the token-weighted
// manifest quality of the levels chosen, as in the simulator (the policies rank levels by the same
// numbers). Needs root; fails with the link's error (kPermissionDenied) without it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench/adapt_workload.h"
#include "bench/manifest_file.h"
#include "bench/trace.h"
#include "kvstream/scheduler.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct RealLinkOptions {
  std::string model = "smollm2";  // the prefill node's model: `kvstream serve --model` (--model)
  std::string text;               // its text (serve --text); empty: serve's default (--text)
  int64_t threads = -1;           // its forward-pass threads (serve --threads); < 0: serve's default (--threads)
  // No request starts after this many minutes; the policy then running reports the requests it ran, and
  // those after it none. (0, 600] (--max-minutes).
  double max_minutes = 20;
  std::filesystem::path kvstream;  // the kvstream executable started as the server; empty: this one
};

// Runs `policies` (names as MakeLevelPolicy takes them; fixed-text is refused: the decode node holds no
// model) on the workload `w` made from `base`, one request at a time, in order; `policy_options` are
// every policy's (the decode node's known quality per level is the manifest's). One PolicyRun per policy.
// Call before this process starts threads of its own (the decode node is forked).
Result<std::vector<PolicyRun>> RunRealLink(const LinkTrace& trace, const ManifestFile& base,
                                           const std::vector<std::string>& policies, const Workload& w,
                                           const KvstreamPolicyOptions& policy_options, const RealLinkOptions& options);

}  // namespace kvstream::bench
