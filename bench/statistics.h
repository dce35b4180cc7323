// Order statistics and means of a benchmark's samples (ready times, throughputs), as its reports state them.
#pragma once

#include <vector>

namespace kvstream::bench {

// The p-quantile (p in [0, 1]) by linear interpolation between the two nearest ranks: rank p * (n - 1) of
// the sorted samples, so 0 is the smallest, 1 the largest and 0.5 of an even count the mean of the two
// middle ones. 0 for no samples.
double Percentile(std::vector<double> samples, double p);

// The middle sample: the upper of the two middle ones for an even count (unlike Percentile(v, 0.5), always
// a measured value). 0 for no samples.
double Median(std::vector<double> samples);

// The arithmetic mean, summed in order; 0 for no samples.
double Mean(const std::vector<double>& samples);

}  // namespace kvstream::bench
