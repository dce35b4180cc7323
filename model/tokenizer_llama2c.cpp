// llama2.c's tokenizer (tokenizer.bin): sentencepiece BPE by piece score with <0xXX> byte fallback.
// Vocabularies trained without byte fallback (character-level ones, say) have no byte pieces: there a
// character the vocabulary lacks becomes the unknown piece, one <unk> for each run of such characters
// (what the Hugging Face tokenizer here does with fuse_unk), and Decode drops it.
#include <unordered_map>

#include "model/binary_reader.h"
#include "model/bpe.h"
#include "model/tokenizers.h"
#include "model/unicode.h"

namespace kvstream::model {
namespace {

// Parses "<0xAB>" into 0xAB; -1 for any other piece.
int BytePieceValue(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = piece[i];
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

class Llama2cTokenizer final : public Tokenizer {
 public:
  Llama2cTokenizer(std::vector<std::string> pieces, std::vector<float> scores)
      : pieces_(std::move(pieces)), scores_(std::move(scores)), byte_ids_(256, -1) {
    for (int i = 0; i < static_cast<int>(pieces_.size()); ++i) {
      const int b = BytePieceValue(pieces_[i]);
      if (b >= 0 && byte_ids_[b] < 0) byte_ids_[b] = i;
      // Control and byte pieces are never the result of a merge, so literal "<s>" stays text.
      if (b < 0 && i != kBos && i != kEos && i != kUnk) ids_.emplace(pieces_[i], i);
    }
  }
  Status Check(const std::string& path) const {
    if (!ids_.count(" ")) return Status::CorruptData(path + ": the vocabulary has no ' ' piece (dummy prefix)");
    return Status::Ok();
  }

  std::vector<int> Encode(const std::string& text, bool add_bos) const override {
    std::vector<int> out;
    if (add_bos) out.push_back(kBos);
    if (text.empty()) return out;
    std::vector<int> symbols{ids_.at(" ")};
    for (const Utf8Char& c : ScanUtf8(text)) {
      auto it = c.valid ? ids_.find(text.substr(c.offset, c.length)) : ids_.end();
      if (it != ids_.end()) {
        symbols.push_back(it->second);
      } else if (HasBytePieces(text, c)) {
        for (uint32_t k = 0; k < c.length; ++k) symbols.push_back(byte_ids_[static_cast<uint8_t>(text[c.offset + k])]);
      } else if (symbols.back() != kUnk) {
        symbols.push_back(kUnk);
      }
    }
    const std::vector<int> merged = BpeMerge(std::move(symbols), [this](int a, int b, double* priority, int* id) {
      if (a == kUnk || b == kUnk || BytePieceValue(pieces_[a]) >= 0 || BytePieceValue(pieces_[b]) >= 0) return false;
      auto it = ids_.find(pieces_[a] + pieces_[b]);
      if (it == ids_.end()) return false;
      *priority = -static_cast<double>(scores_[it->second]);
      *id = it->second;
      return true;
    });
    out.insert(out.end(), merged.begin(), merged.end());
    return out;
  }

  std::string Decode(const std::vector<int>& ids) const override {
    std::string out;
    bool first = true;
    for (int id : ids) {
      if (id < 0 || id >= vocab_size() || id == kBos || id == kEos || id == kUnk) continue;
      const std::string& piece = pieces_[id];
      const int b = BytePieceValue(piece);
      if (b >= 0) {
        out += static_cast<char>(b);
      } else if (first && !piece.empty() && piece[0] == ' ') {
        out.append(piece, 1, std::string::npos);  // the dummy prefix added by Encode
      } else {
        out += piece;
      }
      first = false;
    }
    return out;
  }

  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return kBos; }
  int eos_id() const override { return kEos; }
  bool adds_bos() const override { return true; }

 private:
  static constexpr int kUnk = 0, kBos = 1, kEos = 2;  // fixed by llama2.c
  // Whether every byte of character `c` of `text` has a byte piece (all do, or none, in known vocabularies).
  bool HasBytePieces(const std::string& text, const Utf8Char& c) const {
    for (uint32_t k = 0; k < c.length; ++k) {
      if (byte_ids_[static_cast<uint8_t>(text[c.offset + k])] < 0) return false;
    }
    return true;
  }
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int> byte_ids_;
  std::unordered_map<std::string, int> ids_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, uint64_t{1} << 30));
  ByteReader r(bytes.data(), bytes.size(), path);
  KVSTREAM_ASSIGN_OR_RETURN(int32_t max_len, r.Read<int32_t>("max_token_length"));
  if (max_len < 1 || max_len > 4096) {
    return r.Error("max_token_length", std::to_string(max_len) + ", expected 1..4096");
  }
  if (vocab_size < 3) return Status::InvalidArgument(path + ": vocab_size " + std::to_string(vocab_size) + " < 3");
  // Each entry takes at least 8 bytes, which bounds the vocabulary the file can hold.
  if (static_cast<uint64_t>(vocab_size) * 8 > r.remaining()) {
    return r.Truncated("vocabulary of " + std::to_string(vocab_size) + " tokens", uint64_t{8} * vocab_size);
  }
  std::vector<std::string> pieces(vocab_size);
  std::vector<float> scores(vocab_size);
  for (int i = 0; i < vocab_size; ++i) {
    const std::string field = "token " + std::to_string(i);
    KVSTREAM_ASSIGN_OR_RETURN(scores[i], r.Read<float>((field + " score").c_str()));
    KVSTREAM_ASSIGN_OR_RETURN(int32_t len, r.Read<int32_t>((field + " length").c_str()));
    if (len < 0 || len > max_len) {
      return r.Error(field + " length", std::to_string(len) + ", expected 0.." + std::to_string(max_len));
    }
    KVSTREAM_ASSIGN_OR_RETURN(pieces[i], r.ReadString(static_cast<uint64_t>(len), (field + " bytes").c_str()));
  }
  auto tok = std::make_unique<Llama2cTokenizer>(std::move(pieces), std::move(scores));
  KVSTREAM_RETURN_IF_ERROR(tok->Check(path));
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace kvstream::model
