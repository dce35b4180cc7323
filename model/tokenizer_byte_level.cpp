// GPT-2-style byte-level BPE as GGUF embeds it (SmolLM2, GPT-2, StarCoder, Llama-3): text is split by the
// GPT-2 pattern (digits first split one by one where the pre-tokenizer says so), each piece's bytes are
// mapped to printable characters, and merges apply by rank. A control token's text in the input (a chat
// template's <|im_start|>) becomes that token, as Hugging Face tokenizers and llama.cpp's parse_special
// read it; Decode drops control tokens, so the round trip is lossless for any byte string without them.
#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "model/bpe.h"
#include "model/tokenizers.h"
#include "model/unicode.h"

namespace kvstream::model {
namespace {

constexpr int kControlToken = 3;  // GGUF token type: <|im_start|> and friends, dropped by Decode

uint64_t PairKey(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

class ByteLevelBpeTokenizer final : public Tokenizer {
 public:
  explicit ByteLevelBpeTokenizer(ByteLevelBpeSpec spec) : spec_(std::move(spec)) {}

  Status Build(const std::string& file) {
    const int n = static_cast<int>(spec_.tokens.size());
    for (int i = 0; i < n; ++i) ids_.emplace(spec_.tokens[i], i);
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      AppendUtf8(ByteToUnicode(static_cast<uint8_t>(b)), ch);
      auto it = ids_.find(ch);
      // Vocabularies may leave out bytes that never occur in training text (SmolLM2 lacks a few control
      // bytes and the bytes invalid in UTF-8); those encode to the unknown token.
      if (it == ids_.end() && (spec_.unk_id < 0 || spec_.unk_id >= n)) {
        return Status::CorruptData(file + ": tokenizer.ggml.tokens: byte " + std::to_string(b) +
                                   " has no token and there is no tokenizer.ggml.unknown_token_id to stand for it");
      }
      byte_ids_[b] = it == ids_.end() ? spec_.unk_id : it->second;
    }
    for (size_t rank = 0; rank < spec_.merges.size(); ++rank) {
      const std::string& m = spec_.merges[rank];
      const size_t sp = m.find(' ');  // pieces never hold U+0020: the byte map sends it to U+0120
      if (sp == std::string::npos) {
        return Status::CorruptData(file + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + m + "', expected 'left right'");
      }
      auto l = ids_.find(m.substr(0, sp)), r = ids_.find(m.substr(sp + 1)), o = ids_.find(m.substr(0, sp) + m.substr(sp + 1));
      if (l == ids_.end() || r == ids_.end() || o == ids_.end()) {
        return Status::CorruptData(file + ": tokenizer.ggml.merges[" + std::to_string(rank) + "] = '" + m + "' uses a token missing from the vocabulary");
      }
      merges_.emplace(PairKey(l->second, r->second), std::make_pair(static_cast<int>(rank), o->second));
    }
    if (!spec_.token_types.empty() && spec_.token_types.size() != spec_.tokens.size()) {
      return Status::CorruptData(file + ": tokenizer.ggml.token_type has " + std::to_string(spec_.token_types.size()) +
                                 " entries, tokenizer.ggml.tokens " + std::to_string(spec_.tokens.size()));
    }
    for (size_t id = 0; id < spec_.token_types.size(); ++id) {
      if (spec_.token_types[id] == kControlToken && !spec_.tokens[id].empty()) {
        control_pieces_.emplace_back(spec_.tokens[id], static_cast<int>(id));
      }
    }
    // Longest first, so that a control token holding another one's text wins where both match.
    std::stable_sort(control_pieces_.begin(), control_pieces_.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    if (spec_.bos_id >= n || spec_.eos_id >= n) {
      return Status::CorruptData(file + ": bos/eos token ids " + std::to_string(spec_.bos_id) + "/" + std::to_string(spec_.eos_id) +
                                 " outside the vocabulary of " + std::to_string(n));
    }
    return Status::Ok();
  }

  std::vector<int> Encode(const std::string& text, bool add_bos) const override {
    std::vector<int> out;
    if (add_bos && spec_.bos_id >= 0) out.push_back(spec_.bos_id);
    // Each control token's next occurrence, found again only once `begin` has passed it, so the text is
    // searched once per control token rather than once per control token found.
    std::vector<size_t> next;
    for (const auto& piece : control_pieces_) next.push_back(text.find(piece.first));
    size_t begin = 0;
    while (begin < text.size()) {
      // The earliest control token's text from `begin` (the longest where several start there).
      size_t at = std::string::npos;
      const std::pair<std::string, int>* control = nullptr;
      for (size_t i = 0; i < control_pieces_.size(); ++i) {
        if (next[i] != std::string::npos && next[i] < begin) next[i] = text.find(control_pieces_[i].first, begin);
        if (next[i] < at) {
          at = next[i];
          control = &control_pieces_[i];
        }
      }
      EncodePlain(std::string_view(text).substr(begin, at == std::string::npos ? std::string::npos : at - begin), out);
      if (control == nullptr) break;
      out.push_back(control->second);
      begin = at + control->first.size();
    }
    return out;
  }

  std::string Decode(const std::vector<int>& ids) const override {
    std::string out;
    for (int id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      if (!spec_.token_types.empty() && spec_.token_types[id] == kControlToken) continue;
      const std::string& piece = spec_.tokens[id];
      for (const Utf8Char& c : ScanUtf8(piece)) {
        const int b = c.valid ? UnicodeToByte(c.cp) : -1;
        if (b >= 0) {
          out += static_cast<char>(b);
        } else {
          out.append(piece, c.offset, c.length);  // user-defined tokens hold plain text
        }
      }
    }
    return out;
  }

  int vocab_size() const override { return static_cast<int>(spec_.tokens.size()); }
  int bos_id() const override { return spec_.bos_id; }
  int eos_id() const override { return spec_.eos_id; }
  bool adds_bos() const override { return spec_.add_bos && spec_.bos_id >= 0; }

 private:
  void EncodePlain(std::string_view text, std::vector<int>& out) const {
    if (text.empty()) return;
    for (const std::string& word : SplitGpt2(std::string(text), spec_.split_digits)) {
      std::vector<int> symbols;
      symbols.reserve(word.size());
      for (char c : word) symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      const std::vector<int> merged = BpeMerge(std::move(symbols), [this](int a, int b, double* priority, int* id) {
        auto it = merges_.find(PairKey(a, b));
        if (it == merges_.end()) return false;
        *priority = it->second.first;
        *id = it->second.second;
        return true;
      });
      out.insert(out.end(), merged.begin(), merged.end());
    }
  }

  ByteLevelBpeSpec spec_;
  std::vector<std::pair<std::string, int>> control_pieces_;  // control tokens' texts, longest first
  std::unordered_map<std::string, int> ids_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;
  int byte_ids_[256] = {};
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> MakeByteLevelBpeTokenizer(ByteLevelBpeSpec spec, const std::string& file) {
  auto tok = std::make_unique<ByteLevelBpeTokenizer>(std::move(spec));
  KVSTREAM_RETURN_IF_ERROR(tok->Build(file));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace kvstream::model
