// AVX-512 rANS decoding: a group's 16 lanes are one vector of states, up to four streams at a time. Per
// stream and group: one gather from the lanes' slot tables, the state update, and a renormalisation that
// expands the stream's next 16-bit words into the lanes that need one, in lane order (exactly the scalar
// order). Only AVX-512F instructions are used (the dispatch asks for BW too, for the transform kernel).
#include "codec/decompress/rans_group_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "codec/common/rans.h"

namespace kvstream::codec {
namespace {

static_assert(kRansLanes == 16, "a group is one 16-lane vector");

inline __m512i Gather(const uint32_t* table_base, const int32_t* offsets, __m512i x) {
  const __m512i slot = _mm512_and_si512(x, _mm512_set1_epi32(0xfff));
  const __m512i idx = _mm512_add_epi32(_mm512_loadu_si512(offsets), _mm512_slli_epi32(slot, 2));
  return _mm512_i32gather_epi32(idx, table_base, 1);
}

inline __m512i Advance(__m512i x, __m512i e) {
  const __m512i freq = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(0xfff)),
                                        _mm512_set1_epi32(1));
  return _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(x, 12)), _mm512_srli_epi32(e, 20));
}

// Lanes below 2^16 take the next words of the stream, the lowest such lane the first word. The load
// reads 32 bytes at pos: the kernel runs only while that many remain.
inline __m512i Renormalise(__m512i x, const uint8_t*& pos) {
  const __mmask16 need = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(1 << 16));
  const __m512i words = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos)));
  pos += 2 * static_cast<size_t>(__builtin_popcount(need));
  return _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), _mm512_maskz_expand_epi32(need, words));
}

// One kernel for one to four streams: the loop over streams has a constant bound and unrolls. The cursors
// are copied into locals: the vector stores to out may alias them.
template <int kStreams>
void DecodeGroups(RansGroupCursor* const* streams) {
  constexpr ptrdiff_t kMaxGroupBytes = 2 * kRansLanes;
  RansGroupCursor c[kStreams];
  __m512i x[kStreams];
  size_t cycle[kStreams];
  for (int s = 0; s < kStreams; ++s) {
    c[s] = *streams[s];
    x[s] = _mm512_loadu_si512(c[s].state);
    cycle[s] = c[s].group % c[s].cycle_groups;
  }
  for (;;) {
    bool more = true;
    for (int s = 0; s < kStreams; ++s) more = more && c[s].group < c[s].group_end && c[s].end - c[s].pos >= kMaxGroupBytes;
    if (!more) break;
    __m512i e[kStreams];
    for (int s = 0; s < kStreams; ++s) e[s] = Gather(c[s].table_base, c[s].lane_offsets + cycle[s] * kRansLanes, x[s]);
    for (int s = 0; s < kStreams; ++s) {
      x[s] = Advance(x[s], e[s]);
      // The symbol is the entry's low byte: a truncating narrow.
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c[s].out + c[s].group * kRansLanes), _mm512_cvtepi32_epi8(e[s]));
    }
    for (int s = 0; s < kStreams; ++s) {
      x[s] = Renormalise(x[s], c[s].pos);
      ++c[s].group;
      if (++cycle[s] == c[s].cycle_groups) cycle[s] = 0;
    }
  }
  for (int s = 0; s < kStreams; ++s) {
    _mm512_storeu_si512(c[s].state, x[s]);
    streams[s]->pos = c[s].pos;
    streams[s]->group = c[s].group;
  }
}

}  // namespace

void RansDecodeGroupsAvx512(RansGroupCursor* const* streams, size_t n) {
  static_assert(kRansMaxTogether == 4, "one kernel per stream count");
  switch (n) {
    case 1: return DecodeGroups<1>(streams);
    case 2: return DecodeGroups<2>(streams);
    case 3: return DecodeGroups<3>(streams);
    case 4: return DecodeGroups<4>(streams);
    default: return;
  }
}

}  // namespace kvstream::codec
#endif
