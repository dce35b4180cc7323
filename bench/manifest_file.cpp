// scheduler/manifest_file.cpp — reading and writing simulation manifests (JSON, nlohmann).
#include "bench/manifest_file.h"

#include <nlohmann/json.hpp>

#include "common/whole_file.h"

namespace kvstream::bench {
namespace {
constexpr size_t kMaxChunks = 1 << 20;
constexpr size_t kMaxLevels = 32;
}  // namespace

Result<ManifestFile> ParseManifestJson(const std::string& text, const std::string& name) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::InvalidArgument(name + ": not a JSON object");
  ManifestFile f;
  f.model = j.value("model", "");
  f.source = j.value("source", "");
  const auto& levels = j.contains("levels") ? j["levels"] : nlohmann::json();
  const auto& tokens = j.contains("chunk_tokens") ? j["chunk_tokens"] : nlohmann::json();
  const auto& bytes = j.contains("bytes") ? j["bytes"] : nlohmann::json();
  if (!levels.is_array() || levels.empty() || levels.size() > kMaxLevels) {
    return Status::InvalidArgument(name + ": levels must be an array of 1.." + std::to_string(kMaxLevels) + " entries");
  }
  if (!tokens.is_array() || tokens.size() > kMaxChunks || !bytes.is_array() || bytes.size() != tokens.size()) {
    return Status::InvalidArgument(name + ": chunk_tokens and bytes must be arrays of equal length (at most " +
                                   std::to_string(kMaxChunks) + ")");
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    const auto& l = levels[i];
    Level level = 0;
    const std::string where = name + ": levels[" + std::to_string(i) + "]";
    if (!l.is_object() || !l.contains("level") || !l["level"].is_string() || !ParseLevel(l["level"].get<std::string>(), &level)) {
      return Status::InvalidArgument(where + ".level must be fp16, int8, text or L<n>");
    }
    const double quality = l.value("quality", -1.0);
    const double cost = l.value("s_per_token", -1.0);
    if (!(quality >= 0 && quality <= 1)) return Status::InvalidArgument(where + ".quality must be in [0, 1]");
    if (!(cost >= 0 && cost < 1)) return Status::InvalidArgument(where + ".s_per_token must be in [0, 1)");
    f.manifest.levels.push_back({level, quality});
    f.costs.s_per_token[level] = cost;
  }
  f.manifest.num_chunks = static_cast<int>(tokens.size());
  for (size_t c = 0; c < tokens.size(); ++c) {
    const std::string where = name + ": chunk " + std::to_string(c);
    if (!tokens[c].is_number_integer() || tokens[c].get<int64_t>() <= 0 || tokens[c].get<int64_t>() > (1 << 20)) {
      return Status::InvalidArgument(where + ": chunk_tokens must be an integer in [1, 2^20]");
    }
    f.manifest.chunk_tokens.push_back(tokens[c].get<int>());
    f.manifest.total_tokens += f.manifest.chunk_tokens.back();
    if (!bytes[c].is_array() || bytes[c].size() != levels.size()) {
      return Status::InvalidArgument(where + ": bytes row must have one size per level (" + std::to_string(levels.size()) + ")");
    }
    std::vector<uint64_t> row;
    for (const auto& b : bytes[c]) {
      if (!b.is_number_unsigned() && !(b.is_number_integer() && b.get<int64_t>() >= 0)) {
        return Status::InvalidArgument(where + ": bytes must be non-negative integers");
      }
      row.push_back(b.get<uint64_t>());
    }
    f.manifest.bytes.push_back(std::move(row));
  }
  return f;
}

Result<ManifestFile> LoadManifestFile(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status().WithContext("manifest file");
  return ParseManifestJson(*text, path);
}

std::string ManifestToJson(const ManifestFile& f) {
  nlohmann::ordered_json j;
  j["model"] = f.model;
  j["source"] = f.source;
  j["levels"] = nlohmann::ordered_json::array();
  for (const LevelInfo& l : f.manifest.levels) {
    j["levels"].push_back({{"level", LevelName(l.level)}, {"quality", l.quality}, {"s_per_token", f.costs.s_per_token.at(l.level)}});
  }
  j["chunk_tokens"] = f.manifest.chunk_tokens;
  j["bytes"] = f.manifest.bytes;
  return j.dump(1) + "\n";
}

}  // namespace kvstream::bench
