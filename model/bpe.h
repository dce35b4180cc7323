// The merge loop shared by every tokenizer: repeatedly merge the adjacent pair with the best priority
// (lowest value; leftmost on ties) until no pair merges. O(n log n) with a heap, so a whole document
// tokenizes in milliseconds even without a pre-tokenizer.
#pragma once

#include <functional>
#include <vector>

namespace kvstream::model {

// Returns true if (left, right) merge, setting the priority (lower merges first) and the merged id.
using PairLookup = std::function<bool(int left, int right, double* priority, int* merged)>;

std::vector<int> BpeMerge(std::vector<int> symbols, const PairLookup& lookup);

}  // namespace kvstream::model
