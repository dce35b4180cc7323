// Shared pieces of the stream tests: a real context (stories260K's KV of GPL-3 prose), a Sender serving
// it on 127.0.0.1, destinations, and the local decode every fetched byte is compared with.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kvstream/codec.h"
#include "kvstream/stream.h"
#include "tests/codec/kv_fixture.h"

namespace kvstream::testing {

inline constexpr int kContextTokens = 300;
inline constexpr int kChunkTokens = 64;  // 5 chunks, the last one short

inline const RealKv& StoriesKv() {
  std::string error;
  const RealKv* kv = GetRealKv("stories260K", kContextTokens, &error);
  if (!kv) ADD_FAILURE() << "stories260K: " << error;
  return *kv;
}

inline ContextSpec SpecOf(const RealKv& kv) {
  ContextSpec spec;
  spec.keys = kv.cache.keys();
  spec.values = kv.cache.values();
  spec.token_ids.assign(kv.tokens.begin(), kv.tokens.end());
  spec.importance = kv.cache.Importance();
  return spec;
}

inline SenderOptions TestSenderOptions() {
  SenderOptions o;
  o.chunk_tokens = kChunkTokens;
  o.control.connect_timeout_ms = 3000;
  o.data.send_timeout_ms = 5000;
  return o;
}

inline ReceiverOptions TestReceiverOptions() {
  ReceiverOptions o;
  o.control.connect_timeout_ms = 3000;
  o.chunk_timeout_ms = 5000;
  return o;
}

// A dense fp32 destination of the context's shape.
struct Destination {
  std::vector<float> k, v;
  TensorView keys, values;
  Destination(int64_t layers, int64_t tokens, int64_t channels)
      : k(layers * tokens * channels, -7.0f), v(layers * tokens * channels, -7.0f) {
    keys = TensorView::Dense(k.data(), DType::kF32, layers, tokens, channels);
    values = TensorView::Dense(v.data(), DType::kF32, layers, tokens, channels);
  }
  explicit Destination(const RealKv& kv) : Destination(kv.cache.layers, kv.cache.tokens, kv.cache.kv_dim) {}
};

// What a local encode + decode at `level` gives, chunk by chunk (the tokens of at least fine_min_importance
// as fine rows at level 2): the bytes a fetch must reproduce.
inline Destination LocalDecode(const RealKv& kv, Level level, const Profile* profile = nullptr,
                               QuantScheme scheme = QuantScheme::kChannelUniform,
                               float fine_min_importance = std::numeric_limits<float>::infinity()) {
  Destination d(kv);
  const ContextSpec spec = SpecOf(kv);
  for (int64_t begin = 0; begin < kv.cache.tokens; begin += kChunkTokens) {
    const int64_t n = std::min<int64_t>(kChunkTokens, kv.cache.tokens - begin);
    ChunkInput in;
    auto slice = [&](const TensorView& v) {
      TensorView s = v;
      s.data = static_cast<uint8_t*>(v.data) + begin * v.strides[1] * static_cast<int64_t>(DTypeSize(v.dtype));
      s.shape[1] = n;
      return s;
    };
    in.keys = slice(spec.keys);
    in.values = slice(spec.values);
    in.token_begin = begin;
    in.importance = spec.importance.data() + begin;
    EncodeOptions eo;
    eo.level = level;
    eo.profile = profile;
    eo.scheme = scheme;
    eo.fine_min_importance = fine_min_importance;
    auto bytes = EncodeChunk(in, eo);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    DecodeOptions dopt;
    dopt.profile = profile;
    Status st = DecodeChunk(bytes->data(), bytes->size(), dopt, slice(d.keys), slice(d.values));
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  return d;
}

inline bool SameBytes(const Destination& a, const Destination& b) {
  return a.k.size() == b.k.size() && std::memcmp(a.k.data(), b.k.data(), a.k.size() * sizeof(float)) == 0 &&
         std::memcmp(a.v.data(), b.v.data(), a.v.size() * sizeof(float)) == 0;
}

}  // namespace kvstream::testing
