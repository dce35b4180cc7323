// The golden chunk files' MANIFEST, shared by their generator (make_golden.cpp) and their test
// (codec_golden_test.cpp). docs/format.md, "Golden files", says what they are for and the rule that keeps
// them: a version's files are never regenerated.
//
// One line per file, fields separated by single spaces:
//   name version scheme level features fnv1a64 header_crc segment_crcs profile
// version: the chunk version in its header; scheme: "none" for fp16/int8/text, else the scheme's name;
// level: LevelName; features: comma-separated (profile-tables, in-chunk-tables, sink-rows, fine-rows,
// escapes=N, ...); fnv1a64: 16 hex digits, the FNV-1a of the decoded values as dense fp16, keys then values
// (a text chunk: of its u32 token ids); header_crc: 8 hex digits; segment_crcs: comma-separated 8 hex
// digits in index order; profile: the profile file in the same folder, or "-". Lines starting with '#'
// are comments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kvstream::golden {

struct Entry {
  std::string name;
  int version = 0;
  std::string scheme;
  std::string level;
  std::string features;
  uint64_t hash = 0;
  uint32_t header_crc = 0;
  std::vector<uint32_t> segment_crcs;
  std::string profile;  // "-" when the chunk needs none
};

// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3), as the profile hash uses.
inline uint64_t Fnv1a64(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

inline std::string Hex(uint64_t value, int digits) {
  std::string s(static_cast<size_t>(digits), '0');
  for (int i = digits - 1; i >= 0; --i, value >>= 4) s[static_cast<size_t>(i)] = "0123456789abcdef"[value & 15];
  return s;
}

inline std::string FormatEntry(const Entry& e) {
  std::string crcs;
  for (size_t i = 0; i < e.segment_crcs.size(); ++i) {
    if (i) crcs += ",";  // appended, not `"," + Hex(...)`: that trips a GCC 12 -Wrestrict false positive
    crcs += Hex(e.segment_crcs[i], 8);
  }
  return e.name + " " + std::to_string(e.version) + " " + e.scheme + " " + e.level + " " + e.features + " " +
         Hex(e.hash, 16) + " " + Hex(e.header_crc, 8) + " " + crcs + " " + e.profile;
}

// Reads `path`; false (and *error set) if it cannot be read or a line is malformed.
inline bool ReadManifest(const std::string& path, std::vector<Entry>* entries, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + path;
    return false;
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Entry e;
    std::string hash, header_crc, crcs;
    if (!(fields >> e.name >> e.version >> e.scheme >> e.level >> e.features >> hash >> header_crc >> crcs >>
          e.profile)) {
      *error = path + ":" + std::to_string(n) + ": expected 9 fields";
      return false;
    }
    e.hash = std::stoull(hash, nullptr, 16);
    e.header_crc = static_cast<uint32_t>(std::stoul(header_crc, nullptr, 16));
    std::istringstream list(crcs);
    for (std::string crc; std::getline(list, crc, ',');) e.segment_crcs.push_back(static_cast<uint32_t>(std::stoul(crc, nullptr, 16)));
    entries->push_back(std::move(e));
  }
  return true;
}

}  // namespace kvstream::golden
