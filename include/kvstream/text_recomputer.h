// kvstream/text_recomputer.h — how a Receiver turns a "text" chunk (token ids) back into KV.
//
// The stream layer knows no model: a Receiver that accepts the text level is handed a TextRecomputer
// (ReceiverOptions::text_recomputer), and MakeTextRecomputer (kvstream/model.h) implements it with the
// reference engine. A serving engine implements it with its own prefill.
#pragma once

#include <cstdint>
#include <vector>

#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream {

class TextRecomputer {
 public:
  virtual ~TextRecomputer() = default;
  // Writes the KV of `token_ids`, the context's positions [begin, begin + token_ids.size()), into rows
  // [begin, ...) of `keys` and `values` ([layers][tokens][channels] host views, any dtype and strides),
  // attending to the context's earlier KV, which rows [0, begin) of the same views already hold. A model
  // of another shape than the views gives InvalidArgument. A Receiver calls it for one chunk at a time,
  // from its decode threads.
  virtual Status Recompute(const std::vector<int32_t>& token_ids, int64_t begin, const TensorView& keys,
                           const TensorView& values) = 0;
};

}  // namespace kvstream
