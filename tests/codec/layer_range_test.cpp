// DecodeOptions::layer_begin/layer_end (layer-major sending): a layer range of every golden chunk kind
// decodes to exactly the full decode's values in those layers, writes nothing else (a predicted chunk
// also its earlier layers, which it is predicted from), and reads no byte of the segments it does not
// need, so a chunk whose later layers have not arrived yet decodes its first ones.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kvstream/codec.h"
#include "tests/codec/golden_chunks.h"

namespace kvstream {
namespace {

struct Planes {
  std::vector<uint16_t> k, v;
  TensorView keys, values;
  explicit Planes(const ChunkInfo& info)
      : k(static_cast<size_t>(info.layers * info.tokens * info.channels), 0x7e00),  // NaN: "not written"
        v(k.size(), 0x7e00) {
    keys = TensorView::Dense(k.data(), DType::kF16, info.layers, info.tokens, info.channels);
    values = TensorView::Dense(v.data(), DType::kF16, info.layers, info.tokens, info.channels);
  }
  // Layer l of keys and values, as bytes.
  bool SameLayer(const Planes& o, int64_t l) const {
    const size_t n = k.size() / static_cast<size_t>(keys.layers()), at = static_cast<size_t>(l) * n;
    return std::memcmp(k.data() + at, o.k.data() + at, n * 2) == 0 && std::memcmp(v.data() + at, o.v.data() + at, n * 2) == 0;
  }
};

TEST(LayerRange, EveryRangeOfEveryKindMatchesTheFullDecodeAndWritesNothingElse) {
  for (const char* name : testing::kKvGoldenChunks) {
    const testing::Golden g = testing::LoadGolden(name);
    const Profile* profile = g.profile ? &*g.profile : nullptr;
    const bool predicted = g.info.scheme == QuantScheme::kPredicted && IsLossyLevel(g.info.level);
    DecodeOptions full_options;
    full_options.profile = profile;
    Planes full(g.info);
    ASSERT_TRUE(DecodeChunk(g.bytes.data(), g.bytes.size(), full_options, full.keys, full.values).ok()) << name;
    const Planes untouched(g.info);
    const int64_t L = g.info.layers;
    for (int64_t begin = 0; begin < L; ++begin) {
      for (int64_t end = begin + 1; end <= L; ++end) {
        SCOPED_TRACE(std::string(name) + " layers [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
        // Only the bytes the range needs: the header and its (a predicted chunk: every earlier) segments.
        const size_t first = predicted ? 0 : static_cast<size_t>(2 * begin);
        std::vector<uint8_t> partial(g.bytes.size(), 0xa5);
        const size_t header = g.info.segments[0].offset;
        std::memcpy(partial.data(), g.bytes.data(), header);
        for (size_t s = first; s < static_cast<size_t>(2 * end); ++s) {
          const SegmentInfo& seg = g.info.segments[s];
          std::memcpy(partial.data() + seg.offset, g.bytes.data() + seg.offset, seg.size);
        }
        DecodeOptions options = full_options;
        options.layer_begin = begin;
        options.layer_end = end;
        Planes got(g.info);
        const Status s = DecodeChunk(partial.data(), partial.size(), options, got.keys, got.values);
        ASSERT_TRUE(s.ok()) << s.ToString();
        for (int64_t l = 0; l < L; ++l) {
          const bool written = l < end && (l >= begin || predicted);
          EXPECT_TRUE(written ? got.SameLayer(full, l) : got.SameLayer(untouched, l)) << "layer " << l;
        }
      }
    }
  }
}

TEST(LayerRange, ARangeOutsideTheChunkIsRefused) {
  const testing::Golden g = testing::LoadGolden("int8.kvck");
  Planes out(g.info);
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{-1, 2}, {3, 3}, {4, 2}, {0, g.info.layers + 1}}) {
    DecodeOptions options;
    options.layer_begin = begin;
    options.layer_end = end;
    const Status s = DecodeChunk(g.bytes.data(), g.bytes.size(), options, out.keys, out.values);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << begin << ".." << end << ": " << s.ToString();
  }
}

TEST(LayerRange, DecodeChunkIntoWritesOnlyTheRangeOfTheDestination) {
  const testing::Golden g = testing::LoadGolden("uniform_inchunk_L3.kvck");
  Planes full(g.info), got(g.info);
  DecodeOptions options;
  ASSERT_TRUE(DecodeChunk(g.bytes.data(), g.bytes.size(), options, full.keys, full.values).ok());
  // The chunk starts at its own token_begin: a destination holding the positions from there.
  KvDestination d = KvDestination::Contiguous(got.keys, got.values, 1).value();
  d.position_offset = static_cast<int64_t>(g.info.token_begin);
  options.layer_begin = 2;
  options.layer_end = 4;
  ASSERT_TRUE(DecodeChunkInto(g.bytes.data(), g.bytes.size(), options, d).ok());
  const Planes untouched(g.info);
  for (int64_t l = 0; l < g.info.layers; ++l) {
    EXPECT_TRUE(l >= 2 && l < 4 ? got.SameLayer(full, l) : got.SameLayer(untouched, l)) << "layer " << l;
  }
}

}  // namespace
}  // namespace kvstream
