// Hugging Face tokenizer.json, BPE model in the sentencepiece style (TinyStories, Llama-2 conversions):
// normalizer "prepend U+2581, replace ' ' by U+2581", no pre-tokenizer, merges by rank, <0xXX> byte
// fallback; the decoder undoes it and strips the one leading space.
#include <nlohmann/json.hpp>

#include <unordered_map>

#include "model/binary_reader.h"
#include "model/bpe.h"
#include "model/tokenizers.h"
#include "model/unicode.h"

namespace kvstream::model {
namespace {

using json = nlohmann::json;
const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581

int HexByte(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  const std::string hex = piece.substr(3, 2);
  int v = 0;
  for (char c : hex) {
    const int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

uint64_t PairKey(int a, int b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

class HfBpeTokenizer final : public Tokenizer {
 public:
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int> ids;
  std::unordered_map<uint64_t, std::pair<int, int>> merges;  // (left, right) -> (rank, merged)
  std::vector<int> byte_ids = std::vector<int>(256, -1);
  std::vector<char> special;
  int unk = -1, bos = -1, eos = -1;
  bool fuse_unk = false;  // consecutive unknown characters become one unknown token

  std::vector<int> Encode(const std::string& text, bool add_bos) const override {
    std::vector<int> out;
    if (add_bos && bos >= 0) out.push_back(bos);
    if (text.empty()) return out;
    std::string normalized = kSpaceMark;
    for (char c : text) {
      if (c == ' ') normalized += kSpaceMark;
      else normalized += c;
    }
    std::vector<int> symbols;
    for (const Utf8Char& c : ScanUtf8(normalized)) {
      auto it = c.valid ? ids.find(normalized.substr(c.offset, c.length)) : ids.end();
      if (it != ids.end() && !special[it->second]) {
        symbols.push_back(it->second);
        continue;
      }
      for (uint32_t k = 0; k < c.length; ++k) {
        const int b = byte_ids[static_cast<uint8_t>(normalized[c.offset + k])];
        if (b >= 0) {
          symbols.push_back(b);
        } else if (!(fuse_unk && !symbols.empty() && symbols.back() == unk)) {
          symbols.push_back(unk);
        }
      }
    }
    const std::vector<int> merged = BpeMerge(std::move(symbols), [this](int a, int b, double* priority, int* id) {
      auto it = merges.find(PairKey(a, b));
      if (it == merges.end()) return false;
      *priority = it->second.first;
      *id = it->second.second;
      return true;
    });
    out.insert(out.end(), merged.begin(), merged.end());
    return out;
  }

  std::string Decode(const std::vector<int>& id_list) const override {
    std::string out;
    for (int id : id_list) {
      if (id < 0 || id >= vocab_size() || special[id]) continue;
      const int b = HexByte(pieces[id]);
      if (b >= 0) {
        out += static_cast<char>(b);
        continue;
      }
      const std::string& p = pieces[id];
      for (size_t i = 0; i < p.size();) {
        if (p.compare(i, kSpaceMark.size(), kSpaceMark) == 0) {
          out += ' ';
          i += kSpaceMark.size();
        } else {
          out += p[i++];
        }
      }
    }
    if (!out.empty() && out[0] == ' ') out.erase(0, 1);
    return out;
  }

  int vocab_size() const override { return static_cast<int>(pieces.size()); }
  int bos_id() const override { return bos; }
  int eos_id() const override { return eos; }
  bool adds_bos() const override { return bos >= 0; }
};

// The first of `names` that is in the vocabulary, or -1.
int FindPiece(const std::unordered_map<std::string, int>& ids, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    auto it = ids.find(n);
    if (it != ids.end()) return it->second;
  }
  return -1;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& path, int bos_id, int eos_id) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, uint64_t{1} << 30));
  json root = json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return Status::CorruptData(path + ": not valid JSON");
  auto bad = [&](const std::string& field, const std::string& what) { return Status::CorruptData(path + ": " + field + ": " + what); };
  const json* model = root.contains("model") ? &root["model"] : nullptr;
  if (!model || !model->is_object()) return bad("model", "missing, expected an object");
  if (!model->contains("type") || (*model)["type"] != "BPE") {
    return Status::Unsupported(path + ": model.type = " + (model->contains("type") ? (*model)["type"].dump() : "absent") + ", only BPE is supported");
  }
  const json& vocab = (*model)["vocab"];
  const json& merges = (*model)["merges"];
  if (!vocab.is_object() || vocab.empty()) return bad("model.vocab", "expected a non-empty object");
  if (!merges.is_array()) return bad("model.merges", "expected an array");
  if (vocab.size() > static_cast<size_t>(1) << 21) return bad("model.vocab", std::to_string(vocab.size()) + " entries exceed 2^21");

  auto tok = std::make_unique<HfBpeTokenizer>();
  tok->pieces.resize(vocab.size());
  std::vector<char> seen(vocab.size(), 0);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer()) return bad("model.vocab[" + it.key() + "]", "expected an integer id");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(vocab.size()) || seen[id]) {
      return bad("model.vocab[" + it.key() + "]", "id " + std::to_string(id) + " is out of range or repeated (expected ids 0.." + std::to_string(vocab.size() - 1) + ")");
    }
    seen[id] = 1;
    tok->pieces[id] = it.key();
    tok->ids.emplace(it.key(), static_cast<int>(id));
    const int b = HexByte(it.key());
    if (b >= 0) tok->byte_ids[b] = static_cast<int>(id);
  }
  tok->special.assign(vocab.size(), 0);
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    for (const json& a : root["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer()) return bad("added_tokens", "entry without an integer id");
      const int64_t id = a["id"].get<int64_t>();
      if (id < 0 || id >= static_cast<int64_t>(vocab.size())) return bad("added_tokens", "id " + std::to_string(id) + " outside the vocabulary");
      if (a.value("special", false)) tok->special[id] = 1;
    }
  }
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const json& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) return bad("model.merges[" + std::to_string(rank) + "]", "'" + s + "' is not 'left right'");
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return bad("model.merges[" + std::to_string(rank) + "]", "expected \"left right\" or [left, right]");
    }
    auto l = tok->ids.find(left), r = tok->ids.find(right), o = tok->ids.find(left + right);
    if (l == tok->ids.end() || r == tok->ids.end() || o == tok->ids.end()) {
      return bad("model.merges[" + std::to_string(rank) + "]", "'" + left + " " + right + "' uses a piece missing from the vocabulary");
    }
    tok->merges.emplace(PairKey(l->second, r->second), std::make_pair(static_cast<int>(rank), o->second));
  }
  if (model->contains("unk_token") && (*model)["unk_token"].is_string()) {
    auto it = tok->ids.find((*model)["unk_token"].get<std::string>());
    if (it != tok->ids.end()) tok->unk = it->second;
  }
  tok->fuse_unk = model->contains("fuse_unk") && (*model)["fuse_unk"].is_boolean() && (*model)["fuse_unk"].get<bool>();
  for (int b = 0; b < 256; ++b) {
    if (tok->byte_ids[b] < 0 && tok->unk < 0) return bad("model.vocab", "no <0xXX> byte pieces and no unk_token: some text could not be encoded");
  }
  tok->bos = FindPiece(tok->ids, {"<|start_story|>", "<s>", "<|begin_of_text|>", "<|startoftext|>"});
  tok->eos = FindPiece(tok->ids, {"<|end_story|>", "</s>", "<|end_of_text|>", "<|endoftext|>"});
  if (root.contains("post_processor") && root["post_processor"].is_object()) {
    const json& pp = root["post_processor"];
    if (pp.contains("single") && pp["single"].is_array() && !pp["single"].empty()) {
      const json& first = pp["single"][0];
      if (first.contains("SpecialToken") && first["SpecialToken"].contains("id") && first["SpecialToken"]["id"].is_string()) {
        auto it = tok->ids.find(first["SpecialToken"]["id"].get<std::string>());
        if (it != tok->ids.end()) tok->bos = it->second;
      }
    }
  }
  const int n = static_cast<int>(tok->pieces.size());
  if (bos_id >= n || eos_id >= n) return bad("bos/eos", "ids " + std::to_string(bos_id) + "/" + std::to_string(eos_id) + " outside the vocabulary of " + std::to_string(n));
  if (bos_id >= 0) tok->bos = bos_id;
  if (eos_id >= 0) tok->eos = eos_id;
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace kvstream::model
