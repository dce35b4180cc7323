// The requests `kvstream bench adapt` runs every policy on: one base context whose chunk sizes and
// deadline vary per request, and when each request arrives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/manifest_file.h"
#include "bench/simulator.h"

namespace kvstream::bench {

struct Workload {
  std::vector<ManifestFile> manifests;  // per request: the base context with its lossy sizes varied
  std::vector<double> deadlines_s;
  std::vector<double> arrivals_s;       // within the request's batch, on the trace's clock
};

// Requests differ the way contexts and SLOs do: each chunk's lossy sizes are scaled by one factor drawn
// uniformly from [0.9, 1.1] (content; fp16, int8 and text keep theirs), each deadline is `deadline_s`
// times a factor from [0.9, 1.1]. Batches of `concurrency` requests share the link, staggered by a tenth
// of the deadline; each batch replays the trace from its start, so every request meets the trace's event
// (e.g. the drop). The same arguments give the same workload (a fixed mt19937_64 sequence from `seed`).
Workload MakeWorkload(const ManifestFile& base, int requests, int concurrency, double deadline_s, uint64_t seed);

// What one policy made of a workload, on either link: one outcome per request, in the workload's order
// (fewer than its requests when a real run hit its time limit).
struct PolicyRun {
  std::string policy;
  std::vector<SimOutcome> outcomes;
};

}  // namespace kvstream::bench
