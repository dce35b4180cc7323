#include "codec/compress/coded_symbols.h"

#include <algorithm>
#include <utility>

#include "codec/common/container_format.h"
#include "common/half.h"

namespace kvstream::codec {

namespace {

// The symbols a model codes besides the escape symbol, when they form one run [lo, hi] (true of the
// profile's smoothed tables): then "codable" is two compares instead of a table lookup.
bool CodableRun(const RansModel& model, uint8_t* lo, uint8_t* hi) {
  const uint16_t* f = model.frequencies();
  int first = 0, last = 0;
  for (int s = 1; s < 256; ++s) {
    if (f[s] == 0) continue;
    if (first == 0) first = s;
    last = s;
  }
  if (first == 0) return false;
  for (int s = first; s <= last; ++s) {
    if (f[s] == 0) return false;
  }
  *lo = static_cast<uint8_t>(first);
  *hi = static_cast<uint8_t>(last);
  return true;
}

}  // namespace

static_assert(kEscapeSymbol == 0, "EscapeUncodable clears out-of-run symbols to the escape");

void EscapeUncodable(const std::vector<const RansModel*>& models, const float* x, Symbols* s) {
  const size_t channels = models.size();
  s->escapes.clear();
  // Runs per channel, looked up once per distinct model (a bank has at most a few dozen).
  std::vector<uint8_t> lo(channels), span(channels);  // span = hi - lo
  std::vector<std::pair<const RansModel*, std::pair<uint8_t, uint8_t>>> seen;
  bool all_runs = true;
  for (size_t c = 0; c < channels && all_runs; ++c) {
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == models[c]; });
    if (it == seen.end()) {
      uint8_t l = 0, h = 0;
      all_runs = CodableRun(*models[c], &l, &h);
      it = seen.insert(seen.end(), {models[c], {l, h}});
    }
    lo[c] = it->second.first;
    span[c] = static_cast<uint8_t>(it->second.second - it->second.first);
  }
  for (size_t row = 0; row < s->symbols.size(); row += channels) {
    uint8_t* sym = s->symbols.data() + row;
    if (all_runs) {
      // Branch-free byte arithmetic, so that it vectorises: v is outside [lo, hi] when v - lo (mod 256)
      // exceeds hi - lo. The escape symbol (0) is below every run, so it counts as outside and stays 0.
      uint8_t any_out = 0;
      for (size_t c = 0; c < channels; ++c) {
        const uint8_t v = sym[c];
        const uint8_t out = static_cast<uint8_t>(v - lo[c]) > span[c] ? 0xff : 0;
        sym[c] = static_cast<uint8_t>(v & ~out);
        any_out |= out;
      }
      if (any_out == 0) continue;
    } else {
      for (size_t c = 0; c < channels; ++c) {
        // Covers the escape itself when the model gives it frequency 0 (RansEncode then reports it).
        if (models[c]->frequencies()[sym[c]] == 0) sym[c] = kEscapeSymbol;
      }
    }
    for (size_t c = 0; c < channels; ++c) {
      if (sym[c] == kEscapeSymbol) s->escapes.push_back(FloatToHalf(x[row + c]));
    }
  }
}


}  // namespace kvstream::codec
