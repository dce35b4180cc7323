// DecodeChunkInto (kvstream/codec.h): the chunk decoded into dense rows of the destination's dtype, then
// each head's run of values copied to its element of the destination (kv_address.h, the addressing the
// GPU kernels use). The rounding happens once, in the dense decode, so the copy moves bits.
#include <cstring>
#include <string>
#include <vector>

#include "codec/common/kv_address.h"
#include "codec/decompress/container_reader.h"
#include "kvstream/codec.h"

namespace kvstream {
namespace {

Status CheckFits(const ChunkInfo& info, const KvDestination& d, const codec::KvAddress& a) {
  if (d.device != Device::kHost) return Status::Unsupported("destination: the CPU decoder writes host memory only");
  if (d.layers != info.layers || d.channels() != info.channels) {
    return Status::InvalidArgument("destination: " + std::to_string(d.layers) + " layers x " +
                                   std::to_string(d.channels()) + " channels but the chunk has " +
                                   std::to_string(info.layers) + " x " + std::to_string(info.channels));
  }
  for (int64_t t = 0; t < info.tokens; ++t) {
    if (codec::KvElementOffset(a, info.token_begin + t, 0) < 0) {
      return Status::InvalidArgument("destination: context position " + std::to_string(info.token_begin + t) +
                                     " is outside it (or its block-table entry outside the blocks)");
    }
  }
  return Status::Ok();
}

}  // namespace

Status DecodeChunkInto(const uint8_t* data, size_t size, const DecodeOptions& options, const KvDestination& d) {
  KVSTREAM_RETURN_IF_ERROR(ValidateDestination(d, "destination"));
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, codec::ReadContainer(data, size, options.limits, /*verify_segments=*/false));
  const std::vector<void*> bases = codec::JoinedBases(d);
  const codec::KvAddress a = codec::MakeKvAddress(d, bases.data(), d.block_table);
  KVSTREAM_RETURN_IF_ERROR(CheckFits(info, d, a));
  const int64_t L = info.layers, T = info.tokens, C = info.channels;
  const size_t element = DTypeSize(d.dtype);
  std::vector<char> stage(static_cast<size_t>(2 * L * T * C) * element);
  const TensorView keys = TensorView::Dense(stage.data(), d.dtype, L, T, C);
  const TensorView values = TensorView::Dense(stage.data() + stage.size() / 2, d.dtype, L, T, C);
  KVSTREAM_RETURN_IF_ERROR(DecodeChunk(data, size, options, keys, values));
  // The layers DecodeChunk wrote (DecodeOptions::layer_begin, a predicted chunk's from 0).
  const int64_t first_layer = info.scheme == QuantScheme::kPredicted && IsLossyLevel(info.level) ? 0 : options.layer_begin;
  const int64_t end_layer = options.layer_end < 0 ? L : options.layer_end;
  const int64_t head_dim = d.head_dim;
  for (int kv = 0; kv < 2; ++kv) {
    const char* plane = stage.data() + static_cast<size_t>(kv) * stage.size() / 2;
    for (int64_t l = first_layer; l < end_layer; ++l) {
      char* base = static_cast<char*>(bases[static_cast<size_t>(kv * L + l)]);
      for (int64_t t = 0; t < T; ++t) {
        const char* row = plane + static_cast<size_t>((l * T + t) * C) * element;
        for (int64_t c = 0; c < C; c += head_dim) {
          const int64_t offset = codec::KvElementOffset(a, info.token_begin + t, c);
          if (d.dim_stride == 1) {
            std::memcpy(base + offset * static_cast<int64_t>(element), row + c * static_cast<int64_t>(element),
                        static_cast<size_t>(head_dim) * element);
            continue;
          }
          for (int64_t i = 0; i < head_dim; ++i) {
            std::memcpy(base + (offset + i * d.dim_stride) * static_cast<int64_t>(element),
                        row + (c + i) * static_cast<int64_t>(element), element);
          }
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace kvstream
