// Where the benchmarks' data lives (the link traces and manifests in traces/, plot_adapt.py), and the path of
// the running executable, which the benchmarks also start as `kvstream serve` and `kvstream fetch`.
//
// The data folder is found from the executable, not from the source tree it was built in, so an installed
// binary finds its installed copy: $KVSTREAM_BENCH_DATA when set, else the first that holds traces/ of
//   <folder of the executable>/../share/kvstream/bench   (installed: cmake --install puts it there)
//   <folder of the executable>/../../bench               (the build tree's build/bin/kvstream, two folders
//                                                         below the source root)
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "kvstream/status.h"

namespace kvstream::bench {

// The environment variable that names the data folder, overriding the search.
inline constexpr const char* kBenchDataEnv = "KVSTREAM_BENCH_DATA";

// The data folder, as above (an empty $KVSTREAM_BENCH_DATA counts as unset). Fails with kNotFound when $KVSTREAM_BENCH_DATA is set but holds no traces/
// (it is never searched past), or when neither candidate does; the message names every folder looked at.
Result<std::filesystem::path> BenchDataDir();

// The search itself, for a given value of $KVSTREAM_BENCH_DATA (nullopt: unset) and executable path.
Result<std::filesystem::path> FindBenchDataDir(const std::optional<std::string>& env_value,
                                               const std::filesystem::path& executable);

// This process's executable (/proc/self/exe, symbolic links resolved).
Result<std::filesystem::path> ThisExecutable();

}  // namespace kvstream::bench
