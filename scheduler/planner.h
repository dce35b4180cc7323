// scheduler/planner.h — plans the levels of a fetch's remaining chunks against a ready-by time.
//
// The model of a fetch: chunks go over the link one after the other (each pays one RTT to request, then
// its bytes at the planned bandwidth) and are decoded one after the other at the receiver; decoding
// chunk i overlaps the transfer of chunk i+1. "Text" chunks cross the link almost free but cost a
// prefill at the receiver, which overlaps the transfer of the chunks after them. docs/scheduler.md
// derives the search.
#pragma once

#include <vector>

#include "kvstream/level_policy.h"

namespace kvstream::scheduler {

struct PlanRequest {
  const FetchManifest* manifest = nullptr;
  int first_chunk = 0;          // plan chunks [first_chunk, num_chunks)
  double link_free_s = 0;       // when the first planned chunk can be requested
  double decoder_free_s = 0;    // when the receiver has decoded everything before first_chunk
  double ready_by_s = 0;        // the plan must predict the last chunk decoded by then
  double bandwidth_bps = 0;     // this fetch's share of the link
  double rtt_s = 0;
  std::vector<double> s_per_token;  // [level index] decode (text: recompute) seconds per token
  // A KV upgrade is bought only if it adds at least this much quality x tokens per extra link second.
  double min_gain_per_s = 0;
};

struct Plan {
  bool feasible = false;         // predicted ready <= ready_by_s
  std::vector<int> level_index;  // [chunk - first_chunk] index into manifest->levels
  double ready_s = 0;            // predicted time the last chunk is decoded
  double quality = 0;            // token-weighted mean quality of the planned chunks
};

// The predicted ready time of `level_index` (one entry per planned chunk) under the request's model.
double PredictReady(const PlanRequest& request, const std::vector<int>& level_index);

// The plan of greatest token-weighted quality whose predicted ready time is within ready_by_s; when none
// is, the plan with the earliest predicted ready time (feasible = false). Deterministic.
Plan PlanRemaining(const PlanRequest& request);

}  // namespace kvstream::scheduler
