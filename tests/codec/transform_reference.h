// What the lossy scheme tests share: kernel switches, whole-chunk decoding into fp32
// (or fp16) tensors, and the normative RoPE rotation written out independently of the codec.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "codec/common/key_rotation.h"
#include "codec/common/rans.h"
#include "chunk_crcs.h"
#include "common/half.h"
#include "kv_fixture.h"
#include "kvstream/codec.h"
#include "kvstream/model.h"
#include "kvstream/profile.h"
#include "test_views.h"

namespace kvstream::testing {

// Runs `f` with the kernels that `variable` disables turned off (KVSTREAM_DISABLE_AVX2: the portable
// kernels; KVSTREAM_DISABLE_AVX512: the AVX2 ones on an AVX-512 CPU; KVSTREAM_DISABLE_AMX: the AVX-512
// ones on an AMX CPU), then restores the environment.
template <typename F>
void WithKernelsDisabled(const char* variable, F&& f) {
  setenv(variable, "1", 1);
  f();
  unsetenv(variable);
}
template <typename F>
void WithPortableKernels(F&& f) {
  WithKernelsDisabled("KVSTREAM_DISABLE_AVX2", f);
}

// A profile of stories260K learned from the first `sample_tokens` positions of `kv`, with the transform
// and the predicted schemes as asked.
inline Result<Profile> LearnProfile(const RealKv& kv, int sample_tokens, bool transform, bool predict,
                                    bool byte_predictors = false) {
  ProfileOptions options;
  options.model = "stories260K";
  options.transform = transform;
  options.predict = predict;
  options.byte_predictors = byte_predictors;
  options.rope = kv.model->config().rope();
  ProfileBuilder builder(options);
  KVSTREAM_RETURN_IF_ERROR(
      builder.AddSample(SliceTokens(kv.cache.keys(), 0, sample_tokens), SliceTokens(kv.cache.values(), 0, sample_tokens)));
  return builder.Build();
}

struct Kv2 {
  Tensor k, v;
};

inline std::vector<uint8_t> EncodeWith(const Profile& profile, QuantScheme scheme, const Tensor& k, const Tensor& v, int64_t t0,
                                       Level level, EncodeStats* stats = nullptr, int threads = 1) {
  ChunkInput in;
  in.keys = k.view;
  in.values = v.view;
  in.token_begin = t0;
  EncodeOptions eo;
  eo.level = level;
  eo.profile = &profile;
  eo.scheme = scheme;
  eo.stats = stats;
  eo.threads = threads;
  auto r = EncodeChunk(in, eo);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : std::vector<uint8_t>{};
}

inline Kv2 DecodeWith(const Profile& profile, const std::vector<uint8_t>& bytes, DType dtype = DType::kF32) {
  auto info = InspectChunk(bytes.data(), bytes.size());
  EXPECT_TRUE(info.ok()) << info.status().ToString();
  Kv2 out{Tensor(dtype, info->layers, info->tokens, info->channels, Layout::kDense), {}};
  out.v = out.k;
  DecodeOptions o;
  o.profile = &profile;
  Status st = DecodeChunk(bytes.data(), bytes.size(), o, out.k.view, out.v.view);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return out;
}

// The portable, AVX2 and AVX-512 kernels (each with the wider ones disabled) decode `chunk` to the same
// bits as `want`, the decode with the best kernels.
template <typename Decode>
void ExpectEveryKernelDecodesTheSameBits(const std::vector<uint8_t>& chunk, const Kv2& want, Decode decode) {
  Kv2 portable, avx2, avx512;
  WithPortableKernels([&] { portable = decode(chunk); });
  WithKernelsDisabled("KVSTREAM_DISABLE_AVX512", [&] { avx2 = decode(chunk); });
  WithKernelsDisabled("KVSTREAM_DISABLE_AMX", [&] { avx512 = decode(chunk); });
  const TensorView& shape = want.k.view;
  for (int64_t l = 0; l < shape.layers(); ++l) {
    for (int64_t t = 0; t < shape.tokens(); ++t) {
      for (int64_t c = 0; c < shape.channels(); ++c) {
        for (const Kv2* got : {&portable, &avx2, &avx512}) {
          ASSERT_EQ(got->k.bits(l, t, c), want.k.bits(l, t, c)) << l << "," << t << "," << c;
          ASSERT_EQ(got->v.bits(l, t, c), want.v.bits(l, t, c)) << l << "," << t << "," << c;
        }
      }
    }
  }
}

// A level's chunk of a whole context: smaller than the level before's (*previous_bits, updated), and
// reported on stdout.
inline void ExpectSmallerThanTheLevelBefore(const std::vector<uint8_t>& chunk, const TensorView& shape, const char* scheme,
                                            Level level, uint64_t escapes, double* previous_bits) {
  const double bits = 8.0 * static_cast<double>(chunk.size()) /
                      static_cast<double>(2 * shape.layers() * shape.tokens() * shape.channels());
  EXPECT_LT(bits, *previous_bits) << "higher levels must be smaller";
  *previous_bits = bits;
  std::printf("stories260K %lld tokens, %s level %d: %.3f bits/value, %llu escapes\n",
              static_cast<long long>(shape.tokens()), scheme, level, bits, static_cast<unsigned long long>(escapes));
}

// RoPE at `position` applied to a de-rotated key row, as docs/format.md defines it: per pair, x0 cos -
// x1 sin and x0 sin + x1 cos, each product rounded separately.
inline void RotateReference(std::vector<float>& y, int64_t position, const RopeSpec& rope) {
  const int hd = rope.head_dim, C = static_cast<int>(y.size());
  for (int h = 0; h < C / hd; ++h) {
    for (int i = 0; i < hd / 2; ++i) {
      float cs, sn;
      codec::RopeCosSin(static_cast<double>(position), i, hd, rope.theta, &cs, &sn);
      const bool interleaved = rope.layout == RopeLayout::kInterleaved;
      const int a = h * hd + (interleaved ? 2 * i : i), b = h * hd + (interleaved ? 2 * i + 1 : i + hd / 2);
      const float x0 = y[a], x1 = y[b];
      const float x0c = x0 * cs, x1s = x1 * sn, x0s = x0 * sn, x1c = x1 * cs;
      y[a] = x0c - x1s;
      y[b] = x0s + x1c;
    }
  }
}

// A transform or predicted segment's symbols and escape values, read and entropy-decoded as docs/format.md
// lays them out: u32 stream bytes, u32 escape count, the sink rows, the stream, the escapes. models: the
// table of each kept component.
struct CodedSegment {
  std::vector<uint8_t> symbols;
  std::vector<float> escapes;
};
inline CodedSegment ReadCodedSegment(const std::vector<uint8_t>& chunk, const SegmentInfo& seg, int64_t tokens,
                                     int64_t sink_rows, int64_t channels, const std::vector<const codec::RansModel*>& models) {
  const uint8_t* p = chunk.data() + seg.offset;
  uint32_t stream_bytes = 0, escape_count = 0;
  std::memcpy(&stream_bytes, p, 4);
  std::memcpy(&escape_count, p + 4, 4);
  const uint8_t* stream = p + 8 + 2 * sink_rows * channels;
  CodedSegment out;
  out.symbols.resize(static_cast<size_t>(tokens - sink_rows) * models.size());
  EXPECT_TRUE(codec::RansDecode(stream, stream_bytes, models.data(), models.size(), out.symbols.data(), out.symbols.size()).ok());
  for (uint32_t e = 0; e < escape_count; ++e) {
    uint16_t h;
    std::memcpy(&h, stream + stream_bytes + 2 * e, 2);
    out.escapes.push_back(HalfToFloat(h));
  }
  return out;
}

// Chunks of [t0, t0 + n) in every input layout decode to the bits of the same rows of the whole context's
// chunk. encode(keys, values, t0) -> chunk bytes, decode(bytes) -> Kv2, both at one level.
template <typename Encode, typename Decode>
void ExpectChunksDecodeLikeTheWholeContext(const KvCache& cache, Encode encode, Decode decode) {
  const Tensor k = CopyOf(cache.keys(), DType::kF32, Layout::kDense);
  const Tensor v = CopyOf(cache.values(), DType::kF32, Layout::kDense);
  const int64_t L = k.view.layers(), C = k.view.channels();
  const Kv2 whole = decode(encode(k, v, 0));
  for (auto [t0, n] : {std::pair<int64_t, int64_t>{0, 3}, {3, 45}, {48, 64}, {112, 48}}) {
    SCOPED_TRACE("tokens [" + std::to_string(t0) + ", " + std::to_string(t0 + n) + ")");
    for (Layout layout : kAllLayouts) {
      const Tensor ck = CopyOf(cache.keys(), DType::kF32, layout, t0, n);
      const Tensor cv = CopyOf(cache.values(), DType::kF32, layout, t0, n);
      const Kv2 part = decode(encode(ck, cv, t0));
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t c = 0; c < C; ++c) {
            ASSERT_EQ(part.k.bits(l, t, c), whole.k.bits(l, t0 + t, c)) << LayoutName(layout);
            ASSERT_EQ(part.v.bits(l, t, c), whole.v.bits(l, t0 + t, c)) << LayoutName(layout);
          }
        }
      }
    }
  }
}

// A scheme that needs a profile is refused, naming what is missing, by the encoder without a profile or
// with `lacking` (a profile without the scheme) and by the decoder of `chunk` (32 tokens of `cache` coded
// with the scheme) without its profile or with `lacking`. `word`: what the encoder's error names.
inline void ExpectSchemeRefusedWithoutItsProfile(const KvCache& cache, QuantScheme scheme, const Profile& lacking,
                                                 const std::vector<uint8_t>& chunk, const std::string& word) {
  const Tensor k = CopyOf(cache.keys(), DType::kF16, Layout::kDense, 0, 32);
  const Tensor v = CopyOf(cache.values(), DType::kF16, Layout::kDense, 0, 32);
  ChunkInput in;
  in.keys = k.view;
  in.values = v.view;
  EncodeOptions eo;
  eo.level = 2;
  eo.scheme = scheme;
  for (const Profile* profile : {static_cast<const Profile*>(nullptr), &lacking}) {
    eo.profile = profile;
    auto r = EncodeChunk(in, eo);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(word), std::string::npos) << r.status().ToString();
  }
  Tensor dk(DType::kF16, k.view.layers(), 32, k.view.channels(), Layout::kDense), dv = dk;
  DecodeOptions o;
  for (const Profile* profile : {static_cast<const Profile*>(nullptr), &lacking}) {
    o.profile = profile;
    const Status st = DecodeChunk(chunk.data(), chunk.size(), o, dk.view, dv.view);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("profile"), std::string::npos) << st.ToString();
  }
}

// The chunk of the first 40 tokens of `cache` (encode(keys, values) -> bytes): every truncation of it (by
// steps of 7 bytes) and 300 random single-bit flips are refused, decoding on two threads.
template <typename Encode>
void ExpectTruncatedAndFlippedChunksRefused(const KvCache& cache, Encode encode, const Profile& profile) {
  const Tensor k = CopyOf(cache.keys(), DType::kF16, Layout::kDense, 0, 40);
  const Tensor v = CopyOf(cache.values(), DType::kF16, Layout::kDense, 0, 40);
  const std::vector<uint8_t> bytes = encode(k, v);
  Tensor dk(DType::kF16, k.view.layers(), 40, k.view.channels(), Layout::kDense), dv = dk;
  DecodeOptions o;
  o.profile = &profile;
  o.threads = 2;
  for (size_t cut = 0; cut < bytes.size(); cut += 7) {
    EXPECT_FALSE(DecodeChunk(bytes.data(), cut, o, dk.view, dv.view).ok()) << cut;
  }
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    auto flipped = bytes;
    flipped[rng() % flipped.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    EXPECT_FALSE(DecodeChunk(flipped.data(), flipped.size(), o, dk.view, dv.view).ok()) << i;
  }
}

// `mutations` copies of `good` with 1-4 payload bytes overwritten at random and every CRC fixed, so the
// changes reach the decoder: each decodes (two threads, fp16) or fails cleanly (the sanitizers watch
// memory), and some fail.
inline void ExpectMutationsBehindValidCrcsDecodeOrFail(const std::vector<uint8_t>& good, const Profile& profile,
                                                       uint32_t seed, int mutations) {
  auto info = InspectChunk(good.data(), good.size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const uint32_t header = HeaderBytes(good);
  Tensor dk(DType::kF16, info->layers, info->tokens, info->channels, Layout::kDense), dv = dk;
  DecodeOptions o;
  o.profile = &profile;
  o.threads = 2;
  std::mt19937 rng(seed);
  int failures = 0;
  for (int i = 0; i < mutations; ++i) {
    std::vector<uint8_t> b = good;
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      b[header + rng() % (b.size() - header)] = static_cast<uint8_t>(rng());
    }
    FixAllCrcs(&b);
    failures += !DecodeChunk(b.data(), b.size(), o, dk.view, dv.view).ok();
  }
  EXPECT_GT(failures, 0);
}

}  // namespace kvstream::testing
