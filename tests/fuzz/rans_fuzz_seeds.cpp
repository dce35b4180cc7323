// Writes the rANS fuzzer's seed corpus: valid streams, with and without tails (docs/rans.md, "Tail"), in
// rans_decode_fuzz.cpp's input layout (u8 period selector, u16 LE symbol count, per model one byte of
// alphabet size - 1 and that many counts, then the stream). Skewed tables give long tails, tails of the whole
// stream (short streams) or none at all, flat ones short tails; their symbols are drawn from the tables
// themselves.
//   usage: rans_fuzz_seeds OUT_DIR
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "codec/common/rans.h"

int main(int argc, char** argv) {
  using namespace kvstream::codec;
  if (argc != 2) {
    std::fprintf(stderr, "usage: rans_fuzz_seeds OUT_DIR\n");
    return 2;
  }
  // Indices into rans_decode_fuzz.cpp's periods {1, 2, 3, 7, ...}.
  constexpr size_t kPeriods[] = {1, 2, 3, 7};
  std::mt19937 rng(1);
  int written = 0;
  for (uint8_t selector = 0; selector < 4; ++selector) {
    const size_t period = kPeriods[selector];
    for (size_t n : {16, 40, 200, 700, 3000}) {
      for (const bool flat : {false, true}) {
        std::vector<uint8_t> input = {selector, static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8)};
        const int alphabet = flat ? 16 : 4;
        std::vector<RansModel> models;
        for (size_t m = 0; m < period; ++m) {
          uint32_t counts[16] = {};
          input.push_back(static_cast<uint8_t>(alphabet - 1));
          for (int s = 0; s < alphabet; ++s) {
            counts[s] = 1 + (flat ? rng() % 200 : s == 0 ? 250 : rng() % 5);
            input.push_back(static_cast<uint8_t>(counts[s]));
          }
          models.push_back(RansModel::FromCounts(counts, alphabet).value());
        }
        std::vector<const RansModel*> ptrs;
        for (const RansModel& m : models) ptrs.push_back(&m);
        std::vector<uint8_t> symbols(n);
        for (size_t i = 0; i < n; ++i) {
          const uint16_t* freq = ptrs[i % period]->frequencies();
          uint32_t slot = rng() % kRansProbScale, s = 0;
          while (slot >= freq[s]) slot -= freq[s++];
          symbols[i] = static_cast<uint8_t>(s);
        }
        std::vector<uint8_t> stream;
        const auto st = RansEncode(symbols.data(), n, ptrs.data(), period, &stream);
        if (!st.ok()) {
          std::fprintf(stderr, "rans_fuzz_seeds: %s\n", st.ToString().c_str());
          return 1;
        }
        input.insert(input.end(), stream.begin(), stream.end());
        std::ofstream out(std::string(argv[1]) + "/stream_" + std::to_string(written++), std::ios::binary);
        out.write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
        if (!out) {
          std::fprintf(stderr, "rans_fuzz_seeds: cannot write into %s\n", argv[1]);
          return 1;
        }
      }
    }
  }
  return 0;
}
