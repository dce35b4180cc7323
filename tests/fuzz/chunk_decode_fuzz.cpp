// libFuzzer target for the chunk decoder and the profile parser: untrusted bytes must give a Status,
// never a crash, an out-of-bounds access, a leak or undefined behaviour.
//
// Input: one mode byte, then the bytes under test.
//   bit 0  recompute every CRC32C the bytes claim (header, index and segments) first, so that mutations
//          reach the field checks, the entropy decoder and the dequantiser instead of stopping at a CRC;
//   bit 1  decode with a profile of the chunk's shape (built once per shape from a fixed sample) and
//          write its hash into the header, so that profile-referencing segments are exercised;
//   bits 2-3  destination dtype (f32, f16, bf16, f16) — bit 3 also makes the destination strided;
//   bit 4  the bytes are a profile, not a chunk (bit 0 fixes its trailing CRC).
// Every chunk also goes through the GPU decoder's kernels (the CPU launcher), which must give the CPU
// decoder's bits wherever it accepts the chunk.
// Seeds: real chunks and profiles written by chunk_fuzz_seeds (scripts/fuzz.sh).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "codec/common/crc32c.h"
#include "cuda/testing/host_launch.h"
#include "kvstream/codec.h"
#include "kvstream/profile.h"
#include "tests/fuzz/fuzz_profile.h"

namespace {

using kvstream::codec::Crc32c;

template <typename T>
T Get(const std::vector<uint8_t>& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}
template <typename T>
void Put(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof v);
}

void FixChunkCrcs(std::vector<uint8_t>& b) {
  if (b.size() < 68) return;
  const uint64_t segments = Get<uint32_t>(b, 28);
  if (segments > 4096) return;
  const uint64_t header = 64 + 24 * segments + 4;
  if (header > b.size()) return;
  for (uint64_t i = 0; i < segments; ++i) {
    const size_t e = 64 + 24 * i;
    const uint64_t off = Get<uint64_t>(b, e);
    const uint32_t size = Get<uint32_t>(b, e + 8);
    if (off <= b.size() && size <= b.size() - off) Put<uint32_t>(b, e + 12, Crc32c(b.data() + off, size));
  }
  Put<uint32_t>(b, header - 4, Crc32c(b.data(), header - 4));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  std::vector<uint8_t> b(data + 1, data + size);
  if (mode & 0x10) {
    if ((mode & 1) && b.size() >= 4) Put<uint32_t>(b, b.size() - 4, Crc32c(b.data(), b.size() - 4));
    kvstream::ProfileLimits limits;
    limits.max_layers = 64;
    limits.max_channels = 1024;
    (void)kvstream::Profile::Parse(b.data(), b.size(), limits);
    return 0;
  }
  // Small limits keep each run's allocations bounded (the decoder enforces them).
  kvstream::DecodeOptions options;
  options.limits.max_layers = 64;
  options.limits.max_tokens = 4096;
  options.limits.max_channels = 1024;
  options.limits.max_values = 1 << 22;
  const kvstream::Profile* profile = nullptr;
  if ((mode & 2) && b.size() >= 64) {
    const uint32_t layers = Get<uint32_t>(b, 16), channels = Get<uint32_t>(b, 24);
    if (layers >= 1 && layers <= 8 && channels >= 1 && channels <= 64) profile = kvstream::fuzz::ProfileFor(layers, channels);
    if (profile) Put<uint64_t>(b, 40, profile->hash());
  }
  if (mode & 1) FixChunkCrcs(b);
  options.profile = profile;
  auto info = kvstream::InspectChunk(b.data(), b.size(), options.limits);
  if (!info.ok()) return 0;
  if (info->level == kvstream::kLevelText) {
    (void)kvstream::DecodeChunkTokens(b.data(), b.size(), options.limits);
    return 0;
  }
  static const kvstream::DType kDTypes[] = {kvstream::DType::kF32, kvstream::DType::kF16, kvstream::DType::kBF16,
                                            kvstream::DType::kF16};
  const kvstream::DType dtype = kDTypes[(mode >> 2) & 3];
  const bool strided = (mode & 8) != 0;
  const int64_t L = info->layers, T = info->tokens, C = info->channels;
  const int64_t row = strided ? C + 3 : C;
  std::vector<uint8_t> k(static_cast<size_t>(L * T * row) * kvstream::DTypeSize(dtype)), v(k.size());
  auto kv = kvstream::TensorView::Dense(k.data(), dtype, L, T, C);
  auto vv = kvstream::TensorView::Dense(v.data(), dtype, L, T, C);
  for (auto* view : {&kv, &vv}) {
    view->strides[1] = row;
    view->strides[0] = T * row;
  }
  const kvstream::Status cpu = kvstream::DecodeChunk(b.data(), b.size(), options, kv, vv);
  // The GPU decoder's kernels on the same bytes, run by the CPU launcher: never a crash whatever the bytes
  // (they check no CRC, so damaged segments reach them), and where the CPU decoder accepted the chunk,
  // the same bits (unless the chunk's in-chunk bank is above the GPU's table limit).
  std::vector<uint8_t> gk(static_cast<size_t>(L * T * C) * kvstream::DTypeSize(dtype)), gv(gk.size());
  auto d = kvstream::KvDestination::Contiguous(kvstream::TensorView::Dense(gk.data(), dtype, L, T, C),
                                               kvstream::TensorView::Dense(gv.data(), dtype, L, T, C), 1);
  if (!d.ok()) return 0;
  d->position_offset = info->token_begin;
  const kvstream::Status gpu = kvstream::cuda::testing::DecodeChunksOnHost(
      {{b.data(), b.size(), b.data(), b.size()}}, profile, *d, options.limits);
  if (!cpu.ok()) return 0;
  if (gpu.code() == kvstream::StatusCode::kResourceExhausted) return 0;
  if (!gpu.ok()) {
    std::fprintf(stderr, "GPU kernels refused a chunk the CPU decoder accepts: %s\n", gpu.ToString().c_str());
    __builtin_trap();
  }
  // Bit for bit, except that two NaNs may differ in payload where NaN arithmetic (a hostile escape's
  // infinity or NaN) propagates one operand's: the order of operands is the compiler's (codec.h's contract).
  const auto nan_at = [&](const std::vector<uint8_t>& buf, size_t i) {
    if (dtype == kvstream::DType::kF32) return std::isnan(reinterpret_cast<const float*>(buf.data())[i]);
    const uint16_t h = reinterpret_cast<const uint16_t*>(buf.data())[i];
    return dtype == kvstream::DType::kF16 ? (h & 0x7c00) == 0x7c00 && (h & 0x3ff) : (h & 0x7f80) == 0x7f80 && (h & 0x7f);
  };
  const size_t es = kvstream::DTypeSize(dtype);
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < C; ++c) {
        const size_t dense = static_cast<size_t>((l * T + t) * C + c), wide = static_cast<size_t>((l * T + t) * row + c);
        for (const auto* pair : {&gk, &gv}) {
          const std::vector<uint8_t>& gpu_side = *pair;
          const std::vector<uint8_t>& cpu_side = pair == &gk ? k : v;
          if (std::memcmp(gpu_side.data() + dense * es, cpu_side.data() + wide * es, es) == 0) continue;
          if (nan_at(gpu_side, dense) && nan_at(cpu_side, wide)) continue;
          std::fprintf(stderr, "GPU kernels and the CPU decoder differ at layer %lld, token %lld, channel %lld\n",
                       static_cast<long long>(l), static_cast<long long>(t), static_cast<long long>(c));
          __builtin_trap();
        }
      }
    }
  }
  return 0;
}
