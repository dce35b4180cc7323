// kvstream/kv_dump.h — a KV cache as a file: the .npz archive of docs/kv-dump-format.md.
//
// `kvstream kv dump` writes one from the reference engine; another engine writes the same members with
// numpy.savez, and `kvstream serve --kv-dump` serves either, so KV that kvstream did not compute reaches a
// Sender. Reading trusts nothing in the file: every member, shape and size is checked against the others
// and against the bytes there are, and a file that is not such an archive gets an error naming what is wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvstream/rope.h"
#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

struct KvDump {
  int layers = 0;
  int tokens = 0;
  int kv_dim = 0;  // n_kv_heads * head_dim
  int n_heads = 0;
  int n_kv_heads = 0;
  int vocab_size = 0;
  RopeSpec rope;                      // head_dim, theta and layout of the keys' rotation
  DType dtype = DType::kF32;          // of keys and values: kF32 or kF16
  std::vector<uint8_t> keys, values;  // [layers][tokens][kv_dim] of dtype, dense; keys after RoPE
  std::vector<int32_t> token_ids;     // [tokens], or empty when the dump has none (then no "text" level)
  std::vector<float> importance;      // [tokens] (KvCache::Importance), or empty (then no fine rows)

  TensorView keys_view() const;
  TensorView values_view() const;
};

// Reads a dump from memory: the archive's members stored (numpy.savez; a compressed member, as
// numpy.savez_compressed writes, is refused by name), keys and values '<f4' or '<f2'.
Result<KvDump> ParseKvDump(const uint8_t* data, size_t size);
// The same from a regular file of at most max_bytes (by default what a ZIP archive without ZIP64 can be),
// read piece by piece: each member's data goes straight into its array, so reading takes about the dump's
// size in memory, once.
inline constexpr uint64_t kMaxKvDumpBytes = (uint64_t{4} << 30) + (uint64_t{1} << 20);
Result<KvDump> ReadKvDump(const std::string& path, uint64_t max_bytes = kMaxKvDumpBytes);

// Writes `dump` (keys and values as f32 or f16; token ids and importance when present). Archives above 4 GiB are
// refused (no ZIP64), as is a dump whose fields disagree; on failure the file is removed.
Status WriteKvDump(const KvDump& dump, const std::string& path);

}  // namespace kvstream
