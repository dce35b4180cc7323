// The domain suite: the manifest's checks (and the shipped one's files), then a whole run on real KV of
// the tiny stories260K model: every method on every domain, both profiles, the summaries.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench/domain_suite.h"
#include "tests/test_files.h"

namespace kvstream::bench {
namespace {

std::string WriteManifest(const testing::TempDir& dir, const std::string& json) {
  const std::string path = dir.path() + "/manifest.json";
  std::ofstream(path) << json;
  return path;
}

void ExpectRefused(const std::string& json, const std::string& message) {
  testing::TempDir dir;
  auto domains = LoadDomainManifest(WriteManifest(dir, json));
  ASSERT_FALSE(domains.ok()) << json;
  EXPECT_NE(domains.status().message().find(message), std::string::npos) << domains.status().ToString();
}

TEST(DomainManifest, TheShippedOneNamesFilesThatExist) {
  auto domains = LoadDomainManifest(std::string(KVSTREAM_SOURCE_DIR) + "/bench/domains/manifest.json");
  ASSERT_TRUE(domains.ok()) << domains.status().ToString();
  EXPECT_GE(domains->size(), 5u);
  for (const Domain& d : *domains) {
    for (const std::string& file : d.files) EXPECT_TRUE(std::ifstream(file).good()) << d.name << ": " << file;
  }
}

TEST(DomainManifest, RelativePathsAreTheManifestsFolders) {
  testing::TempDir dir;
  auto domains = LoadDomainManifest(WriteManifest(
      dir, R"({"domains": [{"name": "a", "files": ["x.txt", "/abs/y"]}, {"name": "b", "files": ["sub/../z"]}]})"));
  ASSERT_TRUE(domains.ok()) << domains.status().ToString();
  EXPECT_EQ((*domains)[0].files, (std::vector<std::string>{dir.path() + "/x.txt", "/abs/y"}));
  EXPECT_EQ((*domains)[1].files, (std::vector<std::string>{dir.path() + "/z"}));
}

TEST(DomainManifest, RefusesWhatItCannotUseNamingTheField) {
  ExpectRefused("{", "not JSON");
  ExpectRefused(R"({"texts": []})", "\"domains\" array");
  ExpectRefused(R"({"domains": [{"name": "a", "files": ["x"]}]})", "at least two domains");
  ExpectRefused(R"({"domains": [{"name": "a", "files": ["x"]}, {"name": "a", "files": ["y"]}]})", "domain a named twice");
  ExpectRefused(R"({"domains": [{"name": "a", "files": []}, {"name": "b", "files": ["y"]}]})", "domains[0] (a)");
  ExpectRefused(R"({"domains": [{"files": ["x"]}, {"name": "b", "files": ["y"]}]})", "non-empty \"name\"");
  ExpectRefused(R"({"domains": [{"name": "a", "files": [3]}, {"name": "b", "files": ["y"]}]})", "non-empty strings");
}

DomainSuiteOptions TinyRun(const std::string& manifest) {
  DomainSuiteOptions o;
  o.model = "stories260K";
  o.manifest = manifest;
  o.context_tokens = 64;
  o.eval_tokens = 32;
  o.chunk_tokens = 32;
  o.levels = {3, 5};
  o.profile_context_tokens = 64;
  return o;
}

TEST(DomainSuite, ScoresEveryMethodOnEveryDomainWithBothProfiles) {
  testing::TempDir dir;
  const std::string manifest = WriteManifest(dir, R"({"domains": [
      {"name": "gpl", "files": ["/usr/share/common-licenses/GPL-3"]},
      {"name": "apache", "files": ["/usr/share/common-licenses/Apache-2.0"]},
      {"name": "two", "files": ["/usr/share/common-licenses/MPL-2.0", "/usr/share/common-licenses/LGPL-2.1"]}]})");
  std::vector<DomainRow> rows;
  std::vector<DomainSummary> summaries;
  int progress = 0;
  Status st = RunDomainSuite(TinyRun(manifest), [&](const std::string&) { ++progress; },
                             [&](const DomainRow& r) { rows.push_back(r); }, [&](const DomainSummary& s) { summaries.push_back(s); });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_GT(progress, 0);
  // Per domain: int8, three cachegen-ref levels, two levels under each of the two profiles.
  ASSERT_EQ(rows.size(), 3u * 8u);
  std::map<std::string, std::vector<DomainRow>> by_domain;
  for (const DomainRow& r : rows) by_domain[r.domain].push_back(r);
  for (const auto& [domain, of] : by_domain) {
    ASSERT_EQ(of.size(), 8u) << domain;
    EXPECT_EQ(of[0].method, "int8");
    EXPECT_DOUBLE_EQ(of[0].ratio_vs_int8, 1.0);
    bool profiles_differ = false;
    for (const DomainRow& r : of) {
      EXPECT_EQ(r.quality.windows, 2) << domain << " " << r.method;
      EXPECT_GT(r.quality.bits_per_value, 0) << domain;
      EXPECT_NEAR(r.ratio_vs_int8, of[0].quality.bits_per_value / r.quality.bits_per_value, 1e-9);
      EXPECT_EQ(r.profile.empty(), r.method != "kvstream") << domain << " " << r.method;
    }
    for (size_t i = 4; i < 6; ++i) {
      EXPECT_EQ(of[i].profile, "mix");
      EXPECT_EQ(of[i + 2].profile, "others");
      EXPECT_EQ(of[i].level, of[i + 2].level);
      profiles_differ = profiles_differ || of[i].quality.bits_per_value != of[i + 2].quality.bits_per_value;
    }
    EXPECT_TRUE(profiles_differ) << domain << ": the leave-one-out profile coded exactly as the mix";
  }
  ASSERT_EQ(summaries.size(), 6u);
  for (const DomainSummary& s : summaries) {
    if (!s.smallest_negligible) continue;
    EXPECT_EQ(s.smallest_negligible->profile, s.profile);
    EXPECT_TRUE(IsNegligible(s.smallest_negligible->quality));
    for (const DomainRow& r : by_domain[s.domain]) {
      if (r.profile == s.profile && IsNegligible(r.quality)) {
        EXPECT_LE(s.smallest_negligible->quality.bits_per_value, r.quality.bits_per_value);
      }
    }
  }
}

TEST(DomainSuite, ADomainTooShortIsNamedWithWhatItNeeds) {
  testing::TempDir dir;
  std::ofstream(dir.path() + "/short.txt") << "A few words only.";
  const std::string manifest = WriteManifest(dir, R"({"domains": [
      {"name": "gpl", "files": ["/usr/share/common-licenses/GPL-3"]}, {"name": "short", "files": ["short.txt"]}]})");
  Status st = RunDomainSuite(TinyRun(manifest), [](const std::string&) {}, [](const DomainRow&) {}, [](const DomainSummary&) {});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("domain short has"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("add files of that kind"), std::string::npos) << st.ToString();
  DomainSuiteOptions no_levels = TinyRun(manifest);
  no_levels.levels.clear();
  EXPECT_NE(RunDomainSuite(no_levels, nullptr, nullptr, nullptr).message().find("levels: none given"), std::string::npos);
}

}  // namespace
}  // namespace kvstream::bench
