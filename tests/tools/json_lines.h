// The JSON objects a command printed one per line, for the command-line tests.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvstream::testing {

// The objects on the lines of `out` that start with `start` (say `{"kind"`), in order.
inline std::vector<nlohmann::json> JsonLines(const std::string& out, const std::string& start) {
  std::vector<nlohmann::json> objects;
  for (size_t at = out.find(start); at != std::string::npos; at = out.find(start, at + 1)) {
    if (at > 0 && out[at - 1] != '\n') continue;
    objects.push_back(nlohmann::json::parse(out.substr(at, out.find('\n', at) - at)));
  }
  return objects;
}

}  // namespace kvstream::testing
