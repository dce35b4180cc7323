// Where the model tests find their real models, and small file helpers for the corruption tests.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kvstream/model.h"

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

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<uint8_t> b(in ? static_cast<size_t>(in.tellg()) : 0);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return b;
}

inline void WriteBytes(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& b) { WriteBytes(path, b.data(), b.size()); }

// A fresh temporary folder for one test, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvstream_model_test_XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    path_ = d ? d : "/tmp";
  }
  ~TempDir() {
    if (path_ != "/tmp") std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kvstream::testing
