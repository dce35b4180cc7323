// kvstream/level_policy.h — how a Receiver chooses each chunk's level during a fetch.
//
// The stream layer drives a LevelPolicy: Begin once with the context's manifest and deadline, then for
// every chunk Choose (before requesting it), optionally ObserveTransfer (when its bytes are in) and
// Observe (after it is decoded). The scheduler implements the adaptive policies; FixedLevelPolicy is the
// trivial one. A policy object serves one fetch at a time and is called from one thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvstream/level.h"
#include "kvstream/manifest.h"

namespace kvstream {

// What the stream layer knows of the link before a fetch has measured anything (e.g. the kernel's
// TCP_INFO for the control connection, which shares the data's path). 0 = unknown.
struct LinkPrior {
  double bandwidth_bps = 0;
  double rtt_s = 0;
};

class LevelPolicy {
 public:
  virtual ~LevelPolicy() = default;
  virtual std::string name() const = 0;
  // A new fetch: `deadline_s` is the time budget from now until the whole context must be ready.
  virtual void Begin(const FetchManifest& manifest, double deadline_s) = 0;
  // The level for `chunk`, requested `now_s` seconds after Begin. Must be one of manifest.levels.
  virtual Level Choose(int chunk, double now_s) = 0;
  virtual void Observe(const ChunkTelemetry& telemetry) = 0;
  // Optional, earlier news: the chunk's bytes have arrived (decoded_at_s and decode_s are still 0). With
  // transfer of chunk i+1 overlapping decode of chunk i, Choose(i+1) comes before Observe(i); a stream
  // layer that calls this when a chunk lands lets the policy react one chunk sooner. Observe must still
  // follow.
  virtual void ObserveTransfer(const ChunkTelemetry& telemetry) {}
  // Optional, before Begin: replaces the policy's configured priors with what was observed of the link.
  virtual void SetLinkPrior(const LinkPrior& prior) {}
};

class FixedLevelPolicy final : public LevelPolicy {
 public:
  explicit FixedLevelPolicy(Level level) : level_(level) {}
  std::string name() const override { return "fixed-" + LevelName(level_); }
  void Begin(const FetchManifest&, double) override {}
  Level Choose(int, double) override { return level_; }
  void Observe(const ChunkTelemetry&) override {}

 private:
  Level level_;
};

}  // namespace kvstream
