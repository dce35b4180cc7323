// scheduler/trace.h — link bandwidth traces: the rate of a link over time, piecewise constant.
//
// File format (bench/traces/*.trace): one "time_s rate_mbps" pair per line, times strictly increasing
// from 0; the rate holds until the next line's time and the last rate holds forever. '#' starts a
// comment; blank lines are ignored.
#pragma once

#include <string>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::bench {

struct LinkTrace {
  std::string name;
  std::vector<double> time_s;    // strictly increasing, time_s[0] == 0
  std::vector<double> rate_bps;  // > 0

  double RateAt(double t) const;
  double NextChangeAfter(double t) const;  // +infinity when the rate never changes again
};

Result<LinkTrace> ParseTrace(const std::string& text, const std::string& name);
// `name_or_path`: a file, or a name looked up as `traces_dir`/NAME.trace.
Result<LinkTrace> LoadTrace(const std::string& name_or_path, const std::string& traces_dir);

}  // namespace kvstream::bench
