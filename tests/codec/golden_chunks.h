// The golden chunks of the current format (tests/codec/golden/v7) with their profiles, for the suites that
// decode every level kind: the layer-range decode (codec), the GPU kernels under the CPU launcher (cuda).
// KVSTREAM_GOLDEN_DIR is the golden folder.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"

namespace kvstream::testing {

struct Golden {
  std::string name;
  std::vector<uint8_t> bytes;
  ChunkInfo info;
  std::optional<Profile> profile;
};

inline Golden LoadGolden(const std::string& name, const std::string& profile) {
  const std::string dir = std::string(KVSTREAM_GOLDEN_DIR) + "/v7/";
  Golden g;
  g.name = name;
  g.bytes = ReadWholeFile(dir + name).value();
  g.info = InspectChunk(g.bytes.data(), g.bytes.size()).value();
  if (!profile.empty()) {
    const std::vector<uint8_t> bytes = ReadWholeFile(dir + profile).value();
    g.profile = Profile::Parse(bytes.data(), bytes.size()).value();
  }
  return g;
}

// Every KV level kind: fp16, int8, channel-uniform with profile and in-chunk tables, transform and
// predicted (fine rows too).
inline const char* const kKvGoldenChunks[] = {
    "fp16.kvck",         "int8.kvck",         "uniform_profile_L1.kvck", "uniform_profile_L3.kvck",
    "uniform_inchunk_L3.kvck", "uniform_inchunk_L6.kvck", "transform_L1.kvck", "transform_L3.kvck",
    "transform_fine_L4.kvck",  "predicted_L1.kvck",       "predicted_L3.kvck", "predicted_fine_L4.kvck"};

// The profile a golden chunk was encoded with ("" for none).
inline std::string GoldenProfileFor(const std::string& name) {
  if (name.starts_with("uniform_profile")) return "uniform.kvpf";
  return name.starts_with("transform") || name.starts_with("predicted") ? "predicted.kvpf" : "";
}

// A golden chunk with its profile.
inline Golden LoadGolden(const std::string& name) { return LoadGolden(name, GoldenProfileFor(name)); }

}  // namespace kvstream::testing
