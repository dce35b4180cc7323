// Groups per-channel symbol histograms into a few shared rANS tables (a TableBank).
//
// A k-means over distributions: the distance of a histogram to a table is the bits it would cost coded
// with it. Used by the profile builder (one bank per level over every channel of the model) and by the
// encoder when a chunk carries its own tables (one bank per segment, its size chosen for the smallest
// tables + payload).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "codec/common/table_bank.h"

namespace kvstream::codec {

using Histogram = std::array<uint64_t, 256>;

struct ClusterOptions {
  int max_tables = 16;
  // Profile tables must code data they were not learned from: give unseen symbols near the learned range
  // (and the escape) a small frequency.
  bool smooth = false;
  int iterations = 6;
};

// The bank (models and one index per histogram) and its estimated cost in bits: payload under the
// normalised tables plus, when `table_bytes_counted`, the bank's own bytes.
struct Clustering {
  TableBank bank;
  double payload_bits = 0;
  double bank_bits = 0;
};

Result<Clustering> ClusterHistograms(const std::vector<Histogram>& histograms, const ClusterOptions& options);

// Builds the rANS model for a table's counts (scaled to 32 bits), smoothed as above when asked.
Result<RansModel> ModelFromHistogram(const Histogram& counts, bool smooth);

}  // namespace kvstream::codec
