// AVX2 rANS decoding: the shared group loop (rans_group_loop.h) with the 16 lanes of a group as two vectors
// of eight states, streams in pairs. Per vector and group: one gather from the lanes' slot tables, the
// state update, and a renormalisation that hands the next 16-bit words of the stream to the lanes that
// need one, in lane order (exactly the scalar order).
#include "codec/decompress/rans_group_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <array>

#include "codec/common/rans.h"
#include "codec/decompress/rans_group_loop.h"

namespace kvstream::codec {
namespace {

constexpr int kVectors = kRansLanes / 8;
static_assert(kVectors == 2, "a group is two 8-lane vectors (the symbol store packs two)");

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

inline __m256i GatherVector(const uint32_t* table_base, const int32_t* offsets, __m256i x) {
  const __m256i slot = _mm256_and_si256(x, _mm256_set1_epi32(0xfff));
  const __m256i idx = _mm256_add_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(offsets)),
                                       _mm256_slli_epi32(slot, 2));
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(table_base), idx, 1);
}

inline __m256i AdvanceVector(__m256i x, __m256i e) {
  const __m256i freq = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(e, 8), _mm256_set1_epi32(0xfff)),
                                        _mm256_set1_epi32(1));
  return _mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32(x, 12)), _mm256_srli_epi32(e, 20));
}

inline __m256i RenormaliseVector(__m256i x, const uint8_t*& pos) {
  const __m256i need = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), _mm256_setzero_si256());
  const unsigned mask = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(need)));
  const __m256i words = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(pos)));
  const __m256i perm = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(kExpand[mask])));
  const __m256i shifted = _mm256_or_si256(_mm256_slli_epi32(x, 16), _mm256_permutevar8x32_epi32(words, perm));
  pos += 2 * static_cast<size_t>(__builtin_popcount(mask));
  return _mm256_blendv_epi8(x, shifted, need);
}

// A group is two vectors: lanes 0-7 and 8-15.
struct Avx2Group {
  struct Group {
    __m256i v[kVectors];
  };
  static Group Load(const uint32_t* states) {
    Group g;
    for (int v = 0; v < kVectors; ++v) g.v[v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(states + 8 * v));
    return g;
  }
  static void Store(const Group& g, uint32_t* states) {
    for (int v = 0; v < kVectors; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(states + 8 * v), g.v[v]);
  }
  static Group Gather(const uint32_t* table_base, const int32_t* offsets, const Group& x) {
    Group e;
    for (int v = 0; v < kVectors; ++v) e.v[v] = GatherVector(table_base, offsets + 8 * v, x.v[v]);
    return e;
  }
  static Group Advance(const Group& x, const Group& e) {
    Group next;
    for (int v = 0; v < kVectors; ++v) next.v[v] = AdvanceVector(x.v[v], e.v[v]);
    return next;
  }
  // The entries' low bytes, in lane order.
  static void StoreSymbols(const Group& e, uint8_t* out) {
    const __m256i low_byte = _mm256_set1_epi32(0xff);
    const __m256i words = _mm256_packus_epi32(_mm256_and_si256(e.v[0], low_byte), _mm256_and_si256(e.v[1], low_byte));
    const __m256i bytes = _mm256_packus_epi16(words, words);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))));
  }
  // Lanes 0-7 take their words first: the scalar order.
  static Group Renormalise(const Group& x, const uint8_t*& pos) {
    Group next;
    for (int v = 0; v < kVectors; ++v) next.v[v] = RenormaliseVector(x.v[v], pos);
    return next;
  }
};

}  // namespace

void RansDecodeGroupsAvx2(RansGroupCursor* const* streams, size_t n) {
  for (size_t i = 0; i < n; i += 2) {
    if (i + 1 < n) {
      DecodeGroupsInLockstep<Avx2Group, 2>(streams + i);
    } else {
      DecodeGroupsInLockstep<Avx2Group, 1>(streams + i);
    }
  }
}

}  // namespace kvstream::codec
#endif
