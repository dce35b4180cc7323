// `kvstream bench adapt` (see the header).
#include "bench/adapt_bench.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>
#include <utility>

#include "bench/data_dir.h"
#include "bench/simulator.h"
#include "bench/statistics.h"

namespace kvstream::bench {
namespace {

// Every batch of `concurrency` requests shares one link (and one SharedLink among its policies) and
// replays the trace from its start.
Result<PolicyRun> SimulatePolicy(const std::string& name, const LinkTrace& trace, const Workload& w, int concurrency,
                                 double rtt_s, const KvstreamPolicyOptions& options) {
  PolicyRun result{name, {}};
  const int n = static_cast<int>(w.manifests.size());
  for (int begin = 0; begin < n; begin += concurrency) {
    const int end = std::min(n, begin + concurrency);
    auto link = std::make_shared<SharedLink>(options);
    std::vector<std::unique_ptr<LevelPolicy>> policies;
    std::vector<SimRequest> requests;
    for (int r = begin; r < end; ++r) {
      KVSTREAM_ASSIGN_OR_RETURN(auto policy, MakeLevelPolicy(name, options, link));
      policies.push_back(std::move(policy));
      requests.push_back({w.arrivals_s[r], w.deadlines_s[r], &w.manifests[r].manifest, policies.back().get()});
    }
    SimOptions sim;
    sim.rtt_s = rtt_s;
    sim.costs = &w.manifests[begin].costs;
    KVSTREAM_ASSIGN_OR_RETURN(auto outcomes, Simulate(trace, sim, requests));
    for (auto& o : outcomes) result.outcomes.push_back(std::move(o));
  }
  return result;
}

Status Check(const AdaptBenchOptions& o) {
  const bool real = o.link == AdaptLink::kReal;
  if (o.trace.empty()) return Status::InvalidArgument("missing required flag --trace");
  if (!(o.drop_factor >= 1 && o.drop_factor <= 1000)) return Status::InvalidArgument("--drop-factor must be in [1, 1000]");
  const int64_t requests = *o.requests;
  if (requests < 1 || requests > 100000) return Status::InvalidArgument("--requests = " + std::to_string(requests) + " outside [1, 100000]");
  if (o.concurrency < 1 || o.concurrency > 64) return Status::InvalidArgument("--concurrency = " + std::to_string(o.concurrency) + " outside [1, 64]");
  if (!(o.deadline_ms > 0 && o.deadline_ms < 3.6e6)) return Status::InvalidArgument("--deadline-ms must be in (0, 3600000)");
  if (!(o.rtt_ms >= 0 && o.rtt_ms < 1e4)) return Status::InvalidArgument("--rtt-ms must be in [0, 10000)");
  if (real && o.concurrency != 1) return Status::InvalidArgument("--link real runs one request at a time (--concurrency 1)");
  if (!(o.time_scale > 0 && o.time_scale <= 1000)) return Status::InvalidArgument("--time-scale must be in (0, 1000]");
  return Status::Ok();
}

std::string FileSafe(std::string s) {
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') c = '_';
  }
  return s;
}

}  // namespace

const char* AdaptLinkName(AdaptLink link) { return link == AdaptLink::kReal ? "real" : "sim"; }

Result<AdaptBenchReport> RunAdaptBench(const AdaptBenchOptions& options) {
  AdaptBenchReport report;
  AdaptBenchOptions& o = report.options;
  o = options;
  const bool real = o.link == AdaptLink::kReal;
  if (!o.requests) o.requests = real ? 10 : 40;
  KVSTREAM_RETURN_IF_ERROR(Check(o));

  // The data folder is needed for a trace given by name and for the default manifest only.
  const Result<std::filesystem::path> data = BenchDataDir();
  const std::string traces_dir = data.ok() ? (*data / "traces").string() : std::string();
  auto trace = LoadTrace(o.trace, traces_dir);
  if (!trace.ok() && !data.ok() && trace.status().code() == StatusCode::kNotFound) {
    return data.status().WithContext("trace '" + o.trace + "' is not a file");
  }
  KVSTREAM_RETURN_IF_ERROR(trace.status());
  report.trace = std::move(trace).value();
  for (double& t : report.trace.time_s) t *= o.time_scale;

  ManifestFile& base = report.base;
  if (o.manifest_from_model) {
    KVSTREAM_ASSIGN_OR_RETURN(base, ManifestFromModel(*o.manifest_from_model));
    report.manifest = "from model " + o.manifest_from_model->model;
    if (!o.write_manifest.empty()) {
      std::ofstream file(o.write_manifest);
      file << ManifestToJson(base);
      if (!file) return Status::IoError("--write-manifest " + o.write_manifest + ": write failed");
      report.manifest = o.write_manifest;
    }
  } else {
    report.manifest = o.manifest;
    if (report.manifest.empty()) {
      if (!data.ok()) return data.status().WithContext("the default manifest (--manifest)");
      report.manifest = (*data / "traces" / "smollm2-4k.manifest.json").string();
    }
    KVSTREAM_ASSIGN_OR_RETURN(base, LoadManifestFile(report.manifest));
  }

  KvstreamPolicyOptions policy_options;
  // A warm connection's TCP_INFO delivery rate is what a real fetch starts from; here, the trace's
  // first rate. Every adaptive policy gets the same prior.
  policy_options.prior_bandwidth_bps = o.prior_mbps > 0 ? o.prior_mbps * 1e6 : report.trace.RateAt(0);
  policy_options.prior_rtt_s = o.rtt_ms * 1e-3;
  policy_options.drop_factor = o.drop_factor;
  // A receiver knows its own speed (it can time a decode and a prefill at startup), not the link's: the
  // decode and recompute priors are the manifest's receiver costs.
  if (base.costs.s_per_token.count(1)) policy_options.prior_decode_s_per_token = base.costs.s_per_token.at(1);
  if (base.costs.s_per_token.count(kLevelText)) policy_options.prior_recompute_s_per_token = base.costs.s_per_token.at(kLevelText);

  if (o.policies.empty()) {
    o.policies = {"kvstream", "cachegen-rule"};
    for (const auto& l : base.manifest.levels) {
      if (!(real && l.level == kLevelText)) o.policies.push_back("fixed-" + LevelName(l.level));
    }
  }

  report.workload = MakeWorkload(base, static_cast<int>(*o.requests), static_cast<int>(o.concurrency), o.deadline_ms * 1e-3, o.seed);
  if (real) {
    KVSTREAM_ASSIGN_OR_RETURN(report.runs, RunRealLink(report.trace, base, o.policies, report.workload, policy_options, o.real));
  } else {
    for (const std::string& name : o.policies) {
      KVSTREAM_ASSIGN_OR_RETURN(PolicyRun run, SimulatePolicy(name, report.trace, report.workload, static_cast<int>(o.concurrency),
                                                              o.rtt_ms * 1e-3, policy_options));
      report.runs.push_back(std::move(run));
    }
  }
  for (const PolicyRun& run : report.runs) {
    nlohmann::ordered_json row = AdaptSummary(run, report.trace.name, report.workload);
    row["link"] = AdaptLinkName(o.link);
    report.rows.push_back(std::move(row));
  }
  return report;
}

nlohmann::ordered_json AdaptSummary(const PolicyRun& r, const std::string& trace, const Workload& w) {
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
  j["mean_ready_ms"] = Mean(ready_ms);
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

nlohmann::ordered_json AdaptTimeline(const PolicyRun& r, const LinkTrace& trace, const Workload& w, int concurrency) {
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

Status WriteAdaptOutputs(const AdaptBenchReport& report, const std::filesystem::path& dir, bool plot) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("--out " + dir.string() + ": " + ec.message());
  std::filesystem::path plot_script;
  if (plot) {
    KVSTREAM_ASSIGN_OR_RETURN(const std::filesystem::path data, BenchDataDir());
    plot_script = data / "plot_adapt.py";
  }
  const std::string stem_prefix =
      "adapt-" + std::string(report.options.link == AdaptLink::kReal ? "real-" : "") + FileSafe(report.trace.name);
  const std::filesystem::path jsonl_path = dir / (stem_prefix + ".jsonl");
  std::ofstream jsonl(jsonl_path);
  for (size_t i = 0; i < report.runs.size(); ++i) {
    const PolicyRun& run = report.runs[i];
    jsonl << report.rows[i].dump() << "\n";
    const std::filesystem::path stem = dir / (stem_prefix + "-" + FileSafe(run.policy));
    const std::string timeline = stem.string() + ".timeline.json";
    std::ofstream(timeline) << AdaptTimeline(run, report.trace, report.workload, static_cast<int>(report.options.concurrency)).dump(1)
                            << "\n";
    if (!plot) continue;
    const std::string command = "/usr/bin/python3 '" + plot_script.string() + "' '" + timeline + "' '" + stem.string() + ".png'";
    if (std::system(command.c_str()) != 0) {
      return Status::IoError("plotting failed: " + command + " (needs python3-matplotlib; --no-plot skips it)");
    }
  }
  jsonl.flush();
  if (!jsonl) return Status::IoError(jsonl_path.string() + ": write failed");
  return Status::Ok();
}

}  // namespace kvstream::bench
