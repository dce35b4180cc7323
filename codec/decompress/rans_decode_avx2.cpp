// AVX2 rANS decoding: the 32 lanes of a group as four vectors of eight states. Per vector and group: one
// gather from the lanes' slot tables, the state update, and a renormalisation that hands the next
// 16-bit words of the stream to the lanes that need one, in lane order (exactly the scalar order).
#include "codec/decompress/rans_decode_avx2.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <array>

#include "codec/common/rans.h"

namespace kvstream::codec {
namespace {

static_assert(kRansLanes == 32, "the kernel holds a group in four 8-lane vectors");

// For a mask of lanes needing a word: byte j = index of the word lane j takes (its rank in the mask).
constexpr std::array<uint64_t, 256> kExpand = [] {
  std::array<uint64_t, 256> table{};
  for (int mask = 0; mask < 256; ++mask) {
    uint64_t idx = 0;
    int rank = 0;
    for (int lane = 0; lane < 8; ++lane) {
      if (mask & (1 << lane)) idx |= static_cast<uint64_t>(rank++) << (8 * lane);
    }
    table[mask] = idx;
  }
  return table;
}();

inline __m256i Gather(const uint32_t* table_base, const int32_t* offsets, __m256i x) {
  const __m256i slot = _mm256_and_si256(x, _mm256_set1_epi32(0xfff));
  const __m256i idx = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets)),
                                       _mm256_slli_epi32(slot, 2));
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(table_base), idx, 1);
}

inline __m256i Advance(__m256i x, __m256i e) {
  const __m256i freq = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(e, 8), _mm256_set1_epi32(0xfff)),
                                        _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32(x, 12)), _mm256_srli_epi32(e, 20));
}

inline __m256i Renormalise(__m256i x, const uint8_t*& pos) {
  const __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), _mm256_setzero_si256());
  const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(need)));
  const __m256i words = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos)));
  const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kExpand[mask])));
  const __m256i shifted = _mm256_or_si256(_mm256_slli_epi32(x, 16), _mm256_permutevar8x32_epi32(words, perm));
  pos += 2 * static_cast<size_t>(__builtin_popcount(mask));
  return _mm256_blendv_epi8(x, shifted, need);
}

}  // namespace

size_t RansDecodeGroupsAvx2(uint32_t* state, const uint8_t*& pos, const uint8_t* end,
                            const uint32_t* table_base, const int32_t* lane_offsets, size_t cycle_groups,
                            size_t group, size_t group_end, uint8_t* out) {
  __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state));
  __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + 8));
  __m256i x2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + 16));
  __m256i x3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(state + 24));
  const __m256i byte_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  const uint8_t* p = pos;
  size_t cycle = group % cycle_groups;
  constexpr ptrdiff_t kMaxGroupBytes = 2 * kRansLanes;
  while (group < group_end && end - p >= kMaxGroupBytes) {
    const int32_t* offsets = lane_offsets + cycle * kRansLanes;
    const __m256i e0 = Gather(table_base, offsets, x0);
    const __m256i e1 = Gather(table_base, offsets + 8, x1);
    const __m256i e2 = Gather(table_base, offsets + 16, x2);
    const __m256i e3 = Gather(table_base, offsets + 24, x3);
    x0 = Advance(x0, e0);
    x1 = Advance(x1, e1);
    x2 = Advance(x2, e2);
    x3 = Advance(x3, e3);
    const __m256i s01 = _mm256_packus_epi32(_mm256_and_si256(e0, low_byte), _mm256_and_si256(e1, low_byte));
    const __m256i s23 = _mm256_packus_epi32(_mm256_and_si256(e2, low_byte), _mm256_and_si256(e3, low_byte));
    const __m256i symbols = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(s01, s23), byte_order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + group * kRansLanes), symbols);
    x0 = Renormalise(x0, p);
    x1 = Renormalise(x1, p);
    x2 = Renormalise(x2, p);
    x3 = Renormalise(x3, p);
    ++group;
    if (++cycle == cycle_groups) cycle = 0;
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(state), x0);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + 8), x1);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + 16), x2);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(state + 24), x3);
  pos = p;
  return group;
}

}  // namespace kvstream::codec
#endif
