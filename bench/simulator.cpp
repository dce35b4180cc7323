// scheduler/simulator.cpp — event loop of the trace-driven fetch simulation.
#include "bench/simulator.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <string>
#include <tuple>

#include "kvstream/scheduler.h"

namespace kvstream::bench {
namespace {

enum class EventType { kArrive = 0, kStartTransfer = 1, kDecoded = 2 };

struct Event {
  double time;
  long seq;  // ties resolve in the order events were created: deterministic
  EventType type;
  int request;
  bool operator>(const Event& o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
};

struct FetchState {
  int next_chunk = 0;
  bool transferring = false;
  int chunk = -1;          // the chunk on the wire (or waiting for its first byte)
  int level_index = -1;
  double bits_left = 0;
  double requested_s = 0;  // absolute
  double started_s = 0;    // absolute: first byte
  double decoder_free_s = 0;
  int decoded = 0;
  std::queue<ChunkTelemetry> decoding;  // telemetry of chunks being decoded, in order
};

}  // namespace

Result<std::vector<SimOutcome>> Simulate(const LinkTrace& trace, const SimOptions& options,
                                         const std::vector<SimRequest>& requests) {
  if (options.costs == nullptr) return Status::InvalidArgument("simulation: receiver costs are required");
  if (trace.time_s.empty()) return Status::InvalidArgument("simulation: trace '" + trace.name + "' is empty");
  const int n = static_cast<int>(requests.size());
  std::vector<FetchState> state(n);
  std::vector<SimOutcome> out(n);
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
  long seq = 0;
  for (int r = 0; r < n; ++r) {
    if (requests[r].manifest == nullptr || requests[r].policy == nullptr) {
      return Status::InvalidArgument("simulation: request " + std::to_string(r) + " lacks a manifest or policy");
    }
    events.push({requests[r].arrival_s, seq++, EventType::kArrive, r});
  }

  // Asks request r's policy for its next chunk at absolute time t and schedules its first byte.
  auto request_chunk = [&](int r, double t) -> Status {
    const SimRequest& req = requests[r];
    FetchState& s = state[r];
    const FetchManifest& m = *req.manifest;
    const Level level = req.policy->Choose(s.next_chunk, t - req.arrival_s);
    int li = -1;
    for (int i = 0; i < static_cast<int>(m.levels.size()); ++i) {
      if (m.levels[i].level == level) li = i;
    }
    if (li < 0) {
      return Status::InvalidArgument("simulation: policy " + req.policy->name() + " chose level " + LevelName(level) +
                                     " for chunk " + std::to_string(s.next_chunk) + ", not offered by the manifest");
    }
    if (options.costs->s_per_token.count(level) == 0) {
      return Status::InvalidArgument("simulation: no receiver cost for level " + LevelName(level));
    }
    if (auto* adaptive = dynamic_cast<AdaptivePolicy*>(req.policy);
        adaptive != nullptr && !adaptive->feasible() && out[r].infeasible_at_s < 0) {
      out[r].infeasible_at_s = t - req.arrival_s;
    }
    s.chunk = s.next_chunk++;
    s.level_index = li;
    s.bits_left = static_cast<double>(m.bytes[s.chunk][li]) * 8.0;
    s.requested_s = t;
    events.push({t + options.rtt_s, seq++, EventType::kStartTransfer, r});
    return Status::Ok();
  };

  auto chunk_received = [&](int r, double t) -> Status {
    const SimRequest& req = requests[r];
    FetchState& s = state[r];
    const FetchManifest& m = *req.manifest;
    s.transferring = false;
    ChunkTelemetry tm;
    tm.chunk = s.chunk;
    tm.level = m.levels[s.level_index].level;
    tm.bytes = m.bytes[s.chunk][s.level_index];
    tm.requested_at_s = s.requested_s - req.arrival_s;
    tm.received_at_s = t - req.arrival_s;
    tm.transfer_s = t - s.started_s;
    req.policy->ObserveTransfer(tm);
    const double decode_start = std::max(s.decoder_free_s, t);
    tm.decode_s = m.chunk_tokens[s.chunk] * options.costs->s_per_token.at(tm.level);
    s.decoder_free_s = decode_start + tm.decode_s;
    tm.decoded_at_s = s.decoder_free_s - req.arrival_s;
    s.decoding.push(tm);
    events.push({s.decoder_free_s, seq++, EventType::kDecoded, r});
    SimChunk c;
    c.chunk = tm.chunk;
    c.level = tm.level;
    c.bytes = tm.bytes;
    c.tokens = m.chunk_tokens[tm.chunk];
    c.quality = m.levels[s.level_index].quality;
    c.requested_s = tm.requested_at_s;
    c.received_s = tm.received_at_s;
    c.decoded_s = tm.decoded_at_s;
    out[r].chunks.push_back(c);
    if (s.next_chunk < m.num_chunks) return request_chunk(r, t);
    return Status::Ok();
  };

  double t = 0;
  while (true) {
    std::vector<int> active;
    for (int r = 0; r < n; ++r) {
      if (state[r].transferring) active.push_back(r);
    }
    const double per_fetch_bps = active.empty() ? 0 : trace.RateAt(t) / static_cast<double>(active.size());
    double next = events.empty() ? std::numeric_limits<double>::infinity() : events.top().time;
    for (int r : active) next = std::min(next, t + state[r].bits_left / per_fetch_bps);
    if (!active.empty()) next = std::min(next, trace.NextChangeAfter(t));
    if (next == std::numeric_limits<double>::infinity()) break;
    next = std::max(next, t);
    for (int r : active) state[r].bits_left -= per_fetch_bps * (next - t);
    t = next;
    for (int r : active) {
      // Floating-point slack: a chunk whose remaining bits would take under a nanosecond is in.
      if (state[r].bits_left <= per_fetch_bps * (1e-9 + t * 1e-14)) KVSTREAM_RETURN_IF_ERROR(chunk_received(r, t));
    }
    while (!events.empty() && events.top().time <= t) {
      const Event e = events.top();
      events.pop();
      const SimRequest& req = requests[e.request];
      FetchState& s = state[e.request];
      switch (e.type) {
        case EventType::kArrive:
          req.policy->Begin(*req.manifest, req.deadline_s);
          if (req.manifest->num_chunks == 0) {
            out[e.request].met = true;
            out[e.request].quality = 1.0;
            break;
          }
          KVSTREAM_RETURN_IF_ERROR(request_chunk(e.request, t));
          break;
        case EventType::kStartTransfer:
          s.started_s = t;
          s.transferring = true;
          if (s.bits_left <= 0) KVSTREAM_RETURN_IF_ERROR(chunk_received(e.request, t));
          break;
        case EventType::kDecoded: {
          const ChunkTelemetry tm = s.decoding.front();
          s.decoding.pop();
          req.policy->Observe(tm);
          if (++s.decoded == req.manifest->num_chunks) {
            SimOutcome& o = out[e.request];
            o.ready_s = t - req.arrival_s;
            o.met = o.ready_s <= req.deadline_s + 1e-9;
            double weighted = 0, tokens = 0;
            for (const SimChunk& c : o.chunks) {
              weighted += c.quality * c.tokens;
              tokens += c.tokens;
            }
            o.quality = tokens > 0 ? weighted / tokens : 1.0;
          }
          break;
        }
      }
    }
  }
  return out;
}

}  // namespace kvstream::bench
