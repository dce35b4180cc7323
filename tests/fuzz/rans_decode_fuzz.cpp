// libFuzzer target for the rANS decoder. The input's first bytes choose the symbol count, the period
// and the models; the rest is the stream. Checks, beyond "no crash and no out-of-bounds access": the
// AVX2, portable and paired paths agree, decoded symbols have non-zero frequency, and a stream the decoder accepts
// is re-encoded to exactly the same bytes (decoding is the inverse of encoding on every accepted input).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "codec/common/rans.h"

using kvstream::codec::RansModel;

namespace {

// Layout: u8 period selector, u16 LE symbol count, then per model one byte of alphabet size (1..16)
// and that many count bytes, then the stream.
constexpr size_t kPeriods[] = {1, 2, 3, 7, 32, 33, 192, 250};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t period = kPeriods[data[0] % (sizeof kPeriods / sizeof kPeriods[0])];
  const size_t n = data[1] | (size_t{data[2]} << 8);
  size_t pos = 3;
  // Models the input runs out before all code symbol 0 only: one instance serves them all (building a
  // model's tables is most of an input's time under the sanitizers).
  static const RansModel symbol_zero_only = [] {
    const uint32_t one[1] = {1};
    return RansModel::FromCounts(one, 1).value();
  }();
  std::vector<RansModel> models;
  models.reserve(period);
  std::vector<const RansModel*> ptrs;
  for (size_t m = 0; m < period; ++m) {
    if (pos >= size) {
      ptrs.push_back(&symbol_zero_only);
      continue;
    }
    uint32_t counts[16] = {1};
    const int alphabet = 1 + data[pos++] % 16;
    for (int s = 0; s < alphabet && pos < size; ++s) counts[s] = data[pos++];
    auto model = RansModel::FromCounts(counts, alphabet);
    if (!model.ok()) {
      counts[0] = 1;
      model = RansModel::FromCounts(counts, alphabet);
      if (!model.ok()) std::abort();
    }
    models.push_back(std::move(model).value());
    ptrs.push_back(&models.back());
  }
  // An exact-size copy of the stream so that the sanitizer sees any read past its end.
  const std::vector<uint8_t> stream(data + pos, data + size);

  std::vector<uint8_t> fast(n), scalar(n);
  const auto st_fast = kvstream::codec::RansDecode(stream.data(), stream.size(), ptrs.data(), period, fast.data(), n);
  setenv("KVSTREAM_DISABLE_AVX2", "1", 1);
  const auto st_scalar = kvstream::codec::RansDecode(stream.data(), stream.size(), ptrs.data(), period, scalar.data(), n);
  unsetenv("KVSTREAM_DISABLE_AVX2");
  if (st_fast.code() != st_scalar.code() || st_fast.message() != st_scalar.message()) std::abort();
  // The stream decoded together with a copy cut short by a word: each must get exactly what it gets
  // alone.
  const std::vector<uint8_t> shorter(stream.begin(), stream.end() - (stream.size() >= 2 ? 2 : 0));
  std::vector<uint8_t> paired(n), paired_short(n), alone_short(n);
  const kvstream::codec::RansDecodeJob jobs[2] = {{stream.data(), stream.size(), ptrs.data(), period, paired.data(), n},
                                                  {shorter.data(), shorter.size(), ptrs.data(), period, paired_short.data(), n}};
  kvstream::Status together[2];
  kvstream::codec::RansDecodeTogether(jobs, 2, together);
  const kvstream::Status& st_paired = together[0];
  const kvstream::Status& st_paired_short = together[1];
  const auto st_short = kvstream::codec::RansDecode(shorter.data(), shorter.size(), ptrs.data(), period, alone_short.data(), n);
  if (st_paired.ToString() != st_fast.ToString() || st_paired_short.ToString() != st_short.ToString()) std::abort();
  if (st_short.ok() && paired_short != alone_short) std::abort();
  if (!st_fast.ok()) return 0;
  if (fast != scalar || paired != fast) std::abort();
  for (size_t i = 0; i < n; ++i) {
    const RansModel& model = *ptrs[i % period];
    if (fast[i] >= model.alphabet() || model.frequencies()[fast[i]] == 0) std::abort();
  }
  std::vector<uint8_t> again;
  if (!kvstream::codec::RansEncode(fast.data(), n, ptrs.data(), period, &again).ok()) std::abort();
  if (again != stream) std::abort();
  return 0;
}
