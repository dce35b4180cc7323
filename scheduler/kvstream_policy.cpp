// scheduler/kvstream_policy.cpp — the adaptive policy: measure, plan the remaining chunks, send the next.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kvstream/scheduler.h"
#include "scheduler/estimator.h"
#include "scheduler/planner.h"

namespace kvstream {
namespace {

Status ValidateManifest(const FetchManifest& m) {
  if (m.levels.empty()) return Status::InvalidArgument("manifest: levels is empty");
  if (m.num_chunks < 0 || static_cast<int>(m.chunk_tokens.size()) != m.num_chunks ||
      static_cast<int>(m.bytes.size()) != m.num_chunks) {
    return Status::InvalidArgument("manifest: num_chunks = " + std::to_string(m.num_chunks) + " but chunk_tokens has " +
                                   std::to_string(m.chunk_tokens.size()) + " and bytes " + std::to_string(m.bytes.size()));
  }
  for (int c = 0; c < m.num_chunks; ++c) {
    if (m.bytes[c].size() != m.levels.size()) {
      return Status::InvalidArgument("manifest: bytes[" + std::to_string(c) + "] has " + std::to_string(m.bytes[c].size()) +
                                     " sizes for " + std::to_string(m.levels.size()) + " levels");
    }
    if (m.chunk_tokens[c] <= 0) {
      return Status::InvalidArgument("manifest: chunk_tokens[" + std::to_string(c) + "] = " +
                                     std::to_string(m.chunk_tokens[c]) + ", must be positive");
    }
  }
  return Status::Ok();
}

// A sender without a measured profile advertises NaN quality for some levels. The planner must neither
// take such a level as "best" nor drop it: it is ranked by size instead. A level of unknown quality is
// assumed worth 1 - kUnknownQualityPerHalving x log2(largest offered total bytes / its total bytes): a
// bigger level is preferred only while the link affords it, a smaller one is always an option when it is
// short, and, the assumed quality being concave in bytes (each halving costs the same), the planner
// spreads the link over the chunks evenly instead of sending some chunks big and others at the smallest
// level. Known qualities are left as they are.
constexpr double kUnknownQualityPerHalving = 0.025;

void AssumeUnknownQualities(FetchManifest& m) {
  std::vector<uint64_t> total(m.levels.size(), 0);
  for (const auto& row : m.bytes) {
    for (size_t li = 0; li < row.size(); ++li) total[li] += row[li];
  }
  const double largest = static_cast<double>(std::max<uint64_t>(1, *std::max_element(total.begin(), total.end())));
  for (size_t li = 0; li < m.levels.size(); ++li) {
    if (std::isfinite(m.levels[li].quality)) continue;
    const double halvings = std::log2(largest / static_cast<double>(std::max<uint64_t>(1, total[li])));
    m.levels[li].quality = std::max(0.0, 1.0 - kUnknownQualityPerHalving * halvings);
  }
}

class KvstreamPolicy final : public AdaptivePolicy {
 public:
  KvstreamPolicy(const KvstreamPolicyOptions& options, std::shared_ptr<SharedLink> link)
      : options_(options),
        link_(link ? std::move(link) : std::make_shared<SharedLink>(options)),
        costs_(options.prior_decode_s_per_token, options.prior_recompute_s_per_token) {}
  ~KvstreamPolicy() override { Leave(); }

  std::string name() const override { return "kvstream"; }

  void Begin(const FetchManifest& manifest, double deadline_s) override {
    Leave();
    manifest_ = manifest;
    deadline_s_ = deadline_s;
    status_ = ValidateManifest(manifest_);
    if (status_.ok()) AssumeUnknownQualities(manifest_);
    feasible_ = status_.ok();
    predicted_ready_s_ = 0;
    transferred_.assign(std::max(0, manifest_.num_chunks), false);
    decoded_.assign(std::max(0, manifest_.num_chunks), false);
    chosen_.assign(std::max(0, manifest_.num_chunks), kLevelFp16);
    in_flight_.assign(std::max(0, manifest_.num_chunks), false);
    pending_.clear();
    decoded_until_s_ = 0;
    last_received_s_ = 0;
    decoded_count_ = 0;
    total_tokens_ = 0;
    for (int t : manifest_.chunk_tokens) total_tokens_ += t;
    if (status_.ok() && manifest_.num_chunks > 0) link_id_ = link_->Register();
  }

  Level Choose(int chunk, double now_s) override {
    if (!status_.ok() && status_.code() == StatusCode::kInvalidArgument) {
      return manifest_.levels.empty() ? kLevelFp16 : manifest_.levels[0].level;
    }
    if (chunk < 0 || chunk >= manifest_.num_chunks) return manifest_.levels[0].level;
    scheduler::PlanRequest request;
    request.manifest = &manifest_;
    request.first_chunk = chunk;
    request.rtt_s = link_->rtt_s();
    request.s_per_token.resize(manifest_.levels.size());
    for (size_t li = 0; li < manifest_.levels.size(); ++li) {
      request.s_per_token[li] = costs_.SecondsPerToken(manifest_.levels[li].level);
    }
    if (deadline_s_ > 0) request.min_gain_per_s = options_.min_gain * total_tokens_ / deadline_s_;
    // First a plan that survives the link falling by drop_factor, then one that trusts the estimate
    // inside the safety margin, then one that merely meets the deadline.
    const double estimate_bps = PlanningShareBps();
    const double margin_s = now_s + options_.safety * std::max(0.0, deadline_s_ - now_s);
    std::vector<std::pair<double, double>> stages;  // bandwidth, ready-by
    if (options_.drop_factor > 1) stages.emplace_back(estimate_bps / options_.drop_factor, margin_s);
    stages.emplace_back(estimate_bps, margin_s);
    stages.emplace_back(estimate_bps, deadline_s_);
    scheduler::Plan plan;
    for (const auto& [bandwidth_bps, ready_by_s] : stages) {
      request.bandwidth_bps = bandwidth_bps;
      request.ready_by_s = ready_by_s;
      PredictInFlight(now_s, request);
      plan = scheduler::PlanRemaining(request);
      if (plan.feasible) break;
    }
    feasible_ = plan.feasible;
    predicted_ready_s_ = plan.ready_s;
    if (plan.feasible) {
      status_ = Status::Ok();
    } else {
      char message[200];
      std::snprintf(message, sizeof(message),
                    "deadline %.3f s cannot be met: at chunk %d of %d the fastest levels predict ready at %.3f s "
                    "(%.3g Mbit/s share)",
                    deadline_s_, chunk, manifest_.num_chunks, plan.ready_s, request.bandwidth_bps / 1e6);
      status_ = Status::Timeout(message);
    }
    chosen_[chunk] = manifest_.levels[plan.level_index[0]].level;
    in_flight_[chunk] = true;
    return chosen_[chunk];
  }

  void SetLinkPrior(const LinkPrior& prior) override { link_->SetPrior(prior.bandwidth_bps, prior.rtt_s); }

  void ObserveTransfer(const ChunkTelemetry& t) override {
    if (t.chunk < 0 || t.chunk >= manifest_.num_chunks || transferred_[t.chunk] || decoded_[t.chunk]) return;
    MarkTransferred(t.chunk, t.level, t.received_at_s);
    if (t.bytes >= options_.min_sample_bytes && t.transfer_s > 0) {
      link_->AddThroughputSample(static_cast<double>(t.bytes) * 8.0 / t.transfer_s);
    }
    // Request-to-first-byte is an RTT only when the request did not queue behind an earlier chunk.
    const double rtt = (t.received_at_s - t.requested_at_s) - t.transfer_s;
    if (t.transfer_s > 0 && rtt >= 0 && t.requested_at_s >= last_received_s_) link_->AddRttSample(rtt);
    last_received_s_ = std::max(last_received_s_, t.received_at_s);
  }

  void Observe(const ChunkTelemetry& t) override {
    if (t.chunk < 0 || t.chunk >= manifest_.num_chunks || decoded_[t.chunk]) return;
    ObserveTransfer(t);
    decoded_[t.chunk] = true;
    ++decoded_count_;
    std::erase_if(pending_, [&](const Pending& p) { return p.chunk == t.chunk; });
    decoded_until_s_ = std::max(decoded_until_s_, t.decoded_at_s);
    if (t.decode_s >= 0) costs_.Add(t.level, manifest_.chunk_tokens[t.chunk], t.decode_s);
    if (decoded_count_ == manifest_.num_chunks) Leave();
  }

  bool feasible() const override { return feasible_; }
  Status status() const override { return status_; }
  double predicted_ready_s() const override { return predicted_ready_s_; }
  double bandwidth_estimate_bps() const override { return PlanningShareBps(); }

 private:
  struct Pending {
    int chunk;
    Level level;
    double received_at_s;
  };

  // The median is the estimate; planning with the lower of it and the newest sample reacts to a drop at
  // once, while a single slow chunk costs at most this one chunk's level (the next plan forgets it).
  double PlanningShareBps() const {
    const double capacity = std::min(link_->capacity_bps(), link_->latest_capacity_bps());
    return std::max(1.0, capacity / std::max(1, link_->registered()));
  }

  // Where the link and the decoder will be once everything already asked for is in: received chunks
  // still decode; chunks on the wire (chosen, not reported) are assumed to still hold all their bytes,
  // which errs late when the stream layer reports arrivals only through Observe.
  void PredictInFlight(double now_s, scheduler::PlanRequest& request) const {
    double decoder = decoded_until_s_;
    for (const Pending& p : pending_) {
      decoder = std::max(decoder, p.received_at_s) + manifest_.chunk_tokens[p.chunk] * costs_.SecondsPerToken(p.level);
    }
    double link = now_s;
    for (int c = 0; c < manifest_.num_chunks; ++c) {
      if (!in_flight_[c]) continue;
      int li = 0;
      while (manifest_.levels[li].level != chosen_[c]) ++li;
      link += static_cast<double>(manifest_.bytes[c][li]) * 8.0 / request.bandwidth_bps;
      decoder = std::max(decoder, link) + manifest_.chunk_tokens[c] * request.s_per_token[li];
    }
    request.link_free_s = link;
    request.decoder_free_s = decoder;
  }

  void MarkTransferred(int chunk, Level level, double received_at_s) {
    transferred_[chunk] = true;
    in_flight_[chunk] = false;
    pending_.push_back({chunk, level, received_at_s});
  }

  void Leave() {
    if (link_id_ != 0) link_->Unregister(link_id_);
    link_id_ = 0;
  }

  KvstreamPolicyOptions options_;
  std::shared_ptr<SharedLink> link_;
  int link_id_ = 0;
  scheduler::DecodeCostEstimator costs_;
  FetchManifest manifest_;
  double deadline_s_ = 0;
  Status status_;
  bool feasible_ = true;
  double predicted_ready_s_ = 0;
  std::vector<bool> transferred_, decoded_, in_flight_;
  std::vector<Level> chosen_;
  std::deque<Pending> pending_;
  double decoded_until_s_ = 0;
  double last_received_s_ = 0;
  int decoded_count_ = 0;
  double total_tokens_ = 0;
};

}  // namespace

std::unique_ptr<AdaptivePolicy> MakeKvstreamPolicy(const KvstreamPolicyOptions& options,
                                                   std::shared_ptr<SharedLink> link) {
  return std::make_unique<KvstreamPolicy>(options, std::move(link));
}

}  // namespace kvstream
