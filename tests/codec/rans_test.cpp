// Tests of the rANS coder: frequency normalisation, round trips, agreement with a reference coder written
// from docs/rans.md, size against the ideal, AVX2 == portable == paired decoding, and corrupt streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "codec/common/rans.h"

namespace kvstream::codec {
namespace {

// Symbols of a discretised Laplacian centred in the alphabet: the shape of quantised KV values.
std::vector<uint8_t> LaplaceSymbols(size_t n, double scale, int alphabet, uint32_t seed) {
  std::mt19937 rng(seed);
  std::exponential_distribution<double> magnitude(1.0 / scale);
  std::bernoulli_distribution sign(0.5);
  std::vector<uint8_t> out(n);
  const int centre = alphabet / 2;
  for (auto& s : out) {
    const int v = centre + (sign(rng) ? 1 : -1) * static_cast<int>(std::lround(magnitude(rng)));
    s = static_cast<uint8_t>(std::clamp(v, 0, alphabet - 1));
  }
  return out;
}

std::vector<uint8_t> UniformSymbols(size_t n, int alphabet, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(0, alphabet - 1);
  std::vector<uint8_t> out(n);
  for (auto& s : out) s = static_cast<uint8_t>(d(rng));
  return out;
}

// One model per position modulo period, from the counts of the symbols it codes.
std::vector<RansModel> ModelsFor(const std::vector<uint8_t>& symbols, size_t period, int alphabet) {
  std::vector<std::vector<uint32_t>> counts(period, std::vector<uint32_t>(alphabet, 0));
  for (size_t i = 0; i < symbols.size(); ++i) ++counts[i % period][symbols[i]];
  std::vector<RansModel> models;
  for (auto& c : counts) {
    if (std::all_of(c.begin(), c.end(), [](uint32_t v) { return v == 0; })) c[0] = 1;
    auto model = RansModel::FromCounts(c.data(), alphabet);
    EXPECT_TRUE(model.ok()) << model.status().ToString();
    models.push_back(std::move(model).value());
  }
  return models;
}

std::vector<const RansModel*> Pointers(const std::vector<RansModel>& models) {
  std::vector<const RansModel*> p;
  for (const auto& m : models) p.push_back(&m);
  return p;
}

// n Laplace-distributed symbols (LaplaceSymbols) coded with models fitted to them, what most tests below
// start from; `encoded` is RansEncode's status.
struct LaplaceStream {
  std::vector<uint8_t> symbols;
  std::vector<RansModel> models;
  std::vector<const RansModel*> ptrs;  // into models
  std::vector<uint8_t> stream;
  Status encoded;
};

LaplaceStream EncodeLaplace(size_t n, size_t period, double scale, int alphabet, uint32_t seed) {
  LaplaceStream s;
  s.symbols = LaplaceSymbols(n, scale, alphabet, seed);
  s.models = ModelsFor(s.symbols, period, alphabet);
  s.ptrs = Pointers(s.models);
  s.encoded = RansEncode(s.symbols.data(), n, s.ptrs.data(), period, &s.stream);
  return s;
}

// The decoder's paths: the best vector kernel the CPU has (AVX-512 or AVX2), the AVX2 kernel (AVX-512
// disabled), the portable kernel, and the stream decoded together with three valid companions (first or
// last of the four; and first with the AVX2 kernel, which takes them in pairs). Without AVX-512 the
// first two are the same, as are the together paths.
enum class Path { kBest, kAvx2, kPortable, kTogetherFirst, kTogetherLast, kTogetherAvx2 };
constexpr Path kAllPaths[] = {Path::kBest,          Path::kAvx2,         Path::kPortable,
                              Path::kTogetherFirst, Path::kTogetherLast, Path::kTogetherAvx2};

std::string PathName(Path p) {
  switch (p) {
    case Path::kBest: return "best";
    case Path::kAvx2: return "avx2";
    case Path::kPortable: return "portable";
    case Path::kTogetherFirst: return "together-first";
    case Path::kTogetherLast: return "together-last";
    default: return "together-avx2";
  }
}

// A valid stream of its own length and tables, decoded beside the stream under test.
struct Companion {
  std::vector<uint8_t> symbols;
  std::vector<RansModel> models;
  std::vector<const RansModel*> ptrs;
  std::vector<uint8_t> stream;
};

const std::vector<Companion>& TheCompanions() {
  static const std::vector<Companion> companions = [] {
    std::vector<Companion> all(kRansMaxTogether - 1);
    for (size_t i = 0; i < all.size(); ++i) {
      Companion& k = all[i];
      std::mt19937 rng(77 + static_cast<unsigned>(i));
      k.symbols.resize(2000 + 1000 * i);
      const uint32_t alphabet = 7 + 5 * static_cast<uint32_t>(i);
      for (auto& s : k.symbols) s = static_cast<uint8_t>(rng() % alphabet);
      std::vector<uint32_t> counts(alphabet + 1, 1);
      for (uint8_t s : k.symbols) ++counts[s];
      k.models.push_back(RansModel::FromCounts(counts.data(), static_cast<int>(counts.size())).value());
      k.ptrs = {&k.models[0]};
      if (!RansEncode(k.symbols.data(), k.symbols.size(), k.ptrs.data(), 1, &k.stream).ok()) std::abort();
    }
    return all;
  }();
  return companions;
}

// Sets an environment variable for the life of the object.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    if (name_ != nullptr) setenv(name_, "1", 1);
  }
  ~ScopedEnv() {
    if (name_ != nullptr) unsetenv(name_);
  }

 private:
  const char* name_;
};

Status Decode(Path path, const std::vector<uint8_t>& stream, const std::vector<const RansModel*>& models,
              std::vector<uint8_t>* out) {
  const ScopedEnv env(path == Path::kPortable                                ? "KVSTREAM_DISABLE_AVX2"
                      : path == Path::kAvx2 || path == Path::kTogetherAvx2 ? "KVSTREAM_DISABLE_AVX512"
                                                                           : nullptr);
  if (path == Path::kBest || path == Path::kAvx2 || path == Path::kPortable) {
    return RansDecode(stream.data(), stream.size(), models.data(), models.size(), out->data(), out->size());
  }
  const std::vector<Companion>& companions = TheCompanions();
  std::vector<std::vector<uint8_t>> companion_out;
  std::vector<RansDecodeJob> jobs;
  for (const Companion& c : companions) {
    companion_out.emplace_back(c.symbols.size());
    jobs.push_back({c.stream.data(), c.stream.size(), c.ptrs.data(), 1, companion_out.back().data(), c.symbols.size()});
  }
  const RansDecodeJob tested{stream.data(), stream.size(), models.data(), models.size(), out->data(), out->size()};
  const size_t at = path == Path::kTogetherLast ? jobs.size() : 0;
  jobs.insert(jobs.begin() + static_cast<ptrdiff_t>(at), tested);
  std::vector<Status> statuses(jobs.size());
  RansDecodeTogether(jobs.data(), jobs.size(), statuses.data());
  // Whatever happens to the stream under test, its companions decode.
  for (size_t i = 0, c = 0; i < jobs.size(); ++i) {
    if (i == at) continue;
    EXPECT_TRUE(statuses[i].ok()) << statuses[i].ToString();
    EXPECT_EQ(companion_out[c], companions[c].symbols);
    ++c;
  }
  return statuses[at];
}

// The reference coder, written from docs/rans.md with plain division and a linear search of the
// cumulative frequencies instead of the library's tables, and the header's bits one at a time.
constexpr int kLanes = 16;

// The header's bits (docs/rans.md, "Stream layout"): the word counts `k` (empty: none), then each state's
// bit length (less 17 in 4 bits, or for a whole tail less 1 in 6 bits), then its bits below the leading one.
std::vector<uint8_t> ReferenceHeader(const std::vector<int>& k, const std::vector<uint64_t>& x, bool whole) {
  std::vector<int> bits;
  const auto put = [&](uint64_t v, int count) {
    for (int b = 0; b < count; ++b) bits.push_back(static_cast<int>((v >> b) & 1));
  };
  for (int words : k) {
    bits.push_back(words > 0 ? 1 : 0);
    if (words > 0) bits.push_back(words - 1);
  }
  const auto length = [](uint64_t v) {
    int l = 0;
    while (l < 64 && (v >> l) != 0) ++l;
    return l;
  };
  for (uint64_t v : x) put(length(v) - (whole ? 1 : 17), whole ? 6 : 4);
  for (uint64_t v : x) put(v, length(v) - 1);
  std::vector<uint8_t> out((bits.size() + 7) / 8, 0);
  for (size_t i = 0; i < bits.size(); ++i) out[i / 8] = static_cast<uint8_t>(out[i / 8] | (bits[i] << (i % 8)));
  return out;
}

// Reads the header's bits from stream[*pos]: kLanes word counts into *k when k is set, then `states`
// states into *x; *pos moves past the header, *bits_used = the bits before its padding. False if the
// stream is too short or a spare bit is set.
bool ReferenceReadHeader(const std::vector<uint8_t>& stream, size_t* pos, std::vector<int>* k, size_t states,
                         bool whole, std::vector<uint64_t>* x, size_t* bits_used = nullptr) {
  size_t bit = 8 * *pos;
  bool short_stream = false;
  const auto get = [&](int count) {
    uint64_t v = 0;
    for (int b = 0; b < count; ++b, ++bit) {
      if (bit / 8 >= stream.size()) short_stream = true;
      else v |= uint64_t{(stream[bit / 8] >> (bit % 8)) & 1u} << b;
    }
    return v;
  };
  if (k) {
    for (int& words : *k) words = get(1) == 0 ? 0 : 1 + static_cast<int>(get(1));
  }
  std::vector<int> below(states);
  for (int& b : below) b = static_cast<int>(get(whole ? 6 : 4)) + (whole ? 0 : 16);
  for (size_t j = 0; j < states; ++j) (*x)[j] = (uint64_t{1} << below[j]) | get(below[j]);
  if (bits_used) *bits_used = bit - 8 * *pos;
  while (bit % 8 != 0) {
    if (get(1) != 0) return false;
  }
  *pos = bit / 8;
  return !short_stream;
}

// The owner (symbol, rank) of every slot: the pairs (s, k), k < f[s], in order of
// floor((2k + 1) * 4096 / (2 f[s])), then of s.
std::vector<std::pair<int, uint32_t>> ReferenceSlots(const RansModel& m) {
  std::vector<std::tuple<uint32_t, int, uint32_t>> pairs;
  for (int s = 0; s < m.alphabet(); ++s) {
    const uint32_t f = m.frequencies()[s];
    for (uint32_t k = 0; k < f; ++k) pairs.emplace_back((2 * k + 1) * 4096 / (2 * f), s, k);
  }
  std::sort(pairs.begin(), pairs.end());
  std::vector<std::pair<int, uint32_t>> owners;
  for (const auto& [position, s, k] : pairs) owners.emplace_back(s, k);
  return owners;
}

// The reference coder's view of the tables: every model's slot owners, and each (symbol, rank)'s slot.
struct ReferenceTables {
  explicit ReferenceTables(const std::vector<const RansModel*>& models) : models(models) {
    for (const RansModel* m : models) {
      owners.push_back(ReferenceSlots(*m));
      std::vector<std::vector<uint32_t>> slots(256);
      for (uint32_t slot = 0; slot < 4096; ++slot) slots[owners.back()[slot].first].push_back(slot);
      slot_of.push_back(std::move(slots));
    }
  }
  uint64_t Freq(size_t i, int s) const { return models[i % models.size()]->frequencies()[s]; }
  // C(s, x) for symbol s at index i.
  uint64_t Code(size_t i, int s, uint64_t v) const {
    return (v / Freq(i, s)) * 4096 + slot_of[i % models.size()][s].at(v % Freq(i, s));
  }
  std::vector<const RansModel*> models;
  std::vector<std::vector<std::pair<int, uint32_t>>> owners;
  std::vector<std::vector<std::vector<uint32_t>>> slot_of;  // [model][symbol][rank]
};

// The tail (docs/rans.md, "Tail"): the fewest last groups that, coded from states of 1 without
// renormalising and without leaving 64 bits, take every lane to 2^16 or more; else all of a stream of at most
// 255 groups; 0 if neither. *x: the states after it. (The reference coder's streams have headers of their own.)
size_t ReferenceTail(const std::vector<uint8_t>& symbols, const ReferenceTables& t, std::vector<uint64_t>* x) {
  const size_t n = symbols.size();
  if (n < kLanes) return 0;
  const size_t groups = (n + kLanes - 1) / kLanes;
  x->assign(kLanes, 1);
  for (size_t tail = 1; tail <= std::min<size_t>(groups, 255); ++tail) {
    for (size_t i = std::min(n, (groups - tail + 1) * kLanes); i-- > (groups - tail) * kLanes;) {
      uint64_t& v = (*x)[i % kLanes];
      if (v / t.Freq(i, symbols[i]) >= (uint64_t{1} << 52)) return 0;
      v = t.Code(i, symbols[i], v);
    }
    if (std::all_of(x->begin(), x->end(), [](uint64_t s) { return s >= (1u << 16); })) return tail;
  }
  return groups <= 255 ? groups : 0;
}

std::vector<uint8_t> ReferenceEncode(const std::vector<uint8_t>& symbols, const ReferenceTables& tables) {
  const size_t n = symbols.size();
  std::vector<uint64_t> after_tail;
  const size_t tail = ReferenceTail(symbols, tables, &after_tail);
  const size_t groups = (n + kLanes - 1) / kLanes;
  const bool whole = tail > 0 && tail == groups;
  std::vector<uint8_t> out;
  if (n >= kLanes) out.push_back(static_cast<uint8_t>(tail));
  if (whole) {
    const std::vector<uint8_t> header = ReferenceHeader({}, after_tail, true);
    out.insert(out.end(), header.begin(), header.end());
    return out;
  }
  std::vector<uint64_t> x(kLanes, 1u << 16);
  std::vector<uint16_t> emitted;  // in the order the decoder reads them
  std::vector<int> k;
  if (tail > 0) {
    for (size_t j = 0; j < kLanes; ++j) {
      int words = 0;
      while ((after_tail[j] >> (16 * words)) >= (uint64_t{1} << 32)) ++words;
      x[j] = after_tail[j] >> (16 * words);
      for (int w = words; w-- > 0;) emitted.push_back(static_cast<uint16_t>(after_tail[j] >> (16 * w)));
      k.push_back(words);
    }
  }
  std::reverse(emitted.begin(), emitted.end());  // from here on in the order of emission
  const size_t coded = tail == 0 ? n : (groups - tail) * kLanes;
  for (size_t i = coded; i-- > 0;) {
    uint64_t v = x[i % kLanes];
    if (v >= tables.Freq(i, symbols[i]) << 20) {
      emitted.push_back(static_cast<uint16_t>(v));
      v >>= 16;
    }
    x[i % kLanes] = tables.Code(i, symbols[i], v);
  }
  x.resize(std::min<size_t>(n, kLanes));
  const std::vector<uint8_t> header = ReferenceHeader(k, x, false);
  out.insert(out.end(), header.begin(), header.end());
  for (auto it = emitted.rbegin(); it != emitted.rend(); ++it) {
    out.push_back(static_cast<uint8_t>(*it));
    out.push_back(static_cast<uint8_t>(*it >> 8));
  }
  return out;
}

bool ReferenceDecode(const std::vector<uint8_t>& stream, const ReferenceTables& tables, std::vector<uint8_t>* out) {
  const std::vector<const RansModel*>& models = tables.models;
  const size_t n = out->size();
  const size_t groups = (n + kLanes - 1) / kLanes;
  size_t tail = 0, pos = 0;
  if (n >= kLanes) {
    if (pos == stream.size()) return false;
    tail = stream[pos++];
    if (tail > groups) return false;
  }
  const bool whole = tail > 0 && tail == groups;
  std::vector<int> tail_words(kLanes, 0);
  std::vector<uint64_t> v(kLanes, 1u << 16);
  if (n > 0 && !ReferenceReadHeader(stream, &pos, tail > 0 && !whole ? &tail_words : nullptr,
                                    std::min<size_t>(n, kLanes), whole, &v)) {
    return false;
  }
  const size_t renormalised = tail == 0 ? n : (groups - tail) * kLanes;
  const auto word = [&](uint64_t* x) {
    if (pos + 2 > stream.size()) return false;
    *x = (*x << 16) | stream[pos] | (stream[pos + 1] << 8);
    pos += 2;
    return true;
  };
  for (size_t i = 0; i < n; ++i) {
    if (i == renormalised) {
      for (size_t j = 0; j < kLanes; ++j) {
        for (int w = 0; w < tail_words[j]; ++w) {
          if (!word(&v[j])) return false;
        }
      }
    }
    const auto [s, rank] = tables.owners[i % models.size()][v[i % kLanes] & 4095];
    (*out)[i] = static_cast<uint8_t>(s);
    v[i % kLanes] = tables.Freq(i, s) * (v[i % kLanes] >> 12) + rank;
    if (i < renormalised && v[i % kLanes] < (1u << 16) && !word(&v[i % kLanes])) return false;
  }
  const uint64_t start = tail > 0 ? 1 : 1u << 16;
  std::vector<uint64_t> after_tail;
  return pos == stream.size() && std::all_of(v.begin(), v.end(), [&](uint64_t s) { return s == start; }) &&
         ReferenceTail(*out, tables, &after_tail) == tail;
}

double CostOf(const std::vector<uint32_t>& counts, const uint16_t* f) {
  double bits = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s] != 0) bits += counts[s] * (12 - std::log2(f[s]));
  }
  return bits;
}

TEST(RansModel, FromCountsSumsTo4096AndKeepsEverySeenSymbol) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int alphabet = 1 + static_cast<int>(rng() % 256);
    std::vector<uint32_t> counts(alphabet);
    for (auto& c : counts) c = (rng() % 3 == 0) ? 0 : (rng() % 4 == 0 ? rng() % 1000000 : rng() % 5);
    counts[rng() % alphabet] += 1;
    auto model = RansModel::FromCounts(counts.data(), alphabet);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    uint32_t sum = 0;
    for (int s = 0; s < alphabet; ++s) {
      sum += model->frequencies()[s];
      EXPECT_EQ(counts[s] == 0, model->frequencies()[s] == 0) << "symbol " << s;
    }
    EXPECT_EQ(sum, 4096u);
  }
}

TEST(RansModel, FromCountsIsOptimal) {
  // Reference optimum: every seen symbol starts at 1 and each remaining unit goes where it saves most;
  // with a separable concave gain this greedy allocation is optimal.
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int alphabet = 2 + static_cast<int>(rng() % 200);
    std::vector<uint32_t> counts(alphabet);
    for (int s = 0; s < alphabet; ++s) {
      counts[s] = static_cast<uint32_t>(100000.0 * std::exp(-std::abs(s - alphabet / 2) / (1.0 + trial % 7)));
    }
    std::vector<uint16_t> ref(alphabet, 0);
    int units = 4096;
    for (int s = 0; s < alphabet; ++s) {
      if (counts[s] != 0) ref[s] = 1, --units;
    }
    for (; units > 0; --units) {
      int best = -1;
      double best_gain = -1;
      for (int s = 0; s < alphabet; ++s) {
        if (counts[s] == 0) continue;
        const double g = counts[s] * (std::log2(ref[s] + 1.0) - std::log2(ref[s]));
        if (g > best_gain) best_gain = g, best = s;
      }
      ++ref[best];
    }
    auto model = RansModel::FromCounts(counts.data(), alphabet);
    ASSERT_TRUE(model.ok());
    const double ours = CostOf(counts, model->frequencies());
    const double optimum = CostOf(counts, ref.data());
    EXPECT_LE(ours, optimum * (1 + 1e-9) + 1e-6) << "trial " << trial;
  }
}

TEST(RansModel, RejectsBadInput) {
  std::vector<uint32_t> zeros(16, 0);
  EXPECT_EQ(RansModel::FromCounts(zeros.data(), 16).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RansModel::FromCounts(zeros.data(), 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint32_t> many(300, 1);
  EXPECT_EQ(RansModel::FromCounts(many.data(), 257).status().code(), StatusCode::kInvalidArgument);

  std::vector<uint16_t> f(4, 1024);
  EXPECT_TRUE(RansModel::FromFrequencies(f.data(), 4).ok());
  f[3] = 1023;
  auto bad = RansModel::FromFrequencies(f.data(), 4);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("4095"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(RansModel::FromFrequencies(f.data(), 257).ok());
}

TEST(RansModel, ReciprocalDivisionIsExact) {
  // The encoder's x / freq by reciprocal, over the whole range of states it is applied to.
  std::mt19937 rng(3);
  auto model_for = [](uint16_t freq) {
    std::vector<uint16_t> f(2, 0);
    f[0] = freq;
    f[1] = static_cast<uint16_t>(4096 - freq);
    return RansModel::FromFrequencies(f.data(), freq == 4096 ? 1 : 2).value();
  };
  for (uint32_t freq = 1; freq <= 4096; ++freq) {
    const RansModel model = model_for(static_cast<uint16_t>(freq));
    const RansEncSymbol& e = model.encode_table()[0];
    const uint64_t hi = std::min<uint64_t>(uint64_t{freq} << 20, uint64_t{1} << 32);
    for (int k = 0; k < 64; ++k) {
      uint64_t x = k < 16 ? (uint64_t{freq} << 4) + k : k < 32 ? hi - 1 - (k - 16) : (freq << 4) + rng() % (hi - (freq << 4));
      const uint64_t got = RansCodeSymbol(static_cast<uint32_t>(x), e, model.slot_of_rank());
      ASSERT_EQ(got, (x / freq) * 4096 + model.slot_of_rank()[e.first + x % freq]) << "freq " << freq << " x " << x;
    }
  }
}

struct Case {
  size_t n;
  size_t period;
  int kind;  // 0 Laplacian (scale 3), 1 uniform over 256, 2 a single symbol, 3 very skewed (scale 0.2)
};

std::vector<uint8_t> SymbolsFor(const Case& c, uint32_t seed) {
  switch (c.kind) {
    case 0: return LaplaceSymbols(c.n, 3.0, 64, seed);
    case 1: return UniformSymbols(c.n, 256, seed);
    case 2: return std::vector<uint8_t>(c.n, 5);
    default: return LaplaceSymbols(c.n, 0.2, 16, seed);
  }
}

TEST(Rans, RoundTripsMatchTheReferenceCoder) {
  const size_t lengths[] = {0, 1, 2, 31, 32, 33, 255, 256, 257, 1000, 4095, 20011};
  const size_t periods[] = {1, 3, 32, 192, 250};
  uint32_t seed = 1;
  for (size_t n : lengths) {
    for (size_t period : periods) {
      for (int kind = 0; kind < 4; ++kind) {
        const Case c{n, period, kind};
        SCOPED_TRACE("n=" + std::to_string(n) + " period=" + std::to_string(period) + " kind=" +
                     std::to_string(kind));
        const auto symbols = SymbolsFor(c, seed++);
        const auto models = ModelsFor(symbols, period, kind == 1 ? 256 : 64);
        const auto ptrs = Pointers(models);
        std::vector<uint8_t> stream = {0xAA};  // RansEncode appends
        ASSERT_TRUE(RansEncode(symbols.data(), n, ptrs.data(), period, &stream).ok());
        ASSERT_EQ(stream[0], 0xAA);
        stream.erase(stream.begin());
        const ReferenceTables tables(ptrs);
        ASSERT_EQ(stream, ReferenceEncode(symbols, tables));
        for (Path path : kAllPaths) {
          SCOPED_TRACE(PathName(path));
          std::vector<uint8_t> decoded(n, 0xEE);
          const Status st = Decode(path, stream, ptrs, &decoded);
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_EQ(decoded, symbols);
        }
        std::vector<uint8_t> reference(n);
        ASSERT_TRUE(ReferenceDecode(stream, tables, &reference));
        ASSERT_EQ(reference, symbols);
      }
    }
  }
}

TEST(Rans, ExtremeFrequenciesRoundTrip) {
  // freq 1 beside 4095 (the largest and smallest steps of the state), and 255 symbols of freq 1.
  std::vector<uint16_t> two = {4095, 1};
  std::vector<uint16_t> flat(256, 1);
  flat[200] = 4096 - 255;
  const RansModel a = RansModel::FromFrequencies(two.data(), 2).value();
  const RansModel b = RansModel::FromFrequencies(flat.data(), 256).value();
  const std::vector<const RansModel*> ptrs = {&a, &b, &a};
  std::mt19937 rng(17);
  std::vector<uint8_t> symbols(30011);
  for (size_t i = 0; i < symbols.size(); ++i) {
    const bool rare = rng() % 50 == 0;
    symbols[i] = i % 3 == 1 ? static_cast<uint8_t>(rare ? rng() % 256 : 200) : static_cast<uint8_t>(rare);
  }
  std::vector<uint8_t> stream;
  ASSERT_TRUE(RansEncode(symbols.data(), symbols.size(), ptrs.data(), 3, &stream).ok());
  ASSERT_EQ(stream, ReferenceEncode(symbols, ReferenceTables(ptrs)));
  for (Path path : kAllPaths) {
    std::vector<uint8_t> decoded(symbols.size());
    ASSERT_TRUE(Decode(path, stream, ptrs, &decoded).ok()) << PathName(path);
    ASSERT_EQ(decoded, symbols) << PathName(path);
  }
}

TEST(Rans, SizeIsCloseToTheIdeal) {
  for (int kind : {0, 1, 3}) {
    for (size_t period : {size_t{1}, size_t{192}}) {
      const size_t n = 192 * 1024;
      const auto symbols = SymbolsFor({n, period, kind}, 99);
      const auto models = ModelsFor(symbols, period, kind == 1 ? 256 : 64);
      const auto ptrs = Pointers(models);
      std::vector<uint8_t> stream;
      ASSERT_TRUE(RansEncode(symbols.data(), n, ptrs.data(), period, &stream).ok());
      const double ideal = RansIdealBits(symbols.data(), n, ptrs.data(), period);
      // Per lane the final state costs 32 bits, of which the 16 of the initial state carry nothing.
      const double bound = ideal * 1.001 + 32.0 * kLanes;
      EXPECT_LE(8.0 * stream.size(), bound) << "kind " << kind << " period " << period << " ideal " << ideal;
      EXPECT_GE(8.0 * stream.size(), ideal);
    }
  }
}

TEST(Rans, IdealBitsIsTheSumOfCosts) {
  const auto symbols = LaplaceSymbols(1000, 2.0, 32, 5);
  const auto models = ModelsFor(symbols, 7, 32);
  const auto ptrs = Pointers(models);
  double expected = 0;
  for (size_t i = 0; i < symbols.size(); ++i) {
    expected += -std::log2(models[i % 7].frequencies()[symbols[i]] / 4096.0);
  }
  EXPECT_NEAR(RansIdealBits(symbols.data(), symbols.size(), ptrs.data(), 7), expected, 1e-6);
  const uint8_t unseen = 40;  // past the alphabet of 32
  EXPECT_TRUE(std::isinf(RansIdealBits(&unseen, 1, ptrs.data(), 7)));
}

TEST(Rans, EncodingAZeroFrequencySymbolNamesTheIndex) {
  std::vector<uint8_t> symbols(100, 1);
  symbols[57] = 3;
  std::vector<uint32_t> counts = {0, 10, 5, 0};
  const RansModel model = RansModel::FromCounts(counts.data(), 4).value();
  const RansModel* ptr = &model;
  std::vector<uint8_t> out = {1, 2, 3};
  const Status st = RansEncode(symbols.data(), symbols.size(), &ptr, 1, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("index 57"), std::string::npos) << st.message();
  EXPECT_EQ(out, (std::vector<uint8_t>{1, 2, 3}));
}

// Every decoder path on a corrupt stream: no crash, the same verdict and (when OK) the same symbols, all
// inside the alphabet.
void ExpectSameVerdict(const std::vector<uint8_t>& stream, const std::vector<const RansModel*>& ptrs,
                       size_t n, int alphabet, bool* ok) {
  std::vector<uint8_t> first(n);
  const Status s0 = Decode(Path::kBest, stream, ptrs, &first);
  for (Path path : kAllPaths) {
    std::vector<uint8_t> other(n);
    const Status st = Decode(path, stream, ptrs, &other);
    ASSERT_EQ(s0.code(), st.code()) << PathName(path) << ": " << s0.ToString() << " vs " << st.ToString();
    ASSERT_EQ(s0.message(), st.message()) << PathName(path);
    if (s0.ok()) {
      ASSERT_EQ(first, other) << PathName(path);
    }
  }
  if (s0.ok()) {
    for (uint8_t s : first) ASSERT_LT(s, alphabet);
  } else {
    ASSERT_EQ(s0.code(), StatusCode::kCorruptData) << s0.ToString();
  }
  *ok = s0.ok();
}

TEST(Rans, EveryTruncationIsAnError) {
  const size_t n = 700, period = 3;
  const auto [symbols, models, ptrs, stream, encoded] = EncodeLaplace(n, period, 2.0, 32, 21);
  ASSERT_TRUE(encoded.ok()) << encoded.ToString();
  for (size_t len = 0; len < stream.size(); ++len) {
    // An exact-size copy, so that ASan sees any read past the end.
    std::vector<uint8_t> cut(stream.begin(), stream.begin() + static_cast<ptrdiff_t>(len));
    bool ok = true;
    ExpectSameVerdict(cut, ptrs, n, 32, &ok);
    EXPECT_FALSE(ok) << "length " << len;
  }
}

// The size of a plain stream's header (docs/rans.md, "Stream layout"): its tail's group count and the
// header's bits, of which *bits_used before the padding.
size_t HeaderBytes(const std::vector<uint8_t>& stream, size_t n, size_t* bits_used) {
  size_t pos = n >= kLanes ? 1 : 0;
  const size_t tail = n >= kLanes ? stream.at(0) : 0;
  const bool whole = tail > 0 && tail == (n + kLanes - 1) / kLanes;
  std::vector<int> k(kLanes);
  std::vector<uint64_t> x(kLanes);
  EXPECT_TRUE(ReferenceReadHeader(stream, &pos, tail > 0 && !whole ? &k : nullptr, std::min<size_t>(n, kLanes), whole,
                                  &x, bits_used));
  return pos;
}

TEST(Rans, TrailingBytesAndBadStatesAreErrors) {
  const size_t n = 5000, period = 192;
  const auto [symbols, models, ptrs, stream, encoded] = EncodeLaplace(n, period, 2.0, 32, 23);
  ASSERT_TRUE(encoded.ok()) << encoded.ToString();
  std::vector<uint8_t> out(n);

  auto longer = stream;
  longer.push_back(0);
  longer.push_back(0);
  Status st = Decode(Path::kBest, longer, ptrs, &out);
  EXPECT_EQ(st.code(), StatusCode::kCorruptData);
  EXPECT_NE(st.message().find("left over"), std::string::npos) << st.message();

  // Every header holds states in [2^16, 2^32); one cut short, or with a spare bit set, is refused.
  for (size_t cut : {size_t{0}, size_t{3}, size_t{8}, size_t{20}}) {
    const std::vector<uint8_t> short_header(stream.begin(), stream.begin() + cut);
    st = Decode(Path::kBest, short_header, ptrs, &out);
    EXPECT_EQ(st.code(), StatusCode::kCorruptData);
    EXPECT_NE(st.message().find("header"), std::string::npos) << st.message();
  }
  size_t bits_used = 0;
  const size_t header = HeaderBytes(stream, n, &bits_used);
  auto spare = stream;
  spare[header - 1] ^= 0x80;  // a padding bit, or the last state's top stored bit: refused either way
  st = Decode(Path::kBest, spare, ptrs, &out);
  EXPECT_EQ(st.code(), StatusCode::kCorruptData);
  // Streams of fewer symbols than lanes (no tail): a set padding bit is named.
  for (size_t lanes = 1; lanes < kLanes; ++lanes) {
    const std::vector<uint8_t> few(symbols.begin(), symbols.begin() + static_cast<ptrdiff_t>(lanes));
    std::vector<uint8_t> few_stream;
    ASSERT_TRUE(RansEncode(few.data(), few.size(), ptrs.data(), period, &few_stream).ok());
    const size_t few_header = HeaderBytes(few_stream, lanes, &bits_used);
    if (bits_used % 8 == 0) continue;
    few_stream[few_header - 1] ^= 0x80;
    std::vector<uint8_t> few_out(few.size());
    st = Decode(Path::kBest, few_stream, ptrs, &few_out);
    EXPECT_NE(st.message().find("padding bits"), std::string::npos) << st.message();
  }

  // A different but valid initial state is refused by the final-state or tail checks, or, where the
  // change makes the valid stream of other symbols (docs/rans.md, "Tail"), decodes to those.
  for (size_t byte = header - 8; byte < header; ++byte) {
    auto shifted = stream;
    shifted[byte] ^= 1;  // a bit of the last lanes' states
    st = Decode(Path::kBest, shifted, ptrs, &out);
    if (st.ok()) EXPECT_NE(out, symbols) << byte;
    else EXPECT_EQ(st.code(), StatusCode::kCorruptData) << byte;
  }

  std::vector<uint8_t> none;
  EXPECT_EQ(Decode(Path::kBest, none, ptrs, &out).code(), StatusCode::kCorruptData);
  std::vector<uint8_t> empty_out;
  EXPECT_EQ(Decode(Path::kBest, stream, ptrs, &empty_out).code(), StatusCode::kCorruptData);
}

TEST(Rans, BitFlipsNeverCrashAndAllPathsAgree) {
  const size_t n = 1200, period = 192;
  const auto [symbols, models, ptrs, stream, encoded] = EncodeLaplace(n, period, 1.5, 32, 31);
  ASSERT_TRUE(encoded.ok()) << encoded.ToString();
  int accepted = 0;
  for (size_t bit = 0; bit < 8 * stream.size(); ++bit) {
    auto flipped = stream;
    flipped[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    bool ok = false;
    ExpectSameVerdict(flipped, ptrs, n, 32, &ok);
    accepted += ok;
  }
  // A flip can turn the stream into the valid coding of other symbols: the final-state check catches most
  // (about 11 % get through here), and the container's CRC32C catches every single flip. The check is
  // weaker than 16 bits a lane because the lanes end a tail at 1, and a damaged state that falls below
  // 4096 in the tail sinks to 0 or 1 whatever it decodes (docs/rans.md, "Tail"); without tails about 1 %
  // got through.
  EXPECT_LE(accepted, static_cast<int>(8 * stream.size() / 5));
}

TEST(Rans, GarbageNeverCrashesAndAllPathsAgree) {
  std::mt19937 rng(41);
  const auto symbols = LaplaceSymbols(4096, 2.0, 64, 43);
  const auto models = ModelsFor(symbols, 192, 64);
  const auto ptrs = Pointers(models);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = rng() % 5000;
    std::vector<uint8_t> garbage(rng() % 6000);
    for (auto& b : garbage) b = static_cast<uint8_t>(rng());
    bool ok = false;
    ExpectSameVerdict(garbage, ptrs, n, 64, &ok);
  }
}

TEST(Rans, StreamsDecodedTogetherDecodeLikeSingleStreams) {
  // Unequal lengths and tables, so that the streams run out of whole groups at different times; then
  // each corrupt in turn: its error is the single decode's, and the others still decode. With every
  // kernel, and with fewer streams than the kernels take at once.
  const std::vector<size_t> lengths = {49152, 20011, 33000, 777};
  const std::vector<size_t> periods = {192, 5, 64, 3};
  std::vector<std::vector<uint8_t>> symbols, streams;
  std::vector<std::vector<RansModel>> models;
  for (size_t i = 0; i < lengths.size(); ++i) {
    symbols.push_back(LaplaceSymbols(lengths[i], 0.7 + static_cast<double>(i), 64, 51 + static_cast<uint32_t>(i)));
    models.push_back(ModelsFor(symbols[i], periods[i], 64));
  }
  std::vector<std::vector<const RansModel*>> ptrs;
  for (size_t i = 0; i < lengths.size(); ++i) {
    ptrs.push_back(Pointers(models[i]));
    streams.emplace_back();
    ASSERT_TRUE(RansEncode(symbols[i].data(), lengths[i], ptrs[i].data(), periods[i], &streams[i]).ok());
  }
  for (const char* disable : {static_cast<const char*>(nullptr), "KVSTREAM_DISABLE_AVX512", "KVSTREAM_DISABLE_AVX2"}) {
    for (size_t n : {size_t{2}, size_t{3}, size_t{4}}) {
      for (int corrupt = -1; corrupt < static_cast<int>(n); ++corrupt) {
        SCOPED_TRACE(std::string(disable ? disable : "best kernel") + ", " + std::to_string(n) + " streams, corrupt " +
                     std::to_string(corrupt));
        auto in = streams;
        if (corrupt >= 0 && corrupt % 2 == 0) in[corrupt].erase(in[corrupt].end() - 2, in[corrupt].end());
        if (corrupt >= 0 && corrupt % 2 == 1) in[corrupt].resize(5);  // a header cut short
        std::vector<std::vector<uint8_t>> out;
        std::vector<RansDecodeJob> jobs;
        for (size_t i = 0; i < n; ++i) out.emplace_back(lengths[i]);
        for (size_t i = 0; i < n; ++i) {
          jobs.push_back({in[i].data(), in[i].size(), ptrs[i].data(), periods[i], out[i].data(), lengths[i]});
        }
        std::vector<Status> st(n);
        {
          const ScopedEnv env(disable);
          RansDecodeTogether(jobs.data(), n, st.data());
        }
        for (size_t i = 0; i < n; ++i) {
          std::vector<uint8_t> single(lengths[i]);
          const Status want = Decode(Path::kPortable, in[i], ptrs[i], &single);
          EXPECT_EQ(st[i].ToString(), want.ToString()) << "stream " << i;
          EXPECT_EQ(st[i].ok(), static_cast<int>(i) != corrupt) << "stream " << i;
          if (st[i].ok()) {
            EXPECT_EQ(out[i], symbols[i]) << "stream " << i;
          }
        }
      }
    }
  }
}

// Tails (docs/rans.md, "Tail"): a stream's last groups are coded first from states of 1, so a stream costs
// its ideal size plus a few bits a lane rather than the 16 bits of starting from 2^16; the encoder's tail
// is the only one the decoder accepts; lanes whose states would leave 64 bits before every lane reaches
// 2^16 give a stream without a tail.
TEST(Rans, TailsSaveTheInitialStatesAndAreChecked) {
  const size_t n = 20000, period = 192;
  const auto [symbols, models, ptrs, stream, encoded] = EncodeLaplace(n, period, 1.0, 32, 61);
  ASSERT_TRUE(encoded.ok()) << encoded.ToString();
  const RansTail tail = RansTailOf(symbols.data(), n, ptrs.data(), period, true);
  ASSERT_GT(tail.groups, 0u);
  EXPECT_EQ(stream[0], tail.groups);
  // Lane states carry about 27.5 bits of header each; without the tail 16 of them would be the initial
  // state's, with it a few bits of the tail's first steps.
  const double overhead_bits = 8.0 * stream.size() - RansIdealBits(symbols.data(), n, ptrs.data(), period);
  EXPECT_LT(overhead_bits, 16.0 * kLanes) << "ideal " << RansIdealBits(symbols.data(), n, ptrs.data(), period);

  std::vector<uint8_t> out(n);
  const auto refused = [&](std::vector<uint8_t> bad, const std::string& why, const std::string& says = "tail") {
    bool ok = true;
    ExpectSameVerdict(bad, ptrs, n, 32, &ok);
    EXPECT_FALSE(ok) << why;
    const Status st = Decode(Path::kBest, bad, ptrs, &out);
    EXPECT_NE(st.message().find(says), std::string::npos) << why << ": " << st.message();
  };
  for (int delta : {-1, 1}) {  // another tail length: the lanes cannot all end at 1, or the count is not the encoder's
    auto other = stream;
    other[0] = static_cast<uint8_t>(other[0] + delta);
    bool ok = true;
    ExpectSameVerdict(other, ptrs, n, 32, &ok);
    EXPECT_FALSE(ok) << delta;
  }
  const std::vector<uint8_t> few(symbols.begin(), symbols.begin() + 20 * kLanes);
  std::vector<uint8_t> few_stream;
  ASSERT_TRUE(RansEncode(few.data(), few.size(), ptrs.data(), period, &few_stream).ok());
  few_stream[0] = 21;  // more groups than the stream has
  std::vector<uint8_t> few_out(few.size());
  const Status past = Decode(Path::kBest, few_stream, ptrs, &few_out);
  EXPECT_NE(past.message().find("a tail of 21 groups in a stream of 20"), std::string::npos) << past.message();
  for (uint8_t bit : {1, 2, 4}) {  // the first lanes' word counts changed
    auto other_words = stream;
    other_words[1] ^= bit;
    refused(other_words, "word counts", "rANS stream");
  }
  refused(std::vector<uint8_t>(stream.begin(), stream.begin() + 3), "word counts cut short", "header");

  // Lane 0 codes 8 bits a symbol, the others next to nothing: lane 0 leaves 64 bits long before the others
  // reach 2^16, so there is no tail, and the stream still round-trips.
  const uint16_t sure[2] = {4095, 1};
  std::vector<uint16_t> wide(256, 16);
  const RansModel wide_model = RansModel::FromFrequencies(wide.data(), 256).value();
  const RansModel sure_model = RansModel::FromFrequencies(sure, 2).value();
  std::vector<const RansModel*> lopsided(kLanes, &sure_model);
  lopsided[0] = &wide_model;
  std::vector<uint8_t> skewed(kLanes * 40, 0);
  std::mt19937 rng(5);
  for (size_t i = 0; i < skewed.size(); i += kLanes) skewed[i] = static_cast<uint8_t>(rng());
  EXPECT_EQ(RansTailOf(skewed.data(), skewed.size(), lopsided.data(), kLanes, true).groups, 0u);
  std::vector<uint8_t> plain;
  ASSERT_TRUE(RansEncode(skewed.data(), skewed.size(), lopsided.data(), kLanes, &plain).ok());
  EXPECT_EQ(plain[0], 0);
  EXPECT_EQ(plain, ReferenceEncode(skewed, ReferenceTables(lopsided)));
  std::vector<uint8_t> back(skewed.size());
  for (Path path : kAllPaths) {
    ASSERT_TRUE(Decode(path, plain, lopsided, &back).ok()) << PathName(path);
    EXPECT_EQ(back, skewed) << PathName(path);
  }
}

// A short stream whose lanes code too little to reach 2^16 is all tail (docs/rans.md, "Tail"): its header
// holds the tail's 64-bit states and it has no words, it costs a few bits a lane over its ideal size
// instead of the 16 of starting from 2^16, the reference coder writes the same bytes, and its tail is
// checked like any other. A stream that starts from a previous stream's states is never all tail.
TEST(Rans, ShortStreamsAreAllTail) {
  const size_t period = 7;
  for (size_t n : {16, 17, 100, 160, 333}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    // Under a bit a symbol.
    const auto [symbols, models, ptrs, stream, encoded] = EncodeLaplace(n, period, 0.3, 8, static_cast<uint32_t>(70 + n));
    ASSERT_TRUE(encoded.ok()) << encoded.ToString();
    const size_t groups = (n + kLanes - 1) / kLanes;
    ASSERT_EQ(stream[0], groups);
    size_t bits_used = 0;
    EXPECT_EQ(HeaderBytes(stream, n, &bits_used), stream.size());
    const double ideal = RansIdealBits(symbols.data(), n, ptrs.data(), period);
    EXPECT_LT(8.0 * stream.size() - ideal, 8.0 * kLanes + 16) << "ideal " << ideal;
    EXPECT_EQ(stream, ReferenceEncode(symbols, ReferenceTables(ptrs)));
    std::vector<uint8_t> back(n);
    for (Path path : kAllPaths) {
      ASSERT_TRUE(Decode(path, stream, ptrs, &back).ok()) << PathName(path);
      EXPECT_EQ(back, symbols) << PathName(path);
    }
    EXPECT_EQ(RansTailOf(symbols.data(), n, ptrs.data(), period, false).groups, 0u);

    bool ok = true;
    for (size_t len = 0; len < stream.size(); ++len) {
      ExpectSameVerdict(std::vector<uint8_t>(stream.begin(), stream.begin() + static_cast<ptrdiff_t>(len)), ptrs, n, 8,
                        &ok);
      EXPECT_FALSE(ok) << "cut to " << len;
    }
    auto longer = stream;
    longer.insert(longer.end(), {0, 0});
    ExpectSameVerdict(longer, ptrs, n, 8, &ok);
    EXPECT_FALSE(ok);
    if (groups > 1) {
      auto shorter_tail = stream;
      --shorter_tail[0];
      ExpectSameVerdict(shorter_tail, ptrs, n, 8, &ok);
      EXPECT_FALSE(ok);
    }
  }
}

// Chained streams (docs/rans.md): the first ends in the states the second starts from; its header stores
// all 16 lanes, the second none. Every length pairing (empty, fewer symbols than lanes, vector-kernel long)
// round-trips, alone and decoded together with other streams; a change to either stream is caught by the
// second's final states (or its length checks), and the plain coder is the chain's special case.
TEST(Rans, ChainedStreamsHandTheirStatesOn) {
  const size_t lengths[] = {0, 5, 16, 2000};
  uint32_t seed = 900;
  for (size_t first_n : lengths) {
    for (size_t second_n : lengths) {
      SCOPED_TRACE("first " + std::to_string(first_n) + ", second " + std::to_string(second_n));
      const auto first = LaplaceSymbols(first_n, 3.0, 64, seed++), second = LaplaceSymbols(second_n, 0.7, 16, seed++);
      const auto first_models = ModelsFor(first.empty() ? std::vector<uint8_t>{1} : first, 3, 64);
      const auto second_models = ModelsFor(second.empty() ? std::vector<uint8_t>{1} : second, 5, 16);
      const auto first_ptrs = Pointers(first_models), second_ptrs = Pointers(second_models);
      std::vector<uint8_t> a, b;
      RansLanes handover;
      ASSERT_TRUE(RansEncode(second.data(), second_n, second_ptrs.data(), 5, &b, nullptr, &handover).ok());
      ASSERT_TRUE(RansEncode(first.data(), first_n, first_ptrs.data(), 3, &a, &handover).ok());
      ASSERT_GE(a.size(), (kLanes / 2) + 2u * kLanes);  // every lane's state: its length and 16 bits or more
      if (second_n == 0) {
        EXPECT_TRUE(b.empty());
        for (uint32_t x : handover.state) EXPECT_EQ(x, 1u << 16);
      }
      for (bool together : {false, true}) {
        std::vector<uint8_t> got_first(first_n, 0xEE), got_second(second_n, 0xEE);
        RansLanes ended;
        RansDecodeJob jobs[2] = {{a.data(), a.size(), first_ptrs.data(), 3, got_first.data(), first_n, nullptr, &ended},
                                 {}};
        Status st[2];
        RansDecodeTogether(jobs, 1, st);
        ASSERT_TRUE(st[0].ok()) << st[0].ToString();
        for (size_t j = 0; j < kLanes; ++j) ASSERT_EQ(ended.state[j], handover.state[j]) << j;
        jobs[1] = {b.data(), b.size(), second_ptrs.data(), 5, got_second.data(), second_n, &ended, nullptr};
        const auto& companion = TheCompanions()[0];
        std::vector<uint8_t> companion_out(companion.symbols.size());
        jobs[0] = {companion.stream.data(), companion.stream.size(), companion.ptrs.data(), 1, companion_out.data(),
                   companion.symbols.size()};
        RansDecodeTogether(together ? jobs : jobs + 1, together ? 2 : 1, st);
        const Status& second_status = st[together ? 1 : 0];
        ASSERT_TRUE(second_status.ok()) << second_status.ToString();
        EXPECT_EQ(got_first, first);
        EXPECT_EQ(got_second, second);
      }
      // Damage to the second stream shows in its end states or its length.
      if (b.size() >= 8) {
        std::mt19937 rng(seed);
        int caught = 0;
        for (int i = 0; i < 50; ++i) {
          std::vector<uint8_t> bad = b;
          bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          std::vector<uint8_t> out(second_n);
          RansDecodeJob job{bad.data(), bad.size(), second_ptrs.data(), 5, out.data(), second_n, &handover, nullptr};
          Status st_bad;
          RansDecodeTogether(&job, 1, &st_bad);
          caught += !st_bad.ok();
        }
        EXPECT_GE(caught, 40);  // a tail's end check is weaker (BitFlipsNeverCrashAndAllPathsAgree)
      }
    }
  }
}

TEST(Rans, TooManyStreamsTogetherAreRefused) {
  std::vector<RansDecodeJob> jobs(kRansMaxTogether + 1);
  std::vector<Status> st(jobs.size());
  RansDecodeTogether(jobs.data(), jobs.size(), st.data());
  for (const Status& s : st) EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
}

}  // namespace
}  // namespace kvstream::codec
