// `kvstream kv dump`: writes the KV cache of a text's first T tokens as an uncompressed .npz that numpy
// reads with np.load (format: docs/kv-dump-format.md).
#include <cstdio>
#include <cstring>

#include "tools/kv_methods.h"

namespace kvstream::cli {
namespace {

// CRC-32 (IEEE 802.3, reflected 0xEDB88320), the checksum ZIP requires for every member.
uint32_t Crc32(const uint8_t* data, size_t n, uint32_t crc = 0) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// One .npy file (format version 1.0) in memory: magic, header dict padded to 64 bytes, raw data.
std::vector<uint8_t> Npy(const char* descr, const std::vector<int64_t>& shape, const void* data, size_t bytes) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.erase(dims.size() - 2);  // a 1-tuple keeps its trailing comma: "(3,)"
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  out.push_back(static_cast<uint8_t>(header.size() & 0xFF));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const auto* p = static_cast<const uint8_t*>(data);
  out.insert(out.end(), p, p + bytes);
  return out;
}

// A ZIP archive with stored (uncompressed) members, which is what np.savez writes.
class ZipWriter {
 public:
  explicit ZipWriter(std::FILE* f) : f_(f) {}
  Status Add(const std::string& name, const std::vector<uint8_t>& data) {
    if (data.size() >= 0xFFFFFFFFu || offset_ + data.size() + 100 >= 0xFFFFFFFFu) {
      return Status::ResourceExhausted("kv dump: the archive would exceed 4 GiB (ZIP64 is not written); dump fewer tokens");
    }
    Entry e{name, Crc32(data.data(), data.size()), static_cast<uint32_t>(data.size()), offset_};
    std::vector<uint8_t> h;
    Put32(h, 0x04034b50);
    Put16(h, 20);  // version needed
    Put16(h, 0);   // flags
    Put16(h, 0);   // method: stored
    Put16(h, 0);   // time
    Put16(h, 0x21);  // date: 1980-01-01
    Put32(h, e.crc);
    Put32(h, e.size);
    Put32(h, e.size);
    Put16(h, static_cast<uint16_t>(name.size()));
    Put16(h, 0);
    h.insert(h.end(), name.begin(), name.end());
    KVSTREAM_RETURN_IF_ERROR(Write(h));
    KVSTREAM_RETURN_IF_ERROR(Write(data));
    entries_.push_back(e);
    return Status::Ok();
  }
  Status Finish() {
    std::vector<uint8_t> cd;
    for (const Entry& e : entries_) {
      Put32(cd, 0x02014b50);
      Put16(cd, 20);
      Put16(cd, 20);
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0x21);
      Put32(cd, e.crc);
      Put32(cd, e.size);
      Put32(cd, e.size);
      Put16(cd, static_cast<uint16_t>(e.name.size()));
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0);
      Put16(cd, 0);
      Put32(cd, 0);
      Put32(cd, static_cast<uint32_t>(e.offset));
      cd.insert(cd.end(), e.name.begin(), e.name.end());
    }
    const uint64_t cd_offset = offset_;
    std::vector<uint8_t> end;
    Put32(end, 0x06054b50);
    Put16(end, 0);
    Put16(end, 0);
    Put16(end, static_cast<uint16_t>(entries_.size()));
    Put16(end, static_cast<uint16_t>(entries_.size()));
    Put32(end, static_cast<uint32_t>(cd.size()));
    Put32(end, static_cast<uint32_t>(cd_offset));
    Put16(end, 0);
    KVSTREAM_RETURN_IF_ERROR(Write(cd));
    return Write(end);
  }

 private:
  struct Entry {
    std::string name;
    uint32_t crc, size;
    uint64_t offset;
  };
  static void Put16(std::vector<uint8_t>& b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v));
    b.push_back(static_cast<uint8_t>(v >> 8));
  }
  static void Put32(std::vector<uint8_t>& b, uint32_t v) {
    Put16(b, static_cast<uint16_t>(v));
    Put16(b, static_cast<uint16_t>(v >> 16));
  }
  Status Write(const std::vector<uint8_t>& b) {
    if (!b.empty() && std::fwrite(b.data(), 1, b.size(), f_) != b.size()) {
      return Status::IoError(std::string("kv dump: write failed: ") + std::strerror(errno));
    }
    offset_ += b.size();
    return Status::Ok();
  }
  std::FILE* f_;
  uint64_t offset_ = 0;
  std::vector<Entry> entries_;
};

// The first cache.tokens positions of each layer, densely packed.
std::vector<float> Dense(const std::vector<float>& buf, const KvCache& c) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(c.layers) * c.tokens * c.kv_dim);
  for (int l = 0; l < c.layers; ++l) {
    const float* p = buf.data() + static_cast<size_t>(l) * c.capacity * c.kv_dim;
    out.insert(out.end(), p, p + static_cast<size_t>(c.tokens) * c.kv_dim);
  }
  return out;
}

Status RunKvDump(const Args& args) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string text, args.Require("text"));
  KVSTREAM_ASSIGN_OR_RETURN(std::string out_path, args.Require("out"));
  KVSTREAM_ASSIGN_OR_RETURN(int64_t tokens_wanted, args.GetInt("tokens", 1024));
  if (tokens_wanted < 1 || tokens_wanted > (1 << 20)) return Status::InvalidArgument("--tokens = " + std::to_string(tokens_wanted) + ", expected 1..1048576");
  KVSTREAM_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, LoadModelFromArgs(args));
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<int> tokens, TokenizeFile(*model, text));
  if (tokens.size() < static_cast<size_t>(tokens_wanted)) {
    return Status::InvalidArgument("--text " + text + " has " + std::to_string(tokens.size()) + " tokens, fewer than --tokens " +
                                   std::to_string(tokens_wanted));
  }
  tokens.resize(static_cast<size_t>(tokens_wanted));
  const ModelConfig& c = model->config();
  KvCache cache = KvCache::Allocate(c, static_cast<int>(tokens_wanted));
  KVSTREAM_RETURN_IF_ERROR(model->Forward(tokens, cache, nullptr));

  std::FILE* f = std::fopen(out_path.c_str(), "wb");
  if (!f) return Status::IoError("--out " + out_path + ": " + std::strerror(errno));
  ZipWriter zip(f);
  const std::vector<float> k = Dense(cache.k, cache), v = Dense(cache.v, cache);
  const std::vector<int64_t> shape = {cache.layers, cache.tokens, cache.kv_dim};
  const std::vector<int64_t> config = {c.n_layers, cache.tokens, c.kv_dim(), c.n_heads, c.n_kv_heads, c.head_dim,
                                       static_cast<int64_t>(c.rope_layout), c.vocab_size};
  const float rope_theta = c.rope_theta;
  Status s = zip.Add("k.npy", Npy("<f4", shape, k.data(), k.size() * 4));
  if (s.ok()) s = zip.Add("v.npy", Npy("<f4", shape, v.data(), v.size() * 4));
  if (s.ok()) s = zip.Add("tokens.npy", Npy("<i4", {cache.tokens}, tokens.data(), tokens.size() * 4));
  if (s.ok()) s = zip.Add("config.npy", Npy("<i8", {static_cast<int64_t>(config.size())}, config.data(), config.size() * 8));
  if (s.ok()) s = zip.Add("rope_theta.npy", Npy("<f4", {1}, &rope_theta, 4));
  if (s.ok()) s = zip.Finish();
  if (std::fclose(f) != 0 && s.ok()) s = Status::IoError("--out " + out_path + ": close failed");
  if (!s.ok()) {
    std::remove(out_path.c_str());
    return s;
  }
  std::printf("wrote %s: k, v float32 [%d][%d][%d], tokens int32 [%d] (model %s)\n", out_path.c_str(), cache.layers,
              cache.tokens, cache.kv_dim, cache.tokens, c.name.c_str());
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(kv_dump, {
    "kv dump",
    "write the KV cache of a text as a numpy .npz file",
    "usage: kvstream kv dump --model M --text FILE --out FILE [--tokens T] [--tokenizer PATH] [--threads N]\n\n"
    "Prefills the first T tokens of the text and writes the KV cache as an uncompressed .npz (np.load reads\n"
    "it): k and v float32 [layers][tokens][kv_dim] (keys after RoPE), tokens int32 [tokens], config int64\n"
    "[layers, tokens, kv_dim, n_heads, n_kv_heads, head_dim, rope_layout (0 interleaved, 1 rotate-half),\n"
    "vocab_size], rope_theta float32 [1]. See docs/kv-dump-format.md.\n\n"
    "  --model M         model short name (stories260K, tinystories656k, smollm2) or a path (required)\n"
    "  --text FILE       text whose first T tokens are prefilled (required)\n"
    "  --out FILE        the .npz to write (required)\n"
    "  --tokens T        context length (default 1024)\n"
    "  --tokenizer PATH  tokenizer overriding the one beside the model (default: found with the model)\n"
    "  --threads N       OpenBLAS threads for the forward pass (default 0 = all cores)",
    {"model", "text", "out", "tokens", "tokenizer", "threads"},
    {},
    RunKvDump,
});

}  // namespace kvstream::cli
