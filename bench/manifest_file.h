// scheduler/manifest_file.h — a context's level sizes, qualities and receiver costs as a JSON file, the
// input of trace-driven simulations (bench/traces/*.manifest.json).
//
//   {"model": "...", "source": "how the numbers were obtained",
//    "levels": [{"level": "L3", "quality": 0.97, "s_per_token": 1.2e-5}, ...],   // text: recompute cost
//    "chunk_tokens": [256, ...],
//    "bytes": [[size at levels[0], size at levels[1], ...], ...]}                 // one row per chunk
#pragma once

#include <string>

#include "kvstream/level_policy.h"
#include "kvstream/status.h"
#include "bench/simulator.h"

namespace kvstream::bench {

struct ManifestFile {
  std::string model;
  std::string source;
  FetchManifest manifest;
  ReceiverCosts costs;
};

Result<ManifestFile> ParseManifestJson(const std::string& text, const std::string& name);
Result<ManifestFile> LoadManifestFile(const std::string& path);
std::string ManifestToJson(const ManifestFile& file);

}  // namespace kvstream::bench
