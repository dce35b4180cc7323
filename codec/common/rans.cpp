// rANS models: frequency normalisation and the encoder/decoder tables derived from the frequencies.
#include "codec/common/rans.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>

#include "codec/common/rans_step.h"

namespace kvstream::codec {
namespace {

// log2(f) for f in [0, 4097]; log2(0) is never used as a cost because frequencies stay >= 1.
const std::array<double, kRansProbScale + 2>& Log2Table() {
  static const std::array<double, kRansProbScale + 2> table = [] {
    std::array<double, kRansProbScale + 2> t{};
    for (size_t f = 1; f < t.size(); ++f) t[f] = std::log2(static_cast<double>(f));
    return t;
  }();
  return table;
}

Status CheckAlphabet(int alphabet, const char* what) {
  if (alphabet < 1 || alphabet > kRansMaxAlphabet) {
    return Status::InvalidArgument(std::string(what) + ": alphabet = " + std::to_string(alphabet) +
                                   ", expected 1.." + std::to_string(kRansMaxAlphabet));
  }
  return Status::Ok();
}

}  // namespace

Result<RansModel> RansModel::FromCounts(const uint32_t* counts, int alphabet) {
  KVSTREAM_RETURN_IF_ERROR(CheckAlphabet(alphabet, "rANS counts"));
  if (counts == nullptr) return Status::InvalidArgument("rANS counts: null counts");
  uint64_t total = 0;
  for (int s = 0; s < alphabet; ++s) total += counts[s];
  if (total == 0) {
    return Status::InvalidArgument("rANS counts: all " + std::to_string(alphabet) +
                                   " counts are zero, nothing to model");
  }

  // Start from the proportional share rounded down (at least 1), then move single units of probability
  // greedily. The cost sum(c * -log2 f) is separable and convex in each f, so the allocation is optimal
  // exactly when no unit can move from one symbol to another with a gain; the exchange loop below ends
  // in that state.
  const auto& lg = Log2Table();
  std::array<uint32_t, kRansMaxAlphabet> f{};
  uint32_t sum = 0;
  for (int s = 0; s < alphabet; ++s) {
    if (counts[s] == 0) continue;
    const uint64_t share = static_cast<uint64_t>(counts[s]) * kRansProbScale / total;
    f[s] = share == 0 ? 1u : static_cast<uint32_t>(share);
    sum += f[s];
  }
  auto gain = [&](int s) { return counts[s] * (lg[f[s] + 1] - lg[f[s]]); };   // of f[s] + 1
  auto loss = [&](int s) { return counts[s] * (lg[f[s]] - lg[f[s] - 1]); };   // of f[s] - 1
  auto best_gain = [&] {
    int best = -1;
    for (int s = 0; s < alphabet; ++s) {
      if (counts[s] != 0 && (best < 0 || gain(s) > gain(best))) best = s;
    }
    return best;
  };
  auto least_loss = [&] {
    int best = -1;
    for (int s = 0; s < alphabet; ++s) {
      if (f[s] > 1 && (best < 0 || loss(s) < loss(best))) best = s;
    }
    return best;
  };
  while (sum < kRansProbScale) {
    ++f[best_gain()];
    ++sum;
  }
  while (sum > kRansProbScale) {  // only when many symbols were raised to 1; some f > 1 must exist
    --f[least_loss()];
    --sum;
  }
  for (int iter = 0; iter < static_cast<int>(kRansProbScale); ++iter) {
    const int up = best_gain();
    const int down = least_loss();
    if (down < 0 || up == down || gain(up) <= loss(down) * (1.0 + 1e-12)) break;
    ++f[up];
    --f[down];
  }

  RansModel model;
  model.alphabet_ = alphabet;
  model.freq_.assign(kRansMaxAlphabet, 0);
  for (int s = 0; s < alphabet; ++s) model.freq_[s] = static_cast<uint16_t>(f[s]);
  model.BuildTables();
  return model;
}

Result<RansModel> RansModel::FromFrequencies(const uint16_t* frequencies, int alphabet) {
  KVSTREAM_RETURN_IF_ERROR(CheckAlphabet(alphabet, "rANS frequencies"));
  if (frequencies == nullptr) return Status::InvalidArgument("rANS frequencies: null frequencies");
  uint32_t sum = 0;
  for (int s = 0; s < alphabet; ++s) sum += frequencies[s];
  if (sum != kRansProbScale) {
    return Status::InvalidArgument("rANS frequencies: sum = " + std::to_string(sum) + " over " +
                                   std::to_string(alphabet) + " symbols, expected " +
                                   std::to_string(kRansProbScale));
  }
  RansModel model;
  model.alphabet_ = alphabet;
  model.freq_.assign(kRansMaxAlphabet, 0);
  for (int s = 0; s < alphabet; ++s) model.freq_[s] = frequencies[s];
  model.BuildTables();
  return model;
}

void RansModel::BuildTables() {
  slots_.assign(kRansProbScale, 0);
  enc_.assign(kRansMaxAlphabet, RansEncSymbol{});
  cost_.assign(kRansMaxAlphabet, std::numeric_limits<double>::infinity());
  // The slots are spread (docs/rans.md, "Frequency tables"): symbol s's slot of rank k goes to its ideal
  // position floor((2k + 1) * 4096 / (2 freq)), ties in symbol order, so that every prefix of the slots
  // holds each symbol about in proportion to its frequency. A tail's first steps, from states far below
  // 4096, then cost about what the symbol's probability says; with each symbol's slots side by side they
  // cost up to 12 bits. Counting sort by ideal position; positions step by 4096 / freq, kept exactly as a
  // quotient and remainder of 2 * freq.
  std::array<uint16_t, kRansProbScale> ideal;  // of (s, k), at s's first rank + k
  std::array<uint16_t, kRansProbScale + 1> next{};
  uint32_t first = 0;
  for (int s = 0; s < kRansMaxAlphabet; ++s) {
    const uint32_t two_freq = 2u * freq_[s];
    if (two_freq == 0) continue;
    const uint32_t step = 2 * kRansProbScale / two_freq, step_rest = 2 * kRansProbScale % two_freq;
    uint32_t position = kRansProbScale / two_freq, rest = kRansProbScale % two_freq;
    for (uint32_t k = 0; k < freq_[s]; ++k) {
      ideal[first + k] = static_cast<uint16_t>(position);
      ++next[position + 1];
      position += step;
      rest += step_rest;
      if (rest >= two_freq) rest -= two_freq, ++position;
    }
    first += freq_[s];
  }
  for (uint32_t p = 1; p <= kRansProbScale; ++p) next[p] = static_cast<uint16_t>(next[p] + next[p - 1]);

  slot_of_rank_.clear();
  first = 0;
  for (int s = 0; s < kRansMaxAlphabet; ++s) {
    const uint32_t freq = freq_[s];
    if (freq == 0) continue;
    RansEncSymbol& e = enc_[s];
    e.first = static_cast<uint32_t>(slot_of_rank_.size());
    e.freq = freq;
    for (uint32_t k = 0; k < freq; ++k) {
      const uint16_t slot = next[ideal[first + k]]++;
      slots_[slot] = RansPackSlot(static_cast<uint32_t>(s), freq, k);
      slot_of_rank_.push_back(slot);
    }
    if (freq == 1) {
      // floor(x * (2^64 - 1) / 2^64) = x - 1 for x >= 1: the quotient is one short, the rank x - q = 1,
      // and the entry there puts the missing 4096 back.
      e.rcp = ~uint64_t{0};
      slot_of_rank_.push_back(static_cast<uint16_t>(slot_of_rank_.back() + kRansProbScale));
    } else {
      // rcp = ceil(2^64 / freq). q = floor(x * rcp / 2^64) = floor(x / freq) exactly for x < 2^32: the
      // reciprocal's error adds less than x / 2^64 < 2^-32, which cannot reach the gap of at least
      // 1 / freq >= 2^-12 between x / freq and the next integer.
      e.rcp = ~uint64_t{0} / freq + 1;
    }
    cost_[s] = kRansProbBits - Log2Table()[freq];
    first += freq;
  }
}

RansTail RansTailOf(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period,
                    bool has_header) {
  RansTail tail;
  if (n < kRansLanes) return tail;
  uint64_t* const x = tail.state;
  std::fill(x, x + kRansLanes, uint64_t{1});
  const size_t groups = (n + kRansLanes - 1) / kRansLanes;
  for (size_t t = 1; t <= std::min(groups, kRansMaxTailGroups); ++t) {
    const size_t first = (groups - t) * kRansLanes;
    for (size_t i = std::min(n, first + kRansLanes); i-- > first;) {
      const RansModel& model = *models[i % period];
      const RansEncSymbol& e = model.encode_table()[symbols[i]];
      uint64_t& v = x[i % kRansLanes];
      if (e.freq == 0) return RansTail{};
      if (v <= UINT32_MAX) {  // the encoder's step, without a 64-bit division: the decoder checks every tail
        v = RansCodeSymbol(static_cast<uint32_t>(v), e, model.slot_of_rank());
      } else {
        if (v / e.freq >= uint64_t{1} << (64 - kRansProbBits)) return RansTail{};
        v = ((v / e.freq) << kRansProbBits) + model.slot_of_rank()[e.first + v % e.freq];
      }
    }
    if (std::all_of(x, x + kRansLanes, [](uint64_t v) { return v >= kRansStateLow; })) {
      tail.groups = t;
      return tail;
    }
  }
  // A short stream whose lanes code too little to reach 2^16 is all tail: its lanes' states are stored as
  // they are instead of starting from 2^16.
  if (!has_header || groups > kRansMaxTailGroups) return RansTail{};
  tail.groups = groups;
  return tail;
}

double RansIdealBits(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period) {
  double bits = 0;
  size_t m = 0;
  for (size_t i = 0; i < n; ++i) {
    bits += models[m]->CostBits(symbols[i]);
    if (++m == period) m = 0;
  }
  return bits;
}

}  // namespace kvstream::codec
