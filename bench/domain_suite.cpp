// The domain suite (see the header): domains read and split, profiles learned, every method scored.
#include "bench/domain_suite.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "bench/baselines.h"
#include "bench/cachegen_ref.h"
#include "bench/data_dir.h"
#include "common/whole_file.h"
#include "kvstream/scheme.h"
#include "measure/codec_quality.h"
#include "measure/kvstream_codec.h"
#include "measure/profile_learning.h"

namespace kvstream::bench {
namespace {

// Where a manifest's field is wrong, in its words.
Status ManifestError(const std::filesystem::path& manifest, const std::string& what) {
  return Status::InvalidArgument(manifest.string() + ": " + what);
}

struct DomainText {
  std::vector<int> scored;  // the windows scored, + 1 token for the last target
  std::vector<int> learn;   // what profiles learn from
};

Result<DomainText> ReadDomain(const Model& model, const Domain& domain, const DomainSuiteOptions& o, int64_t learn_tokens) {
  std::string text;
  for (const std::string& file : domain.files) {
    Result<std::string> part = ReadTextFile(file);
    if (!part.ok()) return part.status().WithContext("domain " + domain.name);
    if (!text.empty()) text += "\n\n";
    text += *part;
  }
  std::vector<int> ids = model.tokenizer().Encode(text, model.tokenizer().adds_bos());
  const int64_t scored = static_cast<int64_t>(QualityWindowsTokens(QualityOptions{o.context_tokens, o.eval_tokens}, o.windows));
  if (static_cast<int64_t>(ids.size()) < scored + learn_tokens) {
    return Status::InvalidArgument("domain " + domain.name + " has " + std::to_string(ids.size()) + " tokens; its " +
                                   std::to_string(o.windows) + " scored windows of " + std::to_string(o.context_tokens) + " + " +
                                   std::to_string(o.eval_tokens) + " and the " + std::to_string(learn_tokens) +
                                   " tokens profiles learn from need " + std::to_string(scored + learn_tokens) +
                                   " (add files of that kind to the manifest)");
  }
  DomainText out;
  out.scored.assign(ids.begin(), ids.begin() + scored);
  out.learn.assign(ids.begin() + scored, ids.end());
  return out;
}

// The tokens every learning domain must hold: its sample windows, and for the first a held-out window.
constexpr int kHeldOutEvalTokens = 16;  // LearnProfile scores nothing here (measure off)
int64_t LearnTokens(const DomainSuiteOptions& o) {
  return int64_t{o.profile_contexts_per_domain} * o.profile_context_tokens + o.profile_context_tokens + kHeldOutEvalTokens + 1;
}

// Learned as scripts/demo.sh learns the default profile, from the learning parts of `domains`.
Result<std::shared_ptr<const Profile>> LearnFrom(const Model& model, const std::vector<DomainText>& texts,
                                                 const std::vector<size_t>& domains, const DomainSuiteOptions& o) {
  ProfileLearningOptions lo;
  lo.profile.predict = true;
  lo.profile.byte_predictors = true;
  for (size_t d : domains) lo.text_tokens.push_back(texts[d].learn);
  lo.contexts = o.profile_contexts_per_domain * static_cast<int>(domains.size());
  lo.context_tokens = o.profile_context_tokens;
  lo.eval_tokens = kHeldOutEvalTokens;
  lo.chunk_tokens = o.chunk_tokens;
  lo.fine = {o.fine_fraction, o.fine_level};
  KVSTREAM_ASSIGN_OR_RETURN(LearnedProfile learned, LearnProfile(model, lo));
  return std::make_shared<const Profile>(std::move(learned.profile));
}

// One method over the domain's windows: the mean of its reports.
Result<QualityReport> ScoreOnWindows(const std::vector<QualityMeter>& meters, const KvCodec& codec, int chunk_tokens) {
  std::vector<QualityReport> reports;
  for (const QualityMeter& meter : meters) {
    KVSTREAM_ASSIGN_OR_RETURN(QualityReport r, MeasureCodec(meter, codec, chunk_tokens));
    reports.push_back(std::move(r));
  }
  return MeanOfWindows(reports);
}

// The negligible row of the fewest bits among `rows` that `take` selects.
std::optional<DomainRow> SmallestNegligible(const std::vector<DomainRow>& rows, const std::function<bool(const DomainRow&)>& take) {
  std::optional<DomainRow> best;
  for (const DomainRow& r : rows) {
    if (!take(r) || !IsNegligible(r.quality)) continue;
    if (!best || r.quality.bits_per_value < best->quality.bits_per_value) best = r;
  }
  return best;
}

Status CheckOptions(const DomainSuiteOptions& o) {
  auto range = [](const char* name, int64_t v, int64_t low, int64_t high) {
    return v >= low && v <= high ? Status::Ok()
                                 : Status::InvalidArgument(std::string(name) + " = " + std::to_string(v) + ", expected " +
                                                           std::to_string(low) + ".." + std::to_string(high));
  };
  KVSTREAM_RETURN_IF_ERROR(range("context_tokens", o.context_tokens, 16, 1 << 20));
  KVSTREAM_RETURN_IF_ERROR(range("eval_tokens", o.eval_tokens, 1, 1 << 20));
  KVSTREAM_RETURN_IF_ERROR(range("windows", o.windows, 1, 64));
  KVSTREAM_RETURN_IF_ERROR(range("chunk_tokens", o.chunk_tokens, 1, 1 << 20));
  KVSTREAM_RETURN_IF_ERROR(range("profile_contexts_per_domain", o.profile_contexts_per_domain, 1, 64));
  KVSTREAM_RETURN_IF_ERROR(range("profile_context_tokens", o.profile_context_tokens, 16, 65536));
  if (o.levels.empty()) return Status::InvalidArgument("levels: none given");
  for (Level l : o.levels) KVSTREAM_RETURN_IF_ERROR(range("levels", l, 1, kMaxLossyLevel));
  return Status::Ok();
}

}  // namespace

Result<std::vector<Domain>> LoadDomainManifest(const std::filesystem::path& manifest) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(manifest.string()));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ManifestError(manifest, "not JSON");
  if (!j.is_object() || !j.contains("domains") || !j["domains"].is_array()) {
    return ManifestError(manifest, "expected an object with a \"domains\" array");
  }
  std::vector<Domain> domains;
  std::set<std::string> names;
  for (size_t i = 0; i < j["domains"].size(); ++i) {
    const nlohmann::json& d = j["domains"][i];
    const std::string where = "domains[" + std::to_string(i) + "]";
    if (!d.is_object() || !d.contains("name") || !d["name"].is_string() || d["name"].get<std::string>().empty()) {
      return ManifestError(manifest, where + ": expected an object with a non-empty \"name\"");
    }
    Domain domain;
    domain.name = d["name"].get<std::string>();
    if (!names.insert(domain.name).second) return ManifestError(manifest, where + ": domain " + domain.name + " named twice");
    if (d.contains("description") && d["description"].is_string()) domain.description = d["description"].get<std::string>();
    if (!d.contains("files") || !d["files"].is_array() || d["files"].empty()) {
      return ManifestError(manifest, where + " (" + domain.name + "): expected a non-empty \"files\" array");
    }
    for (const nlohmann::json& f : d["files"]) {
      if (!f.is_string() || f.get<std::string>().empty()) {
        return ManifestError(manifest, where + " (" + domain.name + "): files must be non-empty strings");
      }
      const std::filesystem::path path = f.get<std::string>();
      domain.files.push_back((path.is_absolute() ? path : manifest.parent_path() / path).lexically_normal().string());
    }
    domains.push_back(std::move(domain));
  }
  if (domains.size() < 2) return ManifestError(manifest, "needs at least two domains (each is measured with a profile learned from the others)");
  return domains;
}

Status RunDomainSuite(const DomainSuiteOptions& o, const std::function<void(const std::string&)>& progress,
                      const std::function<void(const DomainRow&)>& row_done,
                      const std::function<void(const DomainSummary&)>& summary_done) {
  KVSTREAM_RETURN_IF_ERROR(CheckOptions(o));
  auto on_progress = [&](const std::string& what) { if (progress) progress(what); };
  auto on_row = [&](const DomainRow& r) { if (row_done) row_done(r); };
  auto on_summary = [&](const DomainSummary& s) { if (summary_done) summary_done(s); };
  std::filesystem::path manifest = o.manifest;
  if (manifest.empty()) {
    KVSTREAM_ASSIGN_OR_RETURN(std::filesystem::path data, BenchDataDir());
    manifest = data / "domains" / "manifest.json";
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<Domain> domains, LoadDomainManifest(manifest));
  LoadOptions load;
  load.threads = 0;
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(o.model, load));
  std::vector<DomainText> texts;
  for (const Domain& d : domains) {
    KVSTREAM_ASSIGN_OR_RETURN(DomainText t, ReadDomain(*model, d, o, LearnTokens(o)));
    texts.push_back(std::move(t));
  }
  std::vector<size_t> all(domains.size());
  for (size_t d = 0; d < all.size(); ++d) all[d] = d;
  on_progress("learning the mix profile from all " + std::to_string(domains.size()) + " domains");
  KVSTREAM_ASSIGN_OR_RETURN(std::shared_ptr<const Profile> mix, LearnFrom(*model, texts, all, o));

  QualityOptions qo{o.context_tokens, o.eval_tokens};
  for (size_t d = 0; d < domains.size(); ++d) {
    const std::string& name = domains[d].name;
    on_progress(name + ": learning the profile of the other domains");
    std::vector<size_t> others;
    for (size_t k : all) {
      if (k != d) others.push_back(k);
    }
    KVSTREAM_ASSIGN_OR_RETURN(std::shared_ptr<const Profile> left_out, LearnFrom(*model, texts, others, o));
    on_progress(name + ": prefilling " + std::to_string(o.windows) + " windows");
    std::vector<QualityMeter> meters;
    for (int w = 0; w < o.windows; ++w) {
      KVSTREAM_ASSIGN_OR_RETURN(QualityMeter m, QualityMeter::Create(*model, QualityWindow(texts[d].scored, qo, w), qo));
      meters.push_back(std::move(m));
    }
    struct Method {
      std::unique_ptr<KvCodec> codec;
      std::string scheme, profile;
    };
    std::vector<Method> methods;
    methods.push_back({MakeInt8Codec(), "", ""});
    for (int level = 1; level <= kCacheGenRefLevels; ++level) {
      KVSTREAM_ASSIGN_OR_RETURN(auto cg, CacheGenRefCodec::Create(level, model->config().n_layers));
      methods.push_back({std::move(cg), "", ""});
    }
    for (const auto& [profile, label] : {std::pair{mix, "mix"}, std::pair{left_out, "others"}}) {
      for (Level level : o.levels) {
        const FineRowsOption fine = level > o.fine_level ? FineRowsOption{o.fine_fraction, o.fine_level} : FineRowsOption{};
        methods.push_back({MakeKvstreamLevelCodec(profile, level, QuantScheme::kPredicted, fine), SchemeName(QuantScheme::kPredicted), label});
      }
    }
    std::vector<DomainRow> rows;
    for (size_t i = 0; i < methods.size(); ++i) {
      const KvCodec& codec = *methods[i].codec;
      on_progress(name + ": " + codec.name() + (methods[i].profile.empty() ? "" : " (" + methods[i].profile + " profile)") +
                  ", " + std::to_string(i + 1) + " of " + std::to_string(methods.size()));
      DomainRow row;
      row.domain = name;
      row.method = codec.method().rfind("kvstream", 0) == 0 ? "kvstream" : codec.method();
      row.scheme = methods[i].scheme;
      row.profile = methods[i].profile;
      row.level = codec.level();
      KVSTREAM_ASSIGN_OR_RETURN(row.quality, ScoreOnWindows(meters, codec, o.chunk_tokens));
      row.ratio_vs_int8 = rows.empty() ? 1.0 : rows.front().quality.bits_per_value / row.quality.bits_per_value;
      rows.push_back(std::move(row));
    }
    for (const DomainRow& r : rows) on_row(r);
    const auto cachegen = SmallestNegligible(rows, [](const DomainRow& r) { return r.method == "cachegen-ref"; });
    for (const char* label : {"mix", "others"}) {
      DomainSummary s;
      s.domain = name;
      s.profile = label;
      s.smallest_negligible = SmallestNegligible(rows, [&](const DomainRow& r) { return r.profile == label; });
      s.cachegen_negligible = cachegen;
      on_summary(s);
    }
  }
  return Status::Ok();
}

}  // namespace kvstream::bench
