// Real KV caches for the codec tests: a prefix of real English prose run through a real model.
#pragma once

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kvstream/model.h"

namespace kvstream::testing {

struct RealKv {
  std::unique_ptr<Model> model;
  std::vector<int> tokens;  // the prefilled tokens
  KvCache cache;
};

// Whether SmolLM2's cached GGUF is present (tests skip rather than download it).
inline bool SmolLm2Cached() {
  const char* home = std::getenv("HOME");
  if (!home) return false;
  std::ifstream f(std::string(home) + "/.cache/kvstream/models/SmolLM2-135M-Instruct.Q4_1.gguf");
  return f.good();
}

// The KV of the first `tokens` tokens of the GPL-3 text under `model_name`, computed once per process.
// Returns null (and sets *error) if the model cannot be loaded.
inline const RealKv* GetRealKv(const std::string& model_name, int tokens, std::string* error) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<RealKv>> cache;
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = model_name + "/" + std::to_string(tokens);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.get();
  auto model = Model::Load(model_name);
  if (!model.ok()) {
    *error = model.status().ToString();
    return nullptr;
  }
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  std::stringstream ss;
  ss << in.rdbuf();
  auto kv = std::make_unique<RealKv>();
  kv->model = std::move(model).value();
  kv->tokens = kv->model->tokenizer().Encode(ss.str(), kv->model->tokenizer().adds_bos());
  if (static_cast<int>(kv->tokens.size()) < tokens) {
    *error = "the GPL-3 text has only " + std::to_string(kv->tokens.size()) + " tokens";
    return nullptr;
  }
  kv->tokens.resize(static_cast<size_t>(tokens));
  kv->cache = KvCache::Allocate(kv->model->config(), tokens);
  Status st = kv->model->Forward(kv->tokens, kv->cache, nullptr);
  if (!st.ok()) {
    *error = st.ToString();
    return nullptr;
  }
  RealKv* raw = kv.get();
  cache[key] = std::move(kv);
  return raw;
}

// GetRealKv for a test that cannot go on without it: a load failure is a test failure.
inline const RealKv& MustGetRealKv(const std::string& model_name, int tokens) {
  std::string error;
  const RealKv* kv = GetRealKv(model_name, tokens, &error);
  if (!kv) ADD_FAILURE() << model_name << ": " << error;
  return *kv;
}

}  // namespace kvstream::testing
