// AVX-512 rANS decoding: the shared group loop (rans_group_loop.h) with a group's 16 lanes as one vector
// of states, up to four streams at a time. Per stream and group: one gather from the lanes' slot tables,
// the state update, and a renormalisation that expands the stream's next 16-bit words into the lanes that
// need one, in lane order (exactly the scalar order). Only AVX-512F instructions are used (the dispatch
// asks for BW too, for the transform kernel).
#include "codec/decompress/rans_group_kernels.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "codec/common/rans.h"
#include "codec/decompress/rans_group_loop.h"

namespace kvstream::codec {
namespace {

static_assert(kRansLanes == 16, "a group is one 16-lane vector");

struct Avx512Group {
  using Group = __m512i;
  static Group Load(const uint32_t* states) { return _mm512_loadu_si512(states); }
  static void Store(Group x, uint32_t* states) { _mm512_storeu_si512(states, x); }

  static Group Gather(const uint32_t* table_base, const int32_t* offsets, Group x) {
    const __m512i slot = _mm512_and_si512(x, _mm512_set1_epi32(0xfff));
    const __m512i idx = _mm512_add_epi32(_mm512_loadu_si512(offsets), _mm512_slli_epi32(slot, 2));
    return _mm512_i32gather_epi32(idx, table_base, 1);
  }

  static Group Advance(Group x, Group e) {
    const __m512i freq = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 8), _mm512_set1_epi32(0xfff)),
                                          _mm512_set1_epi32(1));
    return _mm512_add_epi32(_mm512_mullo_epi32(freq, _mm512_srli_epi32(x, 12)), _mm512_srli_epi32(e, 20));
  }

  // The symbol is the entry's low byte: a truncating narrow.
  static void StoreSymbols(Group e, uint8_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(e));
  }

  // Lanes below 2^16 take the next words of the stream, the lowest such lane the first word. The load
  // reads 32 bytes at pos.
  static Group Renormalise(Group x, const uint8_t*& pos) {
    const __mmask16 need = _mm512_cmplt_epu32_mask(x, _mm512_set1_epi32(1 << 16));
    const __m512i words = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos)));
    pos += 2 * static_cast<size_t>(__builtin_popcount(need));
    return _mm512_mask_or_epi32(x, need, _mm512_slli_epi32(x, 16), _mm512_maskz_expand_epi32(need, words));
  }
};

}  // namespace

void RansDecodeGroupsAvx512(RansGroupCursor* const* streams, size_t n) {
  static_assert(kRansMaxTogether == 4, "one kernel per stream count");
  switch (n) {
    case 1: return DecodeGroupsInLockstep<Avx512Group, 1>(streams);
    case 2: return DecodeGroupsInLockstep<Avx512Group, 2>(streams);
    case 3: return DecodeGroupsInLockstep<Avx512Group, 3>(streams);
    case 4: return DecodeGroupsInLockstep<Avx512Group, 4>(streams);
    default: return;
  }
}

}  // namespace kvstream::codec
#endif
