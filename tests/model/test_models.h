// Where the model tests find their real models; and the file helpers the corruption tests use.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "kvstream/model.h"
#include "tests/test_files.h"

namespace kvstream::testing {

// The cached SmolLM2 GGUF, or "" when it is not there (tests then skip; they never download).
inline std::string SmolLm2Path() {
  const char* cache = std::getenv("KVSTREAM_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string dir = cache && *cache ? cache : std::string(home ? home : ".") + "/.cache/kvstream/models";
  const std::string p = dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? p : "";
}

// The folder of a shared tiny model ("stories260K/stories260K.bin" -> its folder).
inline std::string SharedModel(const std::string& short_name) {
  Result<std::string> p = ResolveModelPath(short_name);
  return p.ok() ? *p : "";
}

}  // namespace kvstream::testing
