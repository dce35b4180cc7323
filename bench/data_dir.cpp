// The benchmarks' data folder and the running executable (see the header).
#include "bench/data_dir.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <vector>

namespace kvstream::bench {
namespace {

bool HoldsTraces(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::is_directory(dir / "traces", ec);
}

}  // namespace

Result<std::filesystem::path> FindBenchDataDir(const std::optional<std::string>& env_value,
                                               const std::filesystem::path& executable) {
  if (env_value) {
    const std::filesystem::path dir(*env_value);
    if (!HoldsTraces(dir)) {
      return Status::NotFound(std::string(kBenchDataEnv) + " = '" + *env_value +
                              "': no traces/ folder there (it should name the folder holding traces/ and "
                              "plot_adapt.py, e.g. the source tree's bench/)");
    }
    return dir;
  }
  const std::filesystem::path bin = executable.parent_path();
  const std::vector<std::filesystem::path> candidates = {(bin / ".." / "share" / "kvstream" / "bench").lexically_normal(),
                                                         (bin / ".." / ".." / "bench").lexically_normal()};
  std::string searched;
  for (const std::filesystem::path& dir : candidates) {
    if (HoldsTraces(dir)) return dir;
    searched += (searched.empty() ? "" : ", ") + (dir / "traces").string();
  }
  return Status::NotFound("benchmark data not found: none of " + searched + " exists (searched from the executable " +
                          executable.string() + "); set " + kBenchDataEnv +
                          " to the folder holding traces/ and plot_adapt.py (the source tree's bench/)");
}

Result<std::filesystem::path> BenchDataDir() {
  KVSTREAM_ASSIGN_OR_RETURN(const std::filesystem::path self, ThisExecutable());
  const char* env = std::getenv(kBenchDataEnv);
  return FindBenchDataDir(env && *env ? std::optional<std::string>(env) : std::nullopt, self);
}

Result<std::filesystem::path> ThisExecutable() {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return Status::IoError(std::string("readlink /proc/self/exe failed: ") + std::strerror(errno));
  self[n] = '\0';
  return std::filesystem::path(self);
}

}  // namespace kvstream::bench
