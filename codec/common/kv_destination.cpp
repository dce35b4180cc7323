// KvDestination's factories and checks (kvstream/kv_destination.h), and its kernel-ready form
// (kv_address.h).
#include <string>
#include <utility>

#include "codec/common/kv_address.h"
#include "kvstream/kv_destination.h"

namespace kvstream {

Result<KvDestination> KvDestination::Contiguous(const TensorView& keys, const TensorView& values, int64_t kv_heads) {
  KVSTREAM_RETURN_IF_ERROR(ValidateView(keys, "keys"));
  KVSTREAM_RETURN_IF_ERROR(ValidateView(values, "values"));
  for (int i = 0; i < 3; ++i) {
    if (keys.shape[i] != values.shape[i]) return Status::InvalidArgument("destination: keys and values differ in shape");
  }
  if (keys.dtype != values.dtype || keys.device != values.device) {
    return Status::InvalidArgument("destination: keys and values differ in dtype or device");
  }
  if (keys.strides[1] != values.strides[1] || keys.strides[2] != values.strides[2]) {
    return Status::InvalidArgument("destination: keys and values differ in token or channel stride");
  }
  if (kv_heads <= 0 || keys.channels() % kv_heads != 0) {
    return Status::InvalidArgument("destination: kv_heads = " + std::to_string(kv_heads) + " does not divide " +
                                   std::to_string(keys.channels()) + " channels");
  }
  KvDestination d;
  d.dtype = keys.dtype;
  d.device = keys.device;
  d.layers = keys.layers();
  d.positions = keys.tokens();
  d.kv_heads = kv_heads;
  d.head_dim = keys.channels() / kv_heads;
  d.token_stride = keys.strides[1];
  d.dim_stride = keys.strides[2];
  d.head_stride = d.head_dim * keys.strides[2];
  const size_t size = DTypeSize(keys.dtype);
  for (int64_t l = 0; l < d.layers; ++l) {
    d.keys.push_back(static_cast<char*>(keys.data) + l * keys.strides[0] * static_cast<int64_t>(size));
    d.values.push_back(static_cast<char*>(values.data) + l * values.strides[0] * static_cast<int64_t>(size));
  }
  return d;
}

Result<KvDestination> KvDestination::HuggingFace(std::vector<void*> keys, std::vector<void*> values, DType dtype,
                                                 Device device, int64_t batch, int64_t batch_index, int64_t kv_heads,
                                                 int64_t positions, int64_t head_dim) {
  if (batch_index < 0 || batch_index >= batch) {
    return Status::InvalidArgument("destination: batch row " + std::to_string(batch_index) + " outside a batch of " +
                                   std::to_string(batch));
  }
  KvDestination d;
  d.dtype = dtype;
  d.device = device;
  d.layers = static_cast<int64_t>(keys.size());
  d.positions = positions;
  d.kv_heads = kv_heads;
  d.head_dim = head_dim;
  d.token_stride = head_dim;
  d.head_stride = positions * head_dim;
  d.dim_stride = 1;
  const int64_t skip = batch_index * kv_heads * positions * head_dim * static_cast<int64_t>(DTypeSize(dtype));
  for (void*& p : keys) p = static_cast<char*>(p) + skip;
  for (void*& p : values) p = static_cast<char*>(p) + skip;
  d.keys = std::move(keys);
  d.values = std::move(values);
  return d;
}

KvDestination KvDestination::Paged(std::vector<void*> keys, std::vector<void*> values, DType dtype, Device device,
                                   int64_t num_blocks, int64_t block_size, int64_t kv_heads, int64_t head_dim,
                                   const int32_t* block_table, int64_t block_table_size) {
  KvDestination d;
  d.dtype = dtype;
  d.device = device;
  d.layers = static_cast<int64_t>(keys.size());
  d.positions = block_table_size * block_size;
  d.kv_heads = kv_heads;
  d.head_dim = head_dim;
  d.token_stride = kv_heads * head_dim;
  d.head_stride = head_dim;
  d.dim_stride = 1;
  d.block_size = block_size;
  d.block_stride = block_size * kv_heads * head_dim;
  d.num_blocks = num_blocks;
  d.block_table = block_table;
  d.block_table_size = block_table_size;
  d.keys = std::move(keys);
  d.values = std::move(values);
  return d;
}

Status ValidateDestination(const KvDestination& d, const char* what) {
  const std::string name(what);
  if (d.dtype != DType::kF16 && d.dtype != DType::kBF16 && d.dtype != DType::kF32) {
    return Status::InvalidArgument(name + ": dtype must be fp16, bf16 or fp32");
  }
  if (d.layers <= 0 || d.positions <= 0 || d.kv_heads <= 0 || d.head_dim <= 0) {
    return Status::InvalidArgument(name + ": layers, positions, kv_heads and head_dim must be positive (" +
                                   std::to_string(d.layers) + ", " + std::to_string(d.positions) + ", " +
                                   std::to_string(d.kv_heads) + ", " + std::to_string(d.head_dim) + ")");
  }
  if (static_cast<int64_t>(d.keys.size()) != d.layers || static_cast<int64_t>(d.values.size()) != d.layers) {
    return Status::InvalidArgument(name + ": " + std::to_string(d.keys.size()) + " key and " +
                                   std::to_string(d.values.size()) + " value bases for " + std::to_string(d.layers) +
                                   " layers");
  }
  for (int64_t l = 0; l < d.layers; ++l) {
    if (d.keys[l] == nullptr || d.values[l] == nullptr) {
      return Status::InvalidArgument(name + ": layer " + std::to_string(l) + " has a null base");
    }
  }
  if (d.token_stride < 0 || d.head_stride < 0 || d.dim_stride < 0 || d.block_stride < 0 || d.position_offset < 0) {
    return Status::InvalidArgument(name + ": strides and the position offset must not be negative");
  }
  if (d.paged()) {
    if (d.block_table == nullptr || d.block_table_size <= 0 || d.num_blocks <= 0) {
      return Status::InvalidArgument(name + ": a paged destination needs a block table and its number of blocks");
    }
    if (d.positions > d.block_table_size * d.block_size) {
      return Status::InvalidArgument(name + ": " + std::to_string(d.positions) + " positions but the block table covers " +
                                     std::to_string(d.block_table_size * d.block_size));
    }
  }
  return Status::Ok();
}

namespace codec {

std::vector<void*> JoinedBases(const KvDestination& d) {
  std::vector<void*> bases(d.keys);
  bases.insert(bases.end(), d.values.begin(), d.values.end());
  return bases;
}

KvAddress MakeKvAddress(const KvDestination& d, void* const* bases, const int32_t* block_table) {
  KvAddress a{};
  a.dtype = d.dtype;
  a.layers = static_cast<int32_t>(d.layers);
  a.head_dim = static_cast<int32_t>(d.head_dim);
  a.token_stride = d.token_stride;
  a.head_stride = d.head_stride;
  a.dim_stride = d.dim_stride;
  a.position_offset = d.position_offset;
  a.positions = d.positions;
  a.block_size = d.block_size;
  a.block_stride = d.block_stride;
  a.num_blocks = d.num_blocks;
  a.bases = bases;
  a.block_table = block_table;
  return a;
}

}  // namespace codec
}  // namespace kvstream
