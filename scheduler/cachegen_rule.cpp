// scheduler/cachegen_rule.cpp — the level rule of CacheGen's released code, kept as the baseline.
//
// Per chunk: the levels from highest quality to lowest, the first whose bytes * 8 / bandwidth fits in
// deadline / num_chunks; otherwise text (the released simulation then charges a fixed recompute cost).
// Bandwidth is the last chunk's measured throughput. Nothing else is modelled: no RTT, no decode time,
// no time already spent, no plan over the remaining chunks.
#include <algorithm>
#include <memory>

#include "kvstream/scheduler.h"

namespace kvstream {
namespace {

class CacheGenRulePolicy final : public LevelPolicy {
 public:
  explicit CacheGenRulePolicy(const CacheGenRuleOptions& options) : options_(options) {}
  std::string name() const override { return "cachegen-rule"; }

  void Begin(const FetchManifest& manifest, double deadline_s) override {
    manifest_ = manifest;
    deadline_s_ = deadline_s;
    bandwidth_bps_ = options_.prior_bandwidth_bps;
    order_.clear();
    text_ = -1;
    for (int li = 0; li < static_cast<int>(manifest_.levels.size()); ++li) {
      if (manifest_.levels[li].level == kLevelText) {
        text_ = li;
      } else {
        order_.push_back(li);
      }
    }
    std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) {
      return manifest_.levels[a].quality > manifest_.levels[b].quality;
    });
  }

  Level Choose(int chunk, double) override {
    if (manifest_.levels.empty()) return kLevelFp16;
    if (chunk < 0 || chunk >= static_cast<int>(manifest_.bytes.size()) || order_.empty()) {
      return manifest_.levels[text_ >= 0 ? text_ : 0].level;
    }
    const double per_chunk_s = deadline_s_ / std::max(1, manifest_.num_chunks);
    for (int li : order_) {
      if (static_cast<double>(manifest_.bytes[chunk][li]) * 8.0 / bandwidth_bps_ < per_chunk_s) {
        return manifest_.levels[li].level;
      }
    }
    if (text_ >= 0) return kLevelText;
    return manifest_.levels[*std::min_element(order_.begin(), order_.end(), [&](int a, int b) {
                              return manifest_.bytes[chunk][a] < manifest_.bytes[chunk][b];
                            })]
        .level;
  }

  void SetLinkPrior(const LinkPrior& prior) override {
    if (prior.bandwidth_bps > 0) options_.prior_bandwidth_bps = prior.bandwidth_bps;
  }

  void ObserveTransfer(const ChunkTelemetry& t) override {
    if (t.transfer_s > 0 && t.bytes > 0) bandwidth_bps_ = static_cast<double>(t.bytes) * 8.0 / t.transfer_s;
  }
  void Observe(const ChunkTelemetry& t) override { ObserveTransfer(t); }

 private:
  CacheGenRuleOptions options_;
  FetchManifest manifest_;
  double deadline_s_ = 0;
  double bandwidth_bps_ = 0;
  std::vector<int> order_;
  int text_ = -1;
};

}  // namespace

std::unique_ptr<LevelPolicy> MakeCacheGenRulePolicy(const CacheGenRuleOptions& options) {
  return std::make_unique<CacheGenRulePolicy>(options);
}

}  // namespace kvstream
