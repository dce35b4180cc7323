// `kvstream bench codec --domains`: the codec on several kinds of text, each measured with a profile that
// never saw the scored text.
//
// A manifest (bench/domains/manifest.json) names the domains and each one's files, joined by a blank line
// and tokenized as one text. Every domain's first `windows` x (context + eval) tokens are scored (as
// `kvstream eval --windows`); the tokens after them are what profiles learn from, as scripts/demo.sh
// learns the default one (predicted scheme, byte predictors, fine rows): the "mix" profile from every
// domain's learning part, and for each domain an "others" profile from all the other domains' (leave one
// domain out). int8 and cachegen-ref are scored on the same windows, and for every domain and profile the
// smallest level whose mean is negligible (IsNegligible) is reported.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kvstream/level.h"
#include "kvstream/quality.h"
#include "kvstream/status.h"

namespace kvstream::bench {

struct Domain {
  std::string name;
  std::string description;
  std::vector<std::string> files;  // absolute
};

// The domains of a manifest: {"domains": [{"name", "description", "files": [...]}, ...]}, paths that are
// not absolute taken relative to the manifest's folder. Names must be distinct; at least two domains.
Result<std::vector<Domain>> LoadDomainManifest(const std::filesystem::path& manifest);

struct DomainSuiteOptions {
  std::string model = "smollm2";
  std::filesystem::path manifest;  // empty: domains/manifest.json of the bench data folder (data_dir.h)
  int context_tokens = 2048;
  int eval_tokens = 1024;
  int windows = 2;
  int chunk_tokens = 256;
  std::vector<Level> levels = {3, 4, 5, 6};  // kvstream predicted levels scored under each profile
  int profile_contexts_per_domain = 2;       // sample windows each learning domain gives a profile
  int profile_context_tokens = 512;
  double fine_fraction = 0.12;  // the predicted levels' fine rows, as the demo streams them
  Level fine_level = 2;
};

struct DomainRow {
  std::string domain;
  std::string method;   // int8, cachegen-ref, kvstream
  std::string scheme;   // the kvstream rows' quantiser (SchemeName), else empty
  std::string profile;  // kvstream rows: "mix" or "others"; else empty
  Level level = kLevelInt8;
  QualityReport quality;  // the mean over the windows (MeanOfWindows)
  double ratio_vs_int8 = 0;
};

struct DomainSummary {
  std::string domain;
  std::string profile;              // "mix" or "others"
  std::optional<DomainRow> smallest_negligible;  // none: no level scored was negligible
  // The smallest cachegen-ref level that was negligible, for "smaller than cachegen-ref at equal quality".
  std::optional<DomainRow> cachegen_negligible;
};

// Runs the suite: `on_progress` hears what is being done (for a terminal), `on_row` every row as its
// domain finishes, `on_summary` each domain's two summaries after its rows (any of them may be empty).
Status RunDomainSuite(const DomainSuiteOptions& options, const std::function<void(const std::string&)>& on_progress,
                      const std::function<void(const DomainRow&)>& on_row,
                      const std::function<void(const DomainSummary&)>& on_summary);

}  // namespace kvstream::bench
