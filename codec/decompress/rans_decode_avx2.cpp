// AVX2 rANS decoding: the 16 lanes of a group as two vectors of eight states, one or two streams at a
// time. Per vector and group: one gather from the lanes' slot tables, the state update, and a
// renormalisation that hands the next 16-bit words of the stream to the lanes that need one, in lane
// order (exactly the scalar order).
#include "codec/decompress/rans_group_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include <array>

#include "codec/common/rans.h"

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

// The symbols (low bytes) of a group's two entry vectors, in lane order.
inline __m128i Symbols(__m256i e0, __m256i e1) {
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  const __m256i words = _mm256_packus_epi32(_mm256_and_si256(e0, low_byte), _mm256_and_si256(e1, low_byte));
  const __m256i bytes = _mm256_packus_epi16(words, words);
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

// One kernel for one or two streams: the loops over streams and vectors have constant bounds and unroll.
// The cursors are copied into locals: the vector stores to out may alias them.
template <int kStreams>
void DecodeGroups(RansGroupCursor* const* streams) {
  constexpr ptrdiff_t kMaxGroupBytes = 2 * kRansLanes;
  RansGroupCursor c[kStreams];
  __m256i x[kStreams][kVectors];
  size_t cycle[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    c[s] = *streams[s];
    for (int v = 0; v < kVectors; ++v) x[s][v] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c[s].state + 8 * v));
    cycle[s] = c[s].group % c[s].cycle_groups;
  }
  for (;;) {
    bool more = true;
    for (int s = 0; s < kStreams; ++s) more = more && c[s].group < c[s].group_end && c[s].end - c[s].pos >= kMaxGroupBytes;
    if (!more) break;
    __m256i e[kStreams][kVectors];
    for (int s = 0; s < kStreams; ++s) {
      const int32_t* offsets = c[s].lane_offsets + cycle[s] * kRansLanes;
      for (int v = 0; v < kVectors; ++v) e[s][v] = Gather(c[s].table_base, offsets + 8 * v, x[s][v]);
    }
    for (int s = 0; s < kStreams; ++s) {
      for (int v = 0; v < kVectors; ++v) x[s][v] = Advance(x[s][v], e[s][v]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c[s].out + c[s].group * kRansLanes), Symbols(e[s][0], e[s][1]));
    }
    for (int s = 0; s < kStreams; ++s) {
      for (int v = 0; v < kVectors; ++v) x[s][v] = Renormalise(x[s][v], c[s].pos);
      ++c[s].group;
      if (++cycle[s] == c[s].cycle_groups) cycle[s] = 0;
    }
  }
  for (int s = 0; s < kStreams; ++s) {
    for (int v = 0; v < kVectors; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(c[s].state + 8 * v), x[s][v]);
    streams[s]->pos = c[s].pos;
    streams[s]->group = c[s].group;
  }
}

}  // namespace

void RansDecodeGroupsAvx2(RansGroupCursor* const* streams, size_t n) {
  for (size_t i = 0; i < n; i += 2) {
    if (i + 1 < n) {
      DecodeGroups<2>(streams + i);
    } else {
      DecodeGroups<1>(streams + i);
    }
  }
}

}  // namespace kvstream::codec
#endif
