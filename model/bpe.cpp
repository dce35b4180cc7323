// Heap-driven byte-pair merging (the algorithm of sentencepiece's BPE and Hugging Face's BPE model).
#include "model/bpe.h"

#include <queue>

namespace kvstream::model {

std::vector<int> BpeMerge(std::vector<int> symbols, const PairLookup& lookup) {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return symbols;
  std::vector<int> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    double priority;
    int left, right;
    int left_id, right_id, merged;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    double priority;
    int merged;
    if (lookup(symbols[left], symbols[right], &priority, &merged)) {
      heap.push({priority, left, right, symbols[left], symbols[right], merged});
    }
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    // Stale entries: one side has merged since the candidate was pushed.
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || symbols[c.left] != c.left_id ||
        symbols[c.right] != c.right_id) {
      continue;
    }
    symbols[c.left] = c.merged;
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] >= 0) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  std::vector<int> out;
  out.reserve(n);
  for (int i = 0; i >= 0 && i < n; i = next[i]) out.push_back(symbols[i]);
  return out;
}

}  // namespace kvstream::model
