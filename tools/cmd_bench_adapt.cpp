// `kvstream bench adapt` — compares level policies on a link trace, on the simulator (--link sim) or over
// a real link between network namespaces (--link real): the flags become bench::AdaptBenchOptions,
// bench::RunAdaptBench runs them (bench/adapt_bench.h), and this prints its rows as JSON lines or a table
// and with --out writes them, the timelines and the plots.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/adapt_bench.h"
#include "bench/machine.h"
#include "tools/command.h"
#include "tools/model_args.h"

namespace kvstream::cli {
namespace {

Result<bench::AdaptBenchOptions> ParseOptions(const Args& args) {
  bench::AdaptBenchOptions o;
  KVSTREAM_ASSIGN_OR_RETURN(o.trace, args.Require("trace"));
  const std::string link = args.GetString("link", "sim");
  if (link != "sim" && link != "real") return Status::InvalidArgument("--link = '" + link + "': expected sim or real");
  o.link = link == "real" ? bench::AdaptLink::kReal : bench::AdaptLink::kSim;
  if (args.Has("requests")) {
    KVSTREAM_ASSIGN_OR_RETURN(o.requests, args.GetInt("requests", 0));
  }
  KVSTREAM_ASSIGN_OR_RETURN(o.concurrency, args.GetInt("concurrency", o.concurrency));
  KVSTREAM_ASSIGN_OR_RETURN(o.deadline_ms, args.GetDouble("deadline-ms", o.deadline_ms));
  KVSTREAM_ASSIGN_OR_RETURN(o.rtt_ms, args.GetDouble("rtt-ms", o.rtt_ms));
  KVSTREAM_ASSIGN_OR_RETURN(const int64_t seed, args.GetInt("seed", static_cast<int64_t>(o.seed)));
  o.seed = static_cast<uint64_t>(seed);
  KVSTREAM_ASSIGN_OR_RETURN(o.prior_mbps, args.GetDouble("prior-mbps", o.prior_mbps));
  KVSTREAM_ASSIGN_OR_RETURN(o.drop_factor, args.GetDouble("drop-factor", o.drop_factor));
  KVSTREAM_ASSIGN_OR_RETURN(o.time_scale, args.GetDouble("time-scale", o.time_scale));
  o.manifest = args.GetString("manifest", o.manifest);
  if (const std::string model = args.GetString("manifest-from-model"); !model.empty()) {
    bench::ManifestFromModelOptions& m = o.manifest_from_model.emplace();
    m.model = args.GetString("model", model);  // --model, when given, names the model as in the model commands
    m.tokenizer = args.GetString("tokenizer");
    KVSTREAM_ASSIGN_OR_RETURN(m.threads, args.GetInt("threads", m.threads));
    m.text = args.GetString("text", kDefaultText);
    KVSTREAM_ASSIGN_OR_RETURN(m.context_tokens, args.GetInt("context-tokens", m.context_tokens));
    KVSTREAM_ASSIGN_OR_RETURN(m.chunk_tokens, args.GetInt("chunk-tokens", m.chunk_tokens));
    KVSTREAM_ASSIGN_OR_RETURN(m.eval_tokens, args.GetInt("eval-tokens", m.eval_tokens));
    m.profile = args.GetString("profile");
    o.write_manifest = args.GetString("write-manifest");
  }
  for (const std::string& p : SplitList(args.GetString("policies", ""))) {
    if (!p.empty()) o.policies.push_back(p);
  }
  o.real.model = args.GetString("model", o.real.model);
  if (args.Has("text")) o.real.text = args.GetString("text");
  if (args.Has("threads")) {
    KVSTREAM_ASSIGN_OR_RETURN(o.real.threads, args.GetInt("threads", 0));
  }
  KVSTREAM_ASSIGN_OR_RETURN(o.real.max_minutes, args.GetDouble("max-minutes", o.real.max_minutes));
  return o;
}

Status RunBenchAdapt(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(const bench::AdaptBenchOptions options, ParseOptions(args));
  // Real runs take minutes: the rows are printed whole once every policy ran, or not at all when the link
  // cannot be made.
  KVSTREAM_ASSIGN_OR_RETURN(const bench::AdaptBenchReport report, bench::RunAdaptBench(options));
  const bench::AdaptBenchOptions& o = report.options;
  const bool real = o.link == bench::AdaptLink::kReal;
  const bench::Machine machine = bench::ThisMachine();
  if (args.Has("json")) {
    const nlohmann::json header = {{"header", true}, {"bench", "adapt"}, {"date", bench::UtcNow()}, {"machine", bench::MachineJson(machine)}};
    std::printf("%s\n", header.dump().c_str());
    for (const nlohmann::ordered_json& row : report.rows) std::printf("%s\n", row.dump().c_str());
  } else {
    std::printf("kvstream bench adapt — machine: %s\n", bench::DescribeMachine(machine).c_str());
    std::printf("trace %s, %s link, %lld requests (concurrency %lld), deadline %.0f ms +-10%%, rtt %s, manifest %s\n",
                report.trace.name.c_str(), real ? "real (veth + tc tbf between namespaces)" : "simulated",
                static_cast<long long>(*o.requests), static_cast<long long>(o.concurrency), o.deadline_ms,
                real ? "measured" : (std::to_string(o.rtt_ms).substr(0, 5) + " ms").c_str(), report.manifest.c_str());
    std::printf("%-16s %8s %8s %8s %10s %10s\n", "policy", "slo", "quality", "level", "p95_ms", "mean_ms");
    for (const nlohmann::ordered_json& row : report.rows) {
      const std::string level = row["mean_level"].is_null() ? "-" : std::to_string(row["mean_level"].get<double>()).substr(0, 5);
      std::printf("%-16s %8.3f %8.4f %8s %10.1f %10.1f\n", row["policy"].get<std::string>().c_str(),
                  row["slo_attainment"].get<double>(), row["mean_quality"].get<double>(), level.c_str(),
                  row["p95_ready_ms"].get<double>(), row["mean_ready_ms"].get<double>());
    }
  }
  std::fflush(stdout);
  if (const std::string out = args.GetString("out", ""); !out.empty()) {
    return bench::WriteAdaptOutputs(report, out, !args.Has("no-plot"));
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
                           "  --no-plot           with --out: skip the PNGs\n\n"
                           "Traces, the default manifest and plot_adapt.py are read from $KVSTREAM_BENCH_DATA when set,\n"
                           "else from the first of <dir of kvstream>/../share/kvstream/bench (installed) and\n"
                           "<dir of kvstream>/../../bench (the build tree's build/bin/kvstream) that holds traces/.",
                           {"trace", "link", "model", "max-minutes", "time-scale", "requests", "concurrency", "deadline-ms", "rtt-ms", "manifest", "policies",
                            "prior-mbps", "drop-factor", "seed", "out", "manifest-from-model", "write-manifest", "profile", "text",
                            "context-tokens", "chunk-tokens", "eval-tokens", "threads", "tokenizer"},
                           {"json", "no-plot"},
                           &RunBenchAdapt});

}  // namespace kvstream::cli
