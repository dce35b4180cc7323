// The KV dump (kvstream/kv_dump.h): real KV written and read back bit for bit, archives that numpy
// writes and reads, and every kind of broken or lying archive refused with an error that names it.
#include "kvstream/kv_dump.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kvstream/model.h"
#include "tests/model/test_models.h"

namespace kvstream {
namespace {

using testing::ReadBytes;
using testing::TempDir;
using testing::WriteBytes;

constexpr int kTokens = 48;

// stories260K's KV of real text as a dump (f32, with token ids and importance).
KvDump RealDump() {
  auto model = Model::Load("stories260K");
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  const ModelConfig& c = (*model)->config();
  const std::vector<int> ids =
      (*model)->tokenizer().Encode("Once upon a time there was a little dog who liked to run in the park.", true);
  std::vector<int> tokens;
  for (int t = 0; t < kTokens; ++t) tokens.push_back(ids[static_cast<size_t>(t) % ids.size()]);
  KvCache cache = KvCache::Allocate(c, kTokens);
  EXPECT_TRUE((*model)->Forward(tokens, cache, nullptr).ok());
  KvDump d;
  d.layers = c.n_layers;
  d.tokens = kTokens;
  d.kv_dim = c.kv_dim();
  d.n_heads = c.n_heads;
  d.n_kv_heads = c.n_kv_heads;
  d.vocab_size = c.vocab_size;
  d.rope = c.rope();
  d.keys.resize(static_cast<size_t>(cache.keys().numel()) * 4);
  d.values.resize(d.keys.size());
  EXPECT_TRUE(CopyView(cache.keys(), d.keys_view()).ok());
  EXPECT_TRUE(CopyView(cache.values(), d.values_view()).ok());
  d.token_ids.assign(tokens.begin(), tokens.end());
  d.importance = cache.Importance();
  return d;
}

void ExpectSameDump(const KvDump& a, const KvDump& b) {
  EXPECT_EQ(a.layers, b.layers);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.kv_dim, b.kv_dim);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.rope.head_dim, b.rope.head_dim);
  EXPECT_EQ(a.rope.theta, b.rope.theta);
  EXPECT_EQ(a.rope.layout, b.rope.layout);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.token_ids, b.token_ids);
  EXPECT_EQ(a.importance, b.importance);
}

TEST(KvDump, RealKvRoundTripsBitForBit) {
  const KvDump d = RealDump();
  ASSERT_GT(d.layers, 0);
  TempDir dir;
  ASSERT_TRUE(WriteKvDump(d, dir / "kv.npz").ok());
  auto back = ReadKvDump(dir / "kv.npz");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameDump(d, *back);
  const TensorView k = back->keys_view();
  EXPECT_EQ(k.layers(), d.layers);
  EXPECT_EQ(k.tokens(), kTokens);
  EXPECT_EQ(k.channels(), d.kv_dim);
  EXPECT_TRUE(k.is_dense());
}

TEST(KvDump, HalfPrecisionWithoutTheOptionalMembers) {
  const KvDump real = RealDump();
  ASSERT_GT(real.layers, 0);
  KvDump d = real;
  d.dtype = DType::kF16;
  d.keys.resize(d.keys.size() / 2);
  d.values.resize(d.values.size() / 2);
  ASSERT_TRUE(CopyView(real.keys_view(), d.keys_view()).ok());
  ASSERT_TRUE(CopyView(real.values_view(), d.values_view()).ok());
  d.token_ids.clear();
  d.importance.clear();
  TempDir dir;
  ASSERT_TRUE(WriteKvDump(d, dir / "kv16.npz").ok());
  auto back = ReadKvDump(dir / "kv16.npz");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameDump(d, *back);
}

TEST(KvDump, WriterRefusesFieldsThatDisagree) {
  KvDump d = RealDump();
  ASSERT_GT(d.layers, 0);
  TempDir dir;
  KvDump short_values = d;
  short_values.values.pop_back();
  EXPECT_EQ(WriteKvDump(short_values, dir / "a.npz").code(), StatusCode::kInvalidArgument);
  KvDump bad_ids = d;
  bad_ids.token_ids.pop_back();
  EXPECT_EQ(WriteKvDump(bad_ids, dir / "b.npz").code(), StatusCode::kInvalidArgument);
  KvDump bf16 = d;
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(WriteKvDump(bf16, dir / "c.npz").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ReadKvDump(dir / "a.npz").ok()) << "a refused dump leaves no file";
}

// Every prefix of a real dump, and every byte of it flipped in turn: an error (or, for a flip that
// touches nothing read, the same dump), never a crash or an out-of-bounds read.
TEST(KvDump, TruncatedAndFlippedArchivesAreRefused) {
  KvDump d = RealDump();
  ASSERT_GT(d.layers, 0);
  d.layers = 1;  // a smaller archive, so that every byte can be tried
  d.keys.resize(static_cast<size_t>(d.tokens) * d.kv_dim * 4);
  d.values.resize(d.keys.size());
  TempDir dir;
  ASSERT_TRUE(WriteKvDump(d, dir / "kv.npz").ok());
  const std::vector<uint8_t> bytes = ReadBytes(dir / "kv.npz");
  for (size_t n = 0; n < bytes.size(); ++n) {
    const auto r = ParseKvDump(bytes.data(), n);
    ASSERT_FALSE(r.ok()) << "a prefix of " << n << " of " << bytes.size() << " bytes parsed";
    EXPECT_NE(r.status().code(), StatusCode::kOk);
  }
  int refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> flipped = bytes;
    flipped[i] ^= 0x10;
    const auto r = ParseKvDump(flipped.data(), flipped.size());
    if (!r.ok()) {
      ++refused;
      EXPECT_FALSE(r.status().message().empty());
    } else {
      // Only bytes the reader does not depend on changed (a timestamp), or the name of an optional member,
      // which is then unknown and left out.
      KvDump same = *r;
      if (same.token_ids.empty()) same.token_ids = d.token_ids;
      if (same.importance.empty()) same.importance = d.importance;
      ExpectSameDump(d, same);
    }
  }
  EXPECT_GT(refused, static_cast<int>(bytes.size() * 9 / 10));
}

// The python3 that the setup installs numpy for (scripts/bootstrap.sh), or "" without numpy.
std::string PythonWithNumpy() {
  const std::string python = "/usr/bin/python3";
  return std::system((python + " -c 'import numpy' 2>/dev/null").c_str()) == 0 ? python : "";
}

int RunPython(const std::string& python, const std::string& script, const TempDir& dir) {
  WriteBytes(dir / "script.py", reinterpret_cast<const uint8_t*>(script.data()), script.size());
  return std::system((python + " " + (dir / "script.py") + " " + dir.path()).c_str());
}

// Another engine's dump: numpy.savez with keys and values in float16, token ids in int64, rope_theta in
// float64, no importance; and numpy reading kvstream's own dump.
TEST(KvDump, NumpyWritesWhatKvstreamReadsAndReadsWhatItWrites) {
  const std::string python = PythonWithNumpy();
  if (python.empty()) GTEST_SKIP() << "/usr/bin/python3 has no numpy (scripts/bootstrap.sh installs python3-numpy)";
  const KvDump d = RealDump();
  ASSERT_GT(d.layers, 0);
  TempDir dir;
  ASSERT_TRUE(WriteKvDump(d, dir / "ours.npz").ok());
  const std::string script = R"py(import sys, numpy as np
d = sys.argv[1]
ours = np.load(d + '/ours.npz')
layers, tokens, kv_dim, n_heads, n_kv_heads, head_dim, rope_layout, vocab = ours['config']
assert ours['k'].dtype == np.float32 and ours['k'].shape == (layers, tokens, kv_dim)
assert ours['tokens'].dtype == np.int32 and ours['importance'].shape == (tokens,)
np.savez(d + '/numpy.npz', k=ours['k'].astype(np.float16), v=ours['v'].astype(np.float16),
         tokens=ours['tokens'].astype(np.int64), config=ours['config'],
         rope_theta=ours['rope_theta'].astype(np.float64), engine_notes=np.arange(3))
)py";
  ASSERT_EQ(RunPython(python, script, dir), 0) << "numpy could not read kvstream's dump";
  auto theirs = ReadKvDump(dir / "numpy.npz");
  ASSERT_TRUE(theirs.ok()) << theirs.status().ToString();
  EXPECT_EQ(theirs->dtype, DType::kF16);
  EXPECT_EQ(theirs->token_ids, d.token_ids);
  EXPECT_TRUE(theirs->importance.empty());
  EXPECT_EQ(theirs->rope.theta, d.rope.theta);
  // numpy rounds to float16 as CopyView does: to nearest, ties to even.
  KvDump expected = d;
  expected.dtype = DType::kF16;
  expected.keys.resize(d.keys.size() / 2);
  ASSERT_TRUE(CopyView(d.keys_view(), expected.keys_view()).ok());
  EXPECT_EQ(theirs->keys, expected.keys);
}

// Archives numpy (or a hostile writer) can make that are not kv dumps, each refused with a message
// that says what is wrong.
TEST(KvDump, ForeignAndLyingArchivesAreRefusedByName) {
  const std::string python = PythonWithNumpy();
  if (python.empty()) GTEST_SKIP() << "/usr/bin/python3 has no numpy (scripts/bootstrap.sh installs python3-numpy)";
  TempDir dir;
  const std::string script = R"py(import sys, zipfile, numpy as np
d = sys.argv[1]
L, T, C = 2, 5, 8
good = dict(k=np.zeros((L, T, C), np.float32), v=np.ones((L, T, C), np.float32),
            config=np.array([L, T, C, 4, 2, 4, 0, 100], np.int64), rope_theta=np.array([10000.0], np.float32),
            tokens=np.arange(T, dtype=np.int32))
def save(name, **changes):
    m = dict(good); m.update(changes)
    np.savez(d + '/' + name + '.npz', **{k: v for k, v in m.items() if v is not None})
save('good')
np.savez_compressed(d + '/compressed.npz', **good)
save('no_values', v=None)
save('shape', k=np.zeros((L, T + 1, C), np.float32))
save('dtypes', v=np.ones((L, T, C), np.float16))
save('big_endian', k=np.zeros((L, T, C), '>f4'))
save('fortran', k=np.asfortranarray(np.zeros((L, T, C), np.float32)))
save('heads', config=np.array([L, T, C, 4, 3, 4, 0, 100], np.int64))
save('token_range', tokens=np.array([0, 1, 2, 3, 100], np.int32))
save('theta', rope_theta=np.array([-1.0], np.float32))
save('importance', importance=np.array([1, 2, np.nan, 1, 1], np.float32))
save('ints', k=np.zeros((L, T, C), np.int16))
# A .npy header whose shape claims far more values than the member holds.
with zipfile.ZipFile(d + '/good.npz') as z:
    members = {n: z.read(n) for n in z.namelist()}
def rewrite(name, member, data):
    with zipfile.ZipFile(d + '/' + name + '.npz', 'w') as z:
        for n, b in members.items():
            z.writestr(n, data if n == member else b)
k = members['k.npy']
rewrite('huge_shape', 'k.npy', k.replace(b"(2, 5, 8)", b"(2000000000, 5000, 8)").replace(b" " * 12 + b"\n", b"\n", 1))
rewrite('not_npy', 'config.npy', b'config as text')
with zipfile.ZipFile(d + '/twice.npz', 'w') as z:
    for n, b in members.items():
        z.writestr(n, b)
    import warnings; warnings.simplefilter('ignore')
    z.writestr('k.npy', members['k.npy'])
open(d + '/not_zip.npz', 'wb').write(b'PK\x03\x04 but nothing after it')
)py";
  ASSERT_EQ(RunPython(python, script, dir), 0);
  ASSERT_TRUE(ReadKvDump(dir / "good.npz").ok()) << ReadKvDump(dir / "good.npz").status().ToString();
  const std::pair<const char*, const char*> cases[] = {
      {"compressed", "numpy.savez_compressed"},
      {"no_values", "no member v.npy"},
      {"shape", "k.npy: shape (2, 6, 8), expected (2, 5, 8)"},
      {"dtypes", "k.npy is <f4, v.npy <f2"},
      {"big_endian", "dtype '>f4'"},
      {"fortran", "Fortran"},
      {"heads", "kv_dim = 8 is not n_kv_heads x head_dim = 3 x 4"},
      {"token_range", "token 4 is 100, outside the vocabulary of 100"},
      {"theta", "rope_theta"},
      {"importance", "importance.npy: token 2"},
      {"ints", "dtype '<i2'"},
      {"huge_shape", "shape needs more values than"},
      {"not_npy", "config.npy: .npy magic"},
      {"twice", "appears twice"},
      {"not_zip", "not a ZIP archive"},
  };
  for (const auto& [name, message] : cases) {
    const auto r = ReadKvDump(dir / (std::string(name) + ".npz"));
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find(message), std::string::npos) << name << ": " << r.status().ToString();
  }
}

TEST(KvDump, FilesThatAreNotRegularAreRefused) {
  EXPECT_FALSE(ReadKvDump("/dev/zero").ok());
  EXPECT_EQ(ReadKvDump("/nonexistent/kv.npz").status().code(), StatusCode::kNotFound);
  TempDir dir;
  EXPECT_FALSE(ReadKvDump(dir.path()).ok());
}

}  // namespace
}  // namespace kvstream
