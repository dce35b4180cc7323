// Static-model interleaved rANS: the entropy coder shared by the chunk encoder and decoder.
//
// Contract (the byte format is specified in docs/format.md, "rANS stream"):
//   * 32-bit states, 16-bit renormalisation, probabilities quantised to kRansProbBits (12) bits;
//   * symbols are bytes; a model covers an alphabet of at most 256 symbols;
//   * symbol i of a stream is coded with models[i % period] (per-channel tables: period = channels);
//   * several states are interleaved so that the decoder has independent dependency chains to overlap
//     (and SIMD lanes / GPU threads to spread over).
// The per-symbol decode step lives in rans_step.h as host/device code, so the CUDA kernels reuse it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvstream/status.h"

namespace kvstream::codec {

inline constexpr int kRansProbBits = 12;
inline constexpr uint32_t kRansProbScale = 1u << kRansProbBits;
inline constexpr int kRansMaxAlphabet = 256;

// A static symbol distribution with frequencies that sum to kRansProbScale, plus the encoder's and
// decoder's lookup tables derived from them. Symbols of frequency 0 cannot be coded.
class RansModel {
 public:
  // Quantises counts (alphabet <= 256) to frequencies summing to 2^12 so that every symbol with a
  // non-zero count keeps a frequency >= 1, minimising the coded size of the counted data.
  static Result<RansModel> FromCounts(const uint32_t* counts, int alphabet);
  // Adopts stored frequencies (from a profile or a chunk) after checking that they sum to 2^12.
  static Result<RansModel> FromFrequencies(const uint16_t* frequencies, int alphabet);

  int alphabet() const;
  const uint16_t* frequencies() const;
  // Bits the model spends on symbol s: -log2(freq / 2^12); infinity when freq is 0.
  double CostBits(uint8_t symbol) const;
  // Detail for the coder: cumulative starts and the 4096-entry slot -> (symbol, freq, start) table.
  // (Defined by rans.cpp; see rans_step.h for the decoder's packed entry layout.)
  const uint32_t* decode_table() const;
  const uint16_t* starts() const;

 private:
  std::vector<uint16_t> freq_;
  std::vector<uint16_t> start_;
  std::vector<uint32_t> slots_;
};

// Appends the rANS stream of symbols[0, n) to *out; symbol i uses models[i % period]. Fails (with the
// index and symbol) if a symbol has frequency 0 in its model.
Status RansEncode(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period,
                  std::vector<uint8_t>* out);

// Decodes exactly n symbols from data[0, size) into out. Never reads outside data: a stream that is
// too short, has bytes left over, or ends in the wrong final state gives CorruptData.
Status RansDecode(const uint8_t* data, size_t size, const RansModel* const* models, size_t period,
                  uint8_t* out, size_t n);

// Sum over symbols of the model's cost: the ideal coded size, for the entropy-overhead figure.
double RansIdealBits(const uint8_t* symbols, size_t n, const RansModel* const* models, size_t period);

}  // namespace kvstream::codec
