// Greedy decoding over the forward pass.
#include <algorithm>

#include "kvstream/model.h"

namespace kvstream {

Result<std::vector<int>> GenerateGreedy(const Model& model, const std::vector<int>& prompt, int max_new_tokens,
                                        bool stop_at_eos) {
  const ModelConfig& c = model.config();
  if (prompt.empty()) return Status::InvalidArgument("generate: the prompt has no tokens");
  if (max_new_tokens < 0) return Status::InvalidArgument("generate: max_new_tokens = " + std::to_string(max_new_tokens) + " is negative");
  if (static_cast<int64_t>(prompt.size()) > c.max_seq_len) {
    return Status::InvalidArgument("generate: prompt of " + std::to_string(prompt.size()) + " tokens exceeds max_seq_len " +
                                   std::to_string(c.max_seq_len));
  }
  const int capacity = static_cast<int>(std::min<int64_t>(c.max_seq_len, static_cast<int64_t>(prompt.size()) + max_new_tokens));
  KvCache cache = KvCache::Allocate(c, capacity);
  std::vector<float> logits;
  KVSTREAM_RETURN_IF_ERROR(model.Forward(prompt, cache, &logits));
  std::vector<int> out;
  const int eos = model.tokenizer().eos_id();
  while (static_cast<int>(out.size()) < max_new_tokens && cache.tokens < capacity) {
    const float* last = logits.data() + (logits.size() - static_cast<size_t>(c.vocab_size));
    const int next = static_cast<int>(std::max_element(last, last + c.vocab_size) - last);
    if (stop_at_eos && next == eos) break;
    out.push_back(next);
    if (static_cast<int>(out.size()) == max_new_tokens) break;
    KVSTREAM_RETURN_IF_ERROR(model.Forward({next}, cache, &logits));
  }
  return out;
}

}  // namespace kvstream
