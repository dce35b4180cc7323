// `kvstream bench adapt` — compares level policies on a link trace: on the trace-driven simulator
// (--link sim) or with real fetches over a veth link between two network namespaces whose tc tbf rate
// follows the trace (--link real, cluster/).
//
// Every policy (kvstream, cachegen-rule, fixed-<level> for each offered level) fetches the same requests
// over the same trace in the same run; one JSON line (or table row) per policy, plus a PNG per policy
// drawn by bench/plot_adapt.py when --out is given. Both links give the same rows.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cluster/netns_link.h"
#include "bench/cluster/process.h"
#include "bench/cluster/trace_player.h"
#include "kvstream/codec.h"
#include "kvstream/model.h"
#include "kvstream/quality.h"
#include "kvstream/scheduler.h"
#include "kvstream/stream.h"
#include "bench/manifest_file.h"
#include "bench/simulator.h"
#include "bench/trace.h"
#include "tools/codec_files.h"
#include "tools/command.h"
#include "tools/model_args.h"
#include "bench/machine.h"

namespace kvstream::cli {
namespace {

using bench::ManifestFile;
using bench::SimOutcome;

// The source tree, for the shipped traces, manifest and plot script.
std::filesystem::path SourceDir() { return std::filesystem::path(__FILE__).parent_path().parent_path(); }

double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

struct Workload {
  std::vector<ManifestFile> manifests;  // per request: the base context with its lossy sizes varied
  std::vector<double> deadlines_s;
  std::vector<double> arrivals_s;       // within the request's batch, on the trace's clock
};

// Requests differ the way contexts and SLOs do: lossy chunk sizes by +-10% (content), deadlines by
// +-10%. Batches of `concurrency` requests share the link, staggered by a tenth of the deadline; each
// batch replays the trace from its start, so every request meets the trace's event (e.g. the drop).
Workload MakeWorkload(const ManifestFile& base, int requests, int concurrency, double deadline_s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Workload w;
  for (int r = 0; r < requests; ++r) {
    ManifestFile m = base;
    for (auto& row : m.manifest.bytes) {
      const double scale = 0.9 + 0.2 * Uniform(rng);
      for (size_t li = 0; li < row.size(); ++li) {
        if (IsLossyLevel(m.manifest.levels[li].level)) row[li] = static_cast<uint64_t>(std::llround(row[li] * scale));
      }
    }
    w.manifests.push_back(std::move(m));
    w.deadlines_s.push_back(deadline_s * (0.9 + 0.2 * Uniform(rng)));
    w.arrivals_s.push_back(0.1 * deadline_s * (r % concurrency));
  }
  return w;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The manifest of a real context: the model prefills the text's first T tokens; every chunk is encoded
// at fp16, int8, every lossy level of the ladder and text (real sizes); decoding them (one thread) gives
// each level's seconds per token and its decoded cache, which the quality meter scores (top-1 agreement
// of the next E tokens); text's cost is the model's measured prefill time per token.
Result<ManifestFile> ManifestFromModel(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t context_tokens, args.GetInt("context-tokens", 2048));
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t chunk_tokens, args.GetInt("chunk-tokens", 256));
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t eval_tokens, args.GetInt("eval-tokens", 128));
  if (context_tokens < 16 || context_tokens > 65536) return Status::InvalidArgument("--context-tokens must be in 16..65536");
  if (chunk_tokens < 1 || chunk_tokens > context_tokens) return Status::InvalidArgument("--chunk-tokens must be in 1..--context-tokens");
  if (eval_tokens < 1 || eval_tokens > 65536) return Status::InvalidArgument("--eval-tokens must be in 1..65536");
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args, args.GetString("manifest-from-model")));
  const std::string text = args.GetString("text", kDefaultText);
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> ids, TokenizeFile(*model, text));
  if (static_cast<int64_t>(ids.size()) < context_tokens + eval_tokens + 1) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(ids.size()) + " tokens, needs " +
                                   std::to_string(context_tokens + eval_tokens + 1));
  }
  ids.resize(static_cast<size_t>(context_tokens + eval_tokens + 1));
  std::optional<Profile> profile;
  if (args.GetString("profile") != "") {
    KVSTREAM_ASSIGN_OR_RETURN(Profile p, LoadProfileFile(args.GetString("profile")));
    profile = std::move(p);
  }
  const ModelConfig& config = model->config();

  // Recompute cost: a chunk's prefill on a fresh cache (attention over earlier chunks, which text
  // recompute also pays, makes later chunks somewhat dearer).
  KvCache probe = KvCache::Allocate(config, static_cast<int>(chunk_tokens));
  const auto prefill_start = std::chrono::steady_clock::now();
  KVSTREAM_RETURN_IF_ERROR(model->Forward(std::vector<int>(ids.begin(), ids.begin() + chunk_tokens), probe, nullptr));
  const double recompute_s_per_token = Seconds(prefill_start) / static_cast<double>(chunk_tokens);

  KVSTREAM_ASSIGN_OR_RETURN(QualityMeter meter, QualityMeter::Create(*model, ids, QualityOptions{static_cast<int>(context_tokens), static_cast<int>(eval_tokens)}));
  const KvCache& context = meter.context_cache();
  const int64_t L = context.layers, C = context.kv_dim;

  std::vector<Level> levels = {kLevelFp16, kLevelInt8};
  const size_t ladder = profile ? profile->ladder().size() : DefaultLadder(static_cast<int>(L)).size();
  for (size_t l = 1; l <= ladder && static_cast<int>(l) <= kMaxLossyLevel; ++l) levels.push_back(static_cast<Level>(l));
  levels.push_back(kLevelText);

  ManifestFile f;
  f.model = config.name + " (" + std::to_string(L) + " layers, kv_dim " + std::to_string(C) + "), " +
            std::to_string(context_tokens) + "-token context of " + text + " in chunks of " + std::to_string(chunk_tokens);
  f.source = "kvstream bench adapt --manifest-from-model: real chunk sizes from the codec" +
             std::string(profile ? " with profile " + args.GetString("profile") : " with in-chunk tables") +
             ", top-1 agreement over " + std::to_string(eval_tokens) +
             " continuation tokens from the quality meter, decode seconds per token measured on one thread, "
             "text = measured prefill seconds per token";
  FetchManifest& m = f.manifest;
  for (int64_t t0 = 0; t0 < context_tokens; t0 += chunk_tokens) {
    m.chunk_tokens.push_back(static_cast<int>(std::min(chunk_tokens, context_tokens - t0)));
  }
  m.num_chunks = static_cast<int>(m.chunk_tokens.size());
  m.total_tokens = static_cast<int>(context_tokens);
  m.bytes.assign(m.num_chunks, std::vector<uint64_t>(levels.size()));
  std::vector<int32_t> token_ids(ids.begin(), ids.begin() + context_tokens);

  for (size_t li = 0; li < levels.size(); ++li) {
    const Level level = levels[li];
    KvCache decoded = context;
    double decode_s = 0;
    uint64_t total_bytes = 0;
    for (int c = 0; c < m.num_chunks; ++c) {
      const int64_t t0 = static_cast<int64_t>(c) * chunk_tokens, n = m.chunk_tokens[c];
      // The engine hands over fp16, as a prefill node would.
      std::vector<uint16_t> k16(static_cast<size_t>(L * n * C)), v16(k16.size());
      const TensorView k = TensorView::Dense(k16.data(), DType::kF16, L, n, C);
      const TensorView v = TensorView::Dense(v16.data(), DType::kF16, L, n, C);
      KVSTREAM_RETURN_IF_ERROR(CopyView(SliceTokens(context.keys(), t0, n), k));
      KVSTREAM_RETURN_IF_ERROR(CopyView(SliceTokens(context.values(), t0, n), v));
      ChunkInput in;
      in.keys = k;
      in.values = v;
      in.token_begin = t0;
      in.token_ids = token_ids.data() + t0;
      EncodeOptions eo;
      eo.level = level;
      eo.profile = profile ? &*profile : nullptr;
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> chunk, EncodeChunk(in, eo));
      m.bytes[c][li] = chunk.size();
      total_bytes += chunk.size();
      if (level == kLevelText) continue;
      DecodeOptions dopt;
      dopt.profile = eo.profile;
      // The faster of two decodes: the first also pays for first-touch page faults of the destination.
      double best = std::numeric_limits<double>::infinity();
      for (int attempt = 0; attempt < 2; ++attempt) {
        const auto start = std::chrono::steady_clock::now();
        KVSTREAM_RETURN_IF_ERROR(DecodeChunk(chunk.data(), chunk.size(), dopt, SliceTokens(decoded.keys(), t0, n), SliceTokens(decoded.values(), t0, n)));
        best = std::min(best, Seconds(start));
      }
      decode_s += best;
    }
    double quality = 1.0;  // text: recomputed exactly
    double s_per_token = recompute_s_per_token;
    if (level != kLevelText) {
      const double bits = 8.0 * static_cast<double>(total_bytes) / (2.0 * static_cast<double>(L * context_tokens * C));
      KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, meter.Measure(LevelName(level), decoded, bits));
      quality = r.top1_agreement;
      s_per_token = decode_s / static_cast<double>(context_tokens);
    }
    m.levels.push_back({level, quality});
    f.costs.s_per_token[level] = s_per_token;
    std::fprintf(stderr, "manifest: %-5s %12llu bytes  quality %.4f  %.3g s/token\n", LevelName(level).c_str(),
                 static_cast<unsigned long long>(total_bytes), quality, s_per_token);
  }
  return f;
}

struct PolicyResult {
  std::string policy;
  std::vector<SimOutcome> outcomes;
};

Result<PolicyResult> RunPolicy(const std::string& name, const bench::LinkTrace& trace, const Workload& w,
                               int concurrency, double rtt_s, const KvstreamPolicyOptions& options) {
  PolicyResult result{name, {}};
  const int n = static_cast<int>(w.manifests.size());
  for (int begin = 0; begin < n; begin += concurrency) {
    const int end = std::min(n, begin + concurrency);
    auto link = std::make_shared<SharedLink>(options);
    std::vector<std::unique_ptr<LevelPolicy>> policies;
    std::vector<bench::SimRequest> requests;
    for (int r = begin; r < end; ++r) {
      KVSTREAM_ASSIGN_OR_RETURN(auto policy, MakeLevelPolicy(name, options, link));
      policies.push_back(std::move(policy));
      requests.push_back({w.arrivals_s[r], w.deadlines_s[r], &w.manifests[r].manifest, policies.back().get()});
    }
    bench::SimOptions sim;
    sim.rtt_s = rtt_s;
    sim.costs = &w.manifests[begin].costs;
    KVSTREAM_ASSIGN_OR_RETURN(auto outcomes, bench::Simulate(trace, sim, requests));
    for (auto& o : outcomes) result.outcomes.push_back(std::move(o));
  }
  return result;
}

// ---- --link real ------------------------------------------------------------------------------------

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

// Every policy fetches the workload's requests over a veth link between two namespaces whose tbf rate a
// TracePlayer changes along the trace, restarted at each request (as the simulator replays it). The
// prefill node is `kvstream serve` in namespace A (this binary) serving the manifest's context; a forked
// decode node in namespace B fetches. Quality is the manifest's measured quality of each chosen level.
Result<std::vector<PolicyResult>> RunRealLink(const Args& args, const bench::LinkTrace& trace, const ManifestFile& base,
                                              const std::vector<std::string>& policies, const Workload& w,
                                              const KvstreamPolicyOptions& options) {
  KVSTREAM_ASSIGN_OR_RETURN(const double max_minutes, args.GetDouble("max-minutes", 20));
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
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Status::IoError("readlink /proc/self/exe failed");
  self[n] = '\0';
  const int port = 17300 + ::getpid() % 500;
  const std::string host = link->address(cluster::NetnsLink::kA);
  std::vector<std::string> serve = {self, "serve", "--listen", host + ":" + std::to_string(port), "--model",
                                    args.GetString("model", "smollm2"), "--tokens", std::to_string(base.manifest.total_tokens),
                                    "--chunk-tokens", std::to_string(base.manifest.chunk_tokens.at(0)), "--levels", levels,
                                    "--duration-s", std::to_string(static_cast<int>(max_minutes * 60 + 900))};
  if (args.Has("text")) serve.insert(serve.end(), {"--text", args.GetString("text")});
  if (args.Has("threads")) serve.insert(serve.end(), {"--threads", args.GetString("threads")});
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
    return RealReceiverChild(host, port, options, quality, go[0], out);
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

  std::vector<PolicyResult> results;
  Status status = [&]() -> Status {
    KVSTREAM_ASSIGN_OR_RETURN(std::string hello, cluster::ReadLine(client.out_fd, 120));
    if (hello.find("\"ready\"") == std::string::npos) return Status::Unavailable("decode node: " + hello);
    // Warms UCX's endpoints and the sender's cache; not counted.
    KVSTREAM_RETURN_IF_ERROR(ask("fixed-fp16", 1e3).status());
    const auto started = std::chrono::steady_clock::now();
    for (const std::string& name : policies) {
      PolicyResult r{name, {}};
      for (size_t i = 0; i < w.deadlines_s.size(); ++i) {
        if (Seconds(started) > max_minutes * 60) {
          std::fprintf(stderr, "link real: --max-minutes %.1f reached; %s ran %zu of %zu requests\n", max_minutes,
                       name.c_str(), i, w.deadlines_s.size());
          break;
        }
        KVSTREAM_ASSIGN_OR_RETURN(nlohmann::json j, ask(name, w.deadlines_s[i]));
        SimOutcome o;
        o.ready_s = j["ready_s"].get<double>();
        o.met = j["complete"].get<bool>() && o.ready_s <= w.deadlines_s[i];
        o.infeasible_at_s = j["infeasible_at_s"].get<double>();
        if (i == 0) {
          std::fprintf(stderr, "link real: %s: TCP_INFO prior of the first request: rtt %.3f ms, rate %s\n", name.c_str(),
                       j["prior_rtt_ms"].get<double>(),
                       j["prior_mbps"].get<double>() > 0 ? (std::to_string(j["prior_mbps"].get<double>()) + " Mbit/s").c_str()
                                                         : "app-limited (the configured prior stands)");
        }
        double weighted = 0, tokens = 0;
        for (const auto& c : j["chunks"]) {
          bench::SimChunk sc;
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
          o.chunks.push_back(sc);
        }
        o.quality = tokens > 0 ? weighted / tokens : 0;
        r.outcomes.push_back(std::move(o));
      }
      std::fprintf(stderr, "link real: %s done (%zu requests)\n", name.c_str(), r.outcomes.size());
      results.push_back(std::move(r));
    }
    return Status::Ok();
  }();
  KVSTREAM_RETURN_IF_ERROR(finish(status));
  return results;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

nlohmann::ordered_json Summarize(const PolicyResult& r, const std::string& trace, const Workload& w) {
  double flagged_at_ms = 0;
  double met = 0, quality = 0, lossy_level_tokens = 0, lossy_tokens = 0, tokens = 0, flagged = 0, flagged_missed = 0;
  std::map<std::string, double> mix;
  std::vector<double> ready_ms;
  for (size_t i = 0; i < r.outcomes.size(); ++i) {
    const SimOutcome& o = r.outcomes[i];
    met += o.met;
    quality += o.quality;
    ready_ms.push_back(o.ready_s * 1e3);
    if (o.infeasible_at_s >= 0) {
      ++flagged;
      flagged_at_ms += o.infeasible_at_s * 1e3;
      if (!o.met) ++flagged_missed;
    }
    for (const auto& c : o.chunks) {
      mix[LevelName(c.level)] += c.tokens;
      tokens += c.tokens;
      if (IsLossyLevel(c.level)) {
        lossy_level_tokens += c.level * c.tokens;
        lossy_tokens += c.tokens;
      }
    }
  }
  const double n = std::max<size_t>(1, r.outcomes.size());
  double missed = n - met;
  nlohmann::ordered_json j;
  j["bench"] = "adapt";
  j["trace"] = trace;
  j["policy"] = r.policy;
  j["requests"] = r.outcomes.size();
  j["mean_deadline_ms"] = [&] {
    double s = 0;
    for (double d : w.deadlines_s) s += d;
    return 1e3 * s / std::max<size_t>(1, w.deadlines_s.size());
  }();
  j["slo_attainment"] = met / n;
  j["mean_quality"] = quality / n;
  // Mean of the lossy level number over the tokens sent at lossy levels (null when none were);
  // level_mix says how much went as fp16, int8 or text.
  j["mean_level"] = lossy_tokens > 0 ? nlohmann::ordered_json(lossy_level_tokens / lossy_tokens) : nlohmann::ordered_json();
  j["p95_ready_ms"] = Percentile(ready_ms, 0.95);
  j["mean_ready_ms"] = [&] {
    double s = 0;
    for (double x : ready_ms) s += x;
    return s / n;
  }();
  nlohmann::ordered_json level_mix;
  for (const auto& [name, t] : mix) level_mix[name] = t / std::max(1.0, tokens);
  j["level_mix"] = level_mix;
  if (r.policy == "kvstream") {
    j["flagged_infeasible"] = flagged / n;
    // Of the requests that missed, the fraction said so in advance (null when none missed).
    j["missed_and_flagged"] = missed > 0 ? nlohmann::ordered_json(flagged_missed / missed) : nlohmann::ordered_json();
    // When, on average, a flagged request first said it could not make its deadline.
    j["mean_flagged_at_ms"] = flagged > 0 ? nlohmann::ordered_json(flagged_at_ms / flagged) : nlohmann::ordered_json();
  }
  return j;
}

// What the plot needs: the trace, the deadline and one request's (the first batch's) chunk timeline.
nlohmann::ordered_json Timeline(const PolicyResult& r, const bench::LinkTrace& trace, const Workload& w,
                                int concurrency) {
  nlohmann::ordered_json j;
  j["policy"] = r.policy;
  j["trace"] = trace.name;
  double horizon = 0;
  const int shown = std::min<int>(concurrency, static_cast<int>(r.outcomes.size()));
  for (int i = 0; i < shown; ++i) horizon = std::max(horizon, w.arrivals_s[i] + std::max(r.outcomes[i].ready_s, w.deadlines_s[i]));
  horizon *= 1.1;
  nlohmann::ordered_json points = nlohmann::ordered_json::array();
  for (size_t i = 0; i < trace.time_s.size() && trace.time_s[i] <= horizon; ++i) {
    points.push_back({trace.time_s[i], trace.rate_bps[i] / 1e6});
  }
  j["trace_mbps"] = points;
  j["horizon_s"] = horizon;
  nlohmann::ordered_json levels = nlohmann::ordered_json::array();
  for (const auto& l : w.manifests[0].manifest.levels) levels.push_back({{"level", LevelName(l.level)}, {"quality", l.quality}});
  j["levels"] = levels;
  nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
  for (int i = 0; i < shown; ++i) {
    const SimOutcome& o = r.outcomes[i];
    nlohmann::ordered_json chunks = nlohmann::ordered_json::array();
    for (const auto& c : o.chunks) {
      chunks.push_back({{"chunk", c.chunk}, {"level", LevelName(c.level)}, {"tokens", c.tokens}, {"bytes", c.bytes},
                        {"requested_s", c.requested_s}, {"received_s", c.received_s}, {"decoded_s", c.decoded_s}});
    }
    reqs.push_back({{"arrival_s", w.arrivals_s[i]}, {"deadline_s", w.deadlines_s[i]}, {"ready_s", o.ready_s},
                    {"met", o.met}, {"quality", o.quality}, {"total_tokens", w.manifests[i].manifest.total_tokens},
                    {"chunks", chunks}});
  }
  j["requests"] = reqs;
  return j;
}

std::string FileSafe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return s;
}

Status RunBenchAdapt(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(const std::string trace_name, args.Require("trace"));
  const std::string link_kind = args.GetString("link", "sim");
  if (link_kind != "sim" && link_kind != "real") return Status::InvalidArgument("--link = '" + link_kind + "': expected sim or real");
  const bool real = link_kind == "real";
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t requests, args.GetInt("requests", real ? 10 : 40));
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t concurrency, args.GetInt("concurrency", 1));
  KVSTREAM_ASSIGN_OR_RETURN(const double deadline_ms, args.GetDouble("deadline-ms", 2000));
  KVSTREAM_ASSIGN_OR_RETURN(const double rtt_ms, args.GetDouble("rtt-ms", 1));
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", 1));
  KVSTREAM_ASSIGN_OR_RETURN(const double prior_mbps, args.GetDouble("prior-mbps", 0));
  KVSTREAM_ASSIGN_OR_RETURN(const double drop_factor, args.GetDouble("drop-factor", KvstreamPolicyOptions{}.drop_factor));
  if (!(drop_factor >= 1 && drop_factor <= 1000)) return Status::InvalidArgument("--drop-factor must be in [1, 1000]");
  if (requests < 1 || requests > 100000) return Status::InvalidArgument("--requests = " + std::to_string(requests) + " outside [1, 100000]");
  if (concurrency < 1 || concurrency > 64) return Status::InvalidArgument("--concurrency = " + std::to_string(concurrency) + " outside [1, 64]");
  if (!(deadline_ms > 0 && deadline_ms < 3.6e6)) return Status::InvalidArgument("--deadline-ms must be in (0, 3600000)");
  if (!(rtt_ms >= 0 && rtt_ms < 1e4)) return Status::InvalidArgument("--rtt-ms must be in [0, 10000)");
  if (real && concurrency != 1) return Status::InvalidArgument("--link real runs one request at a time (--concurrency 1)");

  const std::filesystem::path traces_dir = SourceDir() / "bench" / "traces";
  KVSTREAM_ASSIGN_OR_RETURN(bench::LinkTrace trace, bench::LoadTrace(trace_name, traces_dir.string()));
  KVSTREAM_ASSIGN_OR_RETURN(const double time_scale, args.GetDouble("time-scale", 1.0));
  if (!(time_scale > 0 && time_scale <= 1000)) return Status::InvalidArgument("--time-scale must be in (0, 1000]");
  for (double& t : trace.time_s) t *= time_scale;
  std::string manifest_path = args.GetString("manifest", (traces_dir / "smollm2-4k.manifest.json").string());
  ManifestFile base;
  if (args.GetString("manifest-from-model") != "") {
    KVSTREAM_ASSIGN_OR_RETURN(base, ManifestFromModel(args));
    manifest_path = "from model " + args.GetString("manifest-from-model");
    if (const std::string path = args.GetString("write-manifest"); !path.empty()) {
      std::ofstream file(path);
      file << bench::ManifestToJson(base);
      if (!file) return Status::IoError("--write-manifest " + path + ": write failed");
      manifest_path = path;
    }
  } else {
    KVSTREAM_ASSIGN_OR_RETURN(base, bench::LoadManifestFile(manifest_path));
  }

  KvstreamPolicyOptions options;
  // A warm connection's TCP_INFO delivery rate is what a real fetch starts from; here, the trace's
  // first rate. Every adaptive policy gets the same prior.
  options.prior_bandwidth_bps = prior_mbps > 0 ? prior_mbps * 1e6 : trace.RateAt(0);
  options.prior_rtt_s = rtt_ms * 1e-3;
  options.drop_factor = drop_factor;
  // A receiver knows its own speed (it can time a decode and a prefill at startup), not the link's: the
  // decode and recompute priors are the manifest's receiver costs.
  if (base.costs.s_per_token.count(1)) options.prior_decode_s_per_token = base.costs.s_per_token.at(1);
  if (base.costs.s_per_token.count(kLevelText)) options.prior_recompute_s_per_token = base.costs.s_per_token.at(kLevelText);

  std::vector<std::string> policies;
  const std::string list = args.GetString("policies", "");
  if (list.empty()) {
    policies = {"kvstream", "cachegen-rule"};
    for (const auto& l : base.manifest.levels) {
      if (!(real && l.level == kLevelText)) policies.push_back("fixed-" + LevelName(l.level));
    }
  } else {
    for (const std::string& p : SplitList(list)) {
      if (!p.empty()) policies.push_back(p);
    }
  }

  const Workload w = MakeWorkload(base, static_cast<int>(requests), static_cast<int>(concurrency), deadline_ms * 1e-3,
                                  static_cast<uint64_t>(seed));
  // Real runs first (minutes), so the table is printed whole, or not at all when the link cannot be made.
  std::vector<PolicyResult> real_results;
  if (real) {
    KVSTREAM_ASSIGN_OR_RETURN(real_results, RunRealLink(args, trace, base, policies, w, options));
  }
  const bool json = args.Has("json");
  const std::string out_dir = args.GetString("out", "");
  if (!out_dir.empty()) std::filesystem::create_directories(out_dir);
  std::ofstream jsonl;
  const std::string stem_prefix = "adapt-" + std::string(real ? "real-" : "") + FileSafe(trace.name);
  if (!out_dir.empty()) jsonl.open(std::filesystem::path(out_dir) / (stem_prefix + ".jsonl"));
  const bench::Machine machine = bench::ThisMachine();
  if (json) {
    const nlohmann::json header = {{"header", true}, {"bench", "adapt"}, {"date", bench::UtcNow()}, {"machine", bench::MachineJson(machine)}};
    std::printf("%s\n", header.dump().c_str());
  } else {
    std::printf("kvstream bench adapt — machine: %s\n", bench::DescribeMachine(machine).c_str());
    std::printf("trace %s, %s link, %lld requests (concurrency %lld), deadline %.0f ms +-10%%, rtt %s, manifest %s\n",
                trace.name.c_str(), real ? "real (veth + tc tbf between namespaces)" : "simulated",
                static_cast<long long>(requests), static_cast<long long>(concurrency), deadline_ms,
                real ? "measured" : (std::to_string(rtt_ms).substr(0, 5) + " ms").c_str(), manifest_path.c_str());
    std::printf("%-16s %8s %8s %8s %10s %10s\n", "policy", "slo", "quality", "level", "p95_ms", "mean_ms");
  }
  for (size_t pi = 0; pi < policies.size(); ++pi) {
    const std::string& name = policies[pi];
    PolicyResult r;
    if (real) {
      r = std::move(real_results[pi]);
    } else {
      KVSTREAM_ASSIGN_OR_RETURN(r, RunPolicy(name, trace, w, static_cast<int>(concurrency), rtt_ms * 1e-3, options));
    }
    nlohmann::ordered_json summary = Summarize(r, trace.name, w);
    summary["link"] = link_kind;
    if (json) {
      std::printf("%s\n", summary.dump().c_str());
    } else {
      const std::string level = summary["mean_level"].is_null() ? "-" : std::to_string(summary["mean_level"].get<double>()).substr(0, 5);
      std::printf("%-16s %8.3f %8.4f %8s %10.1f %10.1f\n", name.c_str(), summary["slo_attainment"].get<double>(),
                  summary["mean_quality"].get<double>(), level.c_str(), summary["p95_ready_ms"].get<double>(),
                  summary["mean_ready_ms"].get<double>());
    }
    std::fflush(stdout);
    if (out_dir.empty()) continue;
    jsonl << summary.dump() << "\n";
    const std::filesystem::path stem = std::filesystem::path(out_dir) / (stem_prefix + "-" + FileSafe(name));
    std::ofstream(stem.string() + ".timeline.json") << Timeline(r, trace, w, static_cast<int>(concurrency)).dump(1) << "\n";
    if (args.Has("no-plot")) continue;
    const std::string command = "/usr/bin/python3 '" + (SourceDir() / "bench" / "plot_adapt.py").string() + "' '" +
                                stem.string() + ".timeline.json' '" + stem.string() + ".png'";
    if (std::system(command.c_str()) != 0) {
      return Status::IoError("plotting failed: " + command + " (needs python3-matplotlib; --no-plot skips it)");
    }
  }
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(bench_adapt,
                          {"bench adapt",
                           "compare level policies (kvstream, cachegen-rule, fixed levels) on a link trace",
                           "usage: kvstream bench adapt --trace NAME|FILE [flags]\n\n"
                           "  --trace NAME|FILE   constant, drop10x, step-up, oscillating, random-walk (bench/traces) or a\n"
                           "                      file of 'time_s rate_mbps' lines\n"
                           "  --link sim|real     sim (default): the deterministic simulator; real: real fetches between two\n"
                           "                      network namespaces over veth shaped with tc tbf, its rate changed along the\n"
                           "                      trace (restarted per request) with tc qdisc change; kvstream serve --model M\n"
                           "                      (default smollm2) prefills the manifest's context in one namespace, a decode\n"
                           "                      node fetches in the other; quality = the manifest's per level (also what\n"
                           "                      the policies rank levels by, as in the simulator); needs root\n"
                           "  --max-minutes M     --link real: stop starting requests after M minutes (default 20)\n"
                           "  --requests N        requests per policy (default 40; 10 with --link real)\n"
                           "  --concurrency C     requests sharing the link at once (default 1)\n"
                           "  --deadline-ms MS    mean deadline; each request's is +-10% (default 2000)\n"
                           "  --rtt-ms MS         link round trip (default 1)\n"
                           "  --time-scale S      stretch the trace's time axis by S, to match a deadline other than 2 s\n"
                           "                      (with --deadline-ms 500, 0.25 keeps drop10x's drop halfway) (default 1)\n"
                           "  --manifest FILE     level sizes, qualities, receiver costs (default\n"
                           "                      bench/traces/smollm2-4k.manifest.json: SmolLM2-135M, 4096 tokens of\n"
                           "                      GPL-3 in chunks of 128, measured with the codec and the quality meter)\n"
                           "  --manifest-from-model M  build the manifest from a real context instead: model M prefills\n"
                           "                      --context-tokens (2048) of --text (GPL-3), chunks of --chunk-tokens (256)\n"
                           "                      are encoded at every level (--profile P: with a codec profile), decoded\n"
                           "                      and scored over --eval-tokens (128); --threads N for the model\n"
                           "  --write-manifest F  with --manifest-from-model: save the manifest as JSON\n"
                           "  --policies A,B,...  default: kvstream, cachegen-rule and fixed-<level> for every level\n"
                           "  --prior-mbps R      bandwidth prior of the adaptive policies (default: the trace's first rate)\n"
                           "  --drop-factor F     kvstream plans to survive the link falling to 1/F of its estimate (default 4;\n"
                           "                      1 trusts the estimate)\n"
                           "  --seed S            workload seed (default 1)\n"
                           "  --json              one JSON object per line: a header (date, machine), then one per policy\n"
                           "  --out DIR           also write adapt-TRACE.jsonl, per-policy timelines and PNG plots\n"
                           "  --no-plot           with --out: skip the PNGs",
                           {"trace", "link", "model", "max-minutes", "time-scale", "requests", "concurrency", "deadline-ms", "rtt-ms", "manifest", "policies",
                            "prior-mbps", "drop-factor", "seed", "out", "manifest-from-model", "write-manifest", "profile", "text",
                            "context-tokens", "chunk-tokens", "eval-tokens", "threads", "tokenizer"},
                           {"json", "no-plot"},
                           &RunBenchAdapt});

}  // namespace kvstream::cli
