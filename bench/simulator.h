// scheduler/simulator.h — a deterministic, trace-driven simulation of fetches over one shared link.
//
// What it models: each fetch requests its chunks one at a time; a request reaches the sender and the
// first byte returns after one RTT, then the chunk's bits flow at the fetch's share of the link (the
// trace's rate split equally among the fetches transferring at that moment, integrated over time as the
// rate changes); the next chunk is requested the moment a chunk's last byte arrives, so transfer of
// chunk i+1 overlaps decode of chunk i; the receiver decodes (or, for "text", recomputes) chunks in
// order, one at a time, at the ReceiverCosts' seconds per token. Policies see the same telemetry a real
// stream gives them (ObserveTransfer on arrival, Observe after decode). No randomness: the same inputs
// give the same outputs.
#pragma once

#include <map>
#include <vector>

#include "kvstream/level_policy.h"
#include "kvstream/status.h"
#include "bench/trace.h"

namespace kvstream::bench {

// The receiver's true costs in the simulation, seconds per token for each level (text = recompute).
struct ReceiverCosts {
  std::map<Level, double> s_per_token;
};

struct SimRequest {
  double arrival_s = 0;       // on the trace's clock
  double deadline_s = 0;      // budget from arrival until the context must be ready
  const FetchManifest* manifest = nullptr;
  LevelPolicy* policy = nullptr;
};

struct SimChunk {
  int chunk = 0;
  Level level = kLevelFp16;
  uint64_t bytes = 0;
  int tokens = 0;
  double quality = 0;
  double requested_s = 0;  // all times since the request's arrival
  double received_s = 0;
  double decoded_s = 0;
};

struct SimOutcome {
  double ready_s = 0;        // since arrival
  bool met = false;          // ready_s <= deadline_s
  double quality = 0;        // token-weighted mean of the chosen levels' quality
  double infeasible_at_s = -1;  // first Choose after which an AdaptivePolicy said it cannot make it; -1 never
  std::vector<SimChunk> chunks;
};

struct SimOptions {
  double rtt_s = 1e-3;
  const ReceiverCosts* costs = nullptr;  // required
};

// Runs the requests to completion. Fails if a policy picks a level its manifest does not offer, or a
// level has no receiver cost.
Result<std::vector<SimOutcome>> Simulate(const LinkTrace& trace, const SimOptions& options,
                                         const std::vector<SimRequest>& requests);

}  // namespace kvstream::bench
