// `kvstream bench adapt --link real` (see the header).
#include "bench/adapt_real_link.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "bench/cluster/netns_link.h"
#include "bench/cluster/process.h"
#include "bench/cluster/trace_player.h"
#include "bench/data_dir.h"
#include "kvstream/model.h"
#include "kvstream/stream.h"

namespace kvstream::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Records when an adaptive policy first says it cannot make its deadline, as the simulator does.
class FlaggingPolicy final : public LevelPolicy {
 public:
  // `known_quality`: the decode node's measured quality per level, given to the policy for levels the
  // sender advertises without one (a sender serving without a measured profile).
  FlaggingPolicy(std::unique_ptr<LevelPolicy> inner, std::map<Level, double> known_quality = {})
      : inner_(std::move(inner)), adaptive_(dynamic_cast<AdaptivePolicy*>(inner_.get())),
        known_quality_(std::move(known_quality)) {}
  std::string name() const override { return inner_->name(); }
  void Begin(const FetchManifest& manifest, double deadline_s) override {
    infeasible_at_s_ = -1;
    FetchManifest m = manifest;
    for (LevelInfo& l : m.levels) {
      if (!std::isfinite(l.quality) && known_quality_.count(l.level)) l.quality = known_quality_.at(l.level);
    }
    inner_->Begin(m, deadline_s);
  }
  Level Choose(int chunk, double now_s) override {
    const Level level = inner_->Choose(chunk, now_s);
    if (adaptive_ && infeasible_at_s_ < 0 && !adaptive_->feasible()) infeasible_at_s_ = now_s;
    return level;
  }
  void ObserveTransfer(const ChunkTelemetry& t) override { inner_->ObserveTransfer(t); }
  void Observe(const ChunkTelemetry& t) override { inner_->Observe(t); }
  void SetLinkPrior(const LinkPrior& prior) override { inner_->SetLinkPrior(prior); }
  double infeasible_at_s() const { return infeasible_at_s_; }

 private:
  std::unique_ptr<LevelPolicy> inner_;
  AdaptivePolicy* adaptive_;
  std::map<Level, double> known_quality_;
  double infeasible_at_s_ = -1;
};

void WriteJsonLine(int fd, const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  (void)!::write(fd, line.data(), line.size());
}

// The decode node, in namespace B: connects once, then fetches context "0" once per "POLICY DEADLINE_S"
// line on `go_fd` and answers each with one JSON line on `out` (until `go_fd` closes).
int RealReceiverChild(const std::string& host, int port, const KvstreamPolicyOptions& options,
                      const std::map<Level, double>& known_quality, int go_fd, int out) {
  ReceiverOptions ro;
  ro.chunk_timeout_ms = 30000;
  // The control connection shares the shaped link with the data it requests: after a tenfold drop a
  // queue of large chunks can hold its keepalive replies back for longer than the default 10 s.
  ro.control.idle_timeout_ms = 60000;
  auto receiver = Receiver::Connect(host, port, ro);
  if (!receiver.ok()) {
    WriteJsonLine(out, {{"error", receiver.status().ToString()}});
    return 1;
  }
  auto manifest = (*receiver)->GetManifest("0");
  if (!manifest.ok()) {
    WriteJsonLine(out, {{"error", manifest.status().ToString()}});
    return 1;
  }
  KvCache dest;
  dest.layers = manifest->layers;
  dest.kv_dim = manifest->channels;
  dest.tokens = dest.capacity = manifest->manifest.total_tokens;
  dest.k.resize(static_cast<size_t>(dest.layers) * dest.capacity * dest.kv_dim);
  dest.v.resize(dest.k.size());
  WriteJsonLine(out, {{"ready", true}});
  while (true) {
    auto line = cluster::ReadLine(go_fd, 3600, 4096);
    if (!line.ok()) return 0;  // the bench closed the pipe: done
    std::istringstream in(*line);
    std::string name;
    double deadline_s = 0;
    in >> name >> deadline_s;
    auto made = MakeLevelPolicy(name, options);
    if (!made.ok()) {
      WriteJsonLine(out, {{"error", made.status().ToString()}});
      continue;
    }
    FlaggingPolicy policy(std::move(made).value(), known_quality);
    auto r = (*receiver)->Fetch("0", dest.keys(), dest.values(), deadline_s, policy);
    if (!r.ok()) {
      WriteJsonLine(out, {{"error", r.status().ToString()}});
      continue;
    }
    nlohmann::json chunks = nlohmann::json::array();
    for (const ChunkTelemetry& t : r->chunks) {
      chunks.push_back({t.chunk, t.level, t.bytes, r->manifest.chunk_tokens[t.chunk], t.requested_at_s, t.received_at_s,
                        t.decoded_at_s});
    }
    WriteJsonLine(out, {{"complete", r->complete}, {"ready_s", r->kv_ready_s}, {"infeasible_at_s", policy.infeasible_at_s()},
                        {"prior_mbps", r->link_prior.bandwidth_bps / 1e6}, {"prior_rtt_ms", r->link_prior.rtt_s * 1e3},
                        {"chunks", chunks}});
  }
}

}  // namespace

Result<std::vector<PolicyRun>> RunRealLink(const LinkTrace& trace, const ManifestFile& base,
                                           const std::vector<std::string>& policies, const Workload& w,
                                           const KvstreamPolicyOptions& policy_options, const RealLinkOptions& o) {
  const double max_minutes = o.max_minutes;
  if (!(max_minutes > 0 && max_minutes <= 600)) return Status::InvalidArgument("--max-minutes must be in (0, 600]");
  std::map<Level, double> quality;
  std::string levels;
  for (const auto& l : base.manifest.levels) {
    quality[l.level] = l.quality;
    if (l.level == kLevelText) continue;  // the decode node holds no model to recompute with
    levels += (levels.empty() ? "" : ",") + LevelName(l.level);
  }
  for (const std::string& p : policies) {
    if (p == "fixed-text") return Status::InvalidArgument("--link real: fixed-text is not run (the decode node has no model)");
  }
  cluster::NetnsLinkOptions link_options;
  link_options.rate_bps = trace.RateAt(0);
  link_options.burst = "256kb";  // as bench transport's 1 Gbit/s link; kept through rate changes
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<cluster::NetnsLink> link, cluster::NetnsLink::Create(link_options));
  std::filesystem::path self = o.kvstream;
  if (self.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(self, ThisExecutable());
  }
  const int port = 17300 + ::getpid() % 500;
  const std::string host = link->address(cluster::NetnsLink::kA);
  std::vector<std::string> serve = {self.string(), "serve", "--listen", host + ":" + std::to_string(port), "--model",
                                    o.model, "--tokens", std::to_string(base.manifest.total_tokens),
                                    "--chunk-tokens", std::to_string(base.manifest.chunk_tokens.at(0)), "--levels", levels,
                                    "--duration-s", std::to_string(static_cast<int>(max_minutes * 60 + 900))};
  if (!o.text.empty()) serve.insert(serve.end(), {"--text", o.text});
  if (o.threads >= 0) serve.insert(serve.end(), {"--threads", std::to_string(o.threads)});
  KVSTREAM_ASSIGN_OR_RETURN(cluster::Child server, link->SpawnIn(cluster::NetnsLink::kA, serve));
  std::fprintf(stderr, "link real: prefilling %d tokens in %s ...\n", base.manifest.total_tokens,
               link->name(cluster::NetnsLink::kA).c_str());
  int go[2] = {-1, -1};
  cluster::Child client;
  auto finish = [&](Status s) -> Status {
    if (go[1] >= 0) ::close(go[1]);
    if (go[0] >= 0) ::close(go[0]);
    if (client.pid > 0) cluster::Reap(client, 10, false);
    cluster::Reap(server, 10, true);
    return s;
  };
  if (auto ready = cluster::ReadUntil(server, "serving", 900); !ready.ok()) {
    return finish(ready.status().WithContext("starting kvstream serve in " + link->name(cluster::NetnsLink::kA)));
  }
  if (::pipe2(go, O_CLOEXEC) != 0) return finish(Status::IoError(std::string("pipe: ") + std::strerror(errno)));
  auto forked = link->ForkIn(cluster::NetnsLink::kB, [&](int out) {
    ::close(go[1]);
    return RealReceiverChild(host, port, policy_options, quality, go[0], out);
  });
  if (!forked.ok()) return finish(forked.status());
  client = *forked;
  ::close(go[0]);
  go[0] = -1;

  auto ask = [&](const std::string& policy, double deadline_s) -> Result<nlohmann::json> {
    cluster::TracePlayer player(trace, [&](double bps) { return link->SetRate(bps); });
    KVSTREAM_RETURN_IF_ERROR(player.Start());
    const std::string line = policy + " " + std::to_string(deadline_s) + "\n";
    if (::write(go[1], line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return Status::Unavailable("the decode node in " + link->name(cluster::NetnsLink::kB) + " is gone");
    }
    auto reply = cluster::ReadLine(client.out_fd, std::max(60.0, 20 * deadline_s));
    player.Stop();
    KVSTREAM_RETURN_IF_ERROR(player.status());
    KVSTREAM_RETURN_IF_ERROR(reply.status());
    nlohmann::json j = nlohmann::json::parse(*reply, nullptr, false);
    if (j.is_discarded()) return Status::CorruptData("decode node: unparsable reply: " + reply->substr(0, 300));
    if (j.contains("error")) return Status::Unavailable("decode node: " + j["error"].get<std::string>());
    return j;
  };

  std::vector<PolicyRun> results;
  Status status = [&]() -> Status {
    KVSTREAM_ASSIGN_OR_RETURN(std::string hello, cluster::ReadLine(client.out_fd, 120));
    if (hello.find("\"ready\"") == std::string::npos) return Status::Unavailable("decode node: " + hello);
    // Warms UCX's endpoints and the sender's cache; not counted.
    KVSTREAM_RETURN_IF_ERROR(ask("fixed-fp16", 1e3).status());
    const auto started = std::chrono::steady_clock::now();
    for (const std::string& name : policies) {
      PolicyRun r{name, {}};
      for (size_t i = 0; i < w.deadlines_s.size(); ++i) {
        if (Seconds(started) > max_minutes * 60) {
          std::fprintf(stderr, "link real: --max-minutes %.1f reached; %s ran %zu of %zu requests\n", max_minutes,
                       name.c_str(), i, w.deadlines_s.size());
          break;
        }
        KVSTREAM_ASSIGN_OR_RETURN(nlohmann::json j, ask(name, w.deadlines_s[i]));
        SimOutcome outcome;
        outcome.ready_s = j["ready_s"].get<double>();
        outcome.met = j["complete"].get<bool>() && outcome.ready_s <= w.deadlines_s[i];
        outcome.infeasible_at_s = j["infeasible_at_s"].get<double>();
        if (i == 0) {
          std::fprintf(stderr, "link real: %s: TCP_INFO prior of the first request: rtt %.3f ms, rate %s\n", name.c_str(),
                       j["prior_rtt_ms"].get<double>(),
                       j["prior_mbps"].get<double>() > 0 ? (std::to_string(j["prior_mbps"].get<double>()) + " Mbit/s").c_str()
                                                         : "app-limited (the configured prior stands)");
        }
        double weighted = 0, tokens = 0;
        for (const auto& c : j["chunks"]) {
          SimChunk sc;
          sc.chunk = c[0].get<int>();
          sc.level = c[1].get<int>();
          sc.bytes = c[2].get<uint64_t>();
          sc.tokens = c[3].get<int>();
          sc.quality = quality.count(sc.level) ? quality.at(sc.level) : std::nan("");
          sc.requested_s = c[4].get<double>();
          sc.received_s = c[5].get<double>();
          sc.decoded_s = c[6].get<double>();
          weighted += sc.quality * sc.tokens;
          tokens += sc.tokens;
          outcome.chunks.push_back(sc);
        }
        outcome.quality = tokens > 0 ? weighted / tokens : 0;
        r.outcomes.push_back(std::move(outcome));
      }
      std::fprintf(stderr, "link real: %s done (%zu requests)\n", name.c_str(), r.outcomes.size());
      results.push_back(std::move(r));
    }
    return Status::Ok();
  }();
  KVSTREAM_RETURN_IF_ERROR(finish(status));
  return results;
}

}  // namespace kvstream::bench
