// fp16 row conversions with a run-time choice of F16C (see the header).
#include "common/half_rows.h"

#include "common/half.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define KVSTREAM_HAVE_F16C_PATH 1
#endif

namespace kvstream {
namespace {

#if defined(KVSTREAM_HAVE_F16C_PATH)
// CPUID.1:ECX bits 27 (OSXSAVE), 28 (AVX), 29 (F16C), and the OS saving YMM state (XCR0 bits 1-2).
// (clang 14's __builtin_cpu_supports does not know "f16c".)
bool HasF16c() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    const unsigned need = (1u << 27) | (1u << 28) | (1u << 29);
    if ((c & need) != need) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6u) == 6u;
  }();
  return has;
}

__attribute__((target("avx,f16c"))) void HalfRowToFloatF16c(const uint16_t* in, float* out, int64_t n) {
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    _mm256_storeu_ps(out + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + c))));
  }
  for (; c < n; ++c) out[c] = HalfToFloat(in[c]);
}

__attribute__((target("avx,f16c"))) void FloatRowToHalfF16c(const float* in, uint16_t* out, int64_t n) {
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + c), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + c), h);
  }
  for (; c < n; ++c) out[c] = FloatToHalf(in[c]);
}
#endif

}  // namespace

void HalfRowToFloat(const uint16_t* in, float* out, int64_t n) {
#if defined(KVSTREAM_HAVE_F16C_PATH)
  if (HasF16c()) return HalfRowToFloatF16c(in, out, n);
#endif
  for (int64_t c = 0; c < n; ++c) out[c] = HalfToFloat(in[c]);
}

void FloatRowToHalf(const float* in, uint16_t* out, int64_t n) {
#if defined(KVSTREAM_HAVE_F16C_PATH)
  if (HasF16c()) return FloatRowToHalfF16c(in, out, n);
#endif
  for (int64_t c = 0; c < n; ++c) out[c] = FloatToHalf(in[c]);
}

}  // namespace kvstream
