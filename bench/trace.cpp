// scheduler/trace.cpp — parsing and sampling link bandwidth traces.
#include "bench/trace.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <sstream>

#include "common/whole_file.h"

namespace kvstream::bench {
namespace {
constexpr size_t kMaxTracePoints = 1'000'000;
constexpr double kMinRateMbps = 1e-3;  // 1 kbit/s: slower is a dead link, not a trace
constexpr double kMaxRateMbps = 1e7;   // 10 Tbit/s
}  // namespace

double LinkTrace::RateAt(double t) const {
  const auto it = std::upper_bound(time_s.begin(), time_s.end(), t);
  const size_t i = it == time_s.begin() ? 0 : static_cast<size_t>(it - time_s.begin()) - 1;
  return rate_bps[i];
}

double LinkTrace::NextChangeAfter(double t) const {
  const auto it = std::upper_bound(time_s.begin(), time_s.end(), t);
  return it == time_s.end() ? std::numeric_limits<double>::infinity() : *it;
}

Result<LinkTrace> ParseTrace(const std::string& text, const std::string& name) {
  LinkTrace trace;
  trace.name = name;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    double t = 0, mbps = 0;
    std::string extra;
    const std::string where = name + " line " + std::to_string(line_no);
    if (!(fields >> t >> mbps) || (fields >> extra)) {
      return Status::InvalidArgument(where + ": expected 'time_s rate_mbps', got '" + line + "'");
    }
    if (!(mbps >= kMinRateMbps && mbps <= kMaxRateMbps)) {
      return Status::InvalidArgument(where + ": rate_mbps = " + std::to_string(mbps) + " outside [0.001, 1e7]");
    }
    if (trace.time_s.empty() ? t != 0 : !(t > trace.time_s.back())) {
      return Status::InvalidArgument(where + ": time_s = " + std::to_string(t) +
                                     (trace.time_s.empty() ? " but the first point must be at 0"
                                                           : " is not after the previous point"));
    }
    if (trace.time_s.size() >= kMaxTracePoints) {
      return Status::ResourceExhausted(where + ": more than " + std::to_string(kMaxTracePoints) + " points");
    }
    trace.time_s.push_back(t);
    trace.rate_bps.push_back(mbps * 1e6);
  }
  if (trace.time_s.empty()) return Status::InvalidArgument(name + ": trace has no points");
  return trace;
}

Result<LinkTrace> LoadTrace(const std::string& name_or_path, const std::string& traces_dir) {
  std::filesystem::path path(name_or_path);
  std::string name = path.stem().string();
  if (!std::filesystem::is_regular_file(path)) {
    path = std::filesystem::path(traces_dir) / (name_or_path + ".trace");
    name = name_or_path;
  }
  if (!std::filesystem::exists(path)) {
    return Status::NotFound("trace '" + name_or_path + "': neither a file nor " + path.string());
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path.string(), uint64_t{64} << 20));
  return ParseTrace(text, name);
}

}  // namespace kvstream::bench
