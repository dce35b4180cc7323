// GGUF (v2/v3) loader for architecture "llama": metadata, the embedded byte-level BPE tokenizer, and
// tensors of type F32, F16, Q8_0, Q4_0, Q4_1 dequantized to fp32. Every count and size read from the
// file is checked against what is left of it before anything is allocated.
//
// llama.cpp's converter permutes the q/k rows of Hugging Face checkpoints so that GGUF llama models use
// the interleaved ("normal") RoPE; the weights are used as stored with RopeLayout::kInterleaved.
#include <cmath>
#include <cstring>
#include <map>

#include "common/half.h"
#include "model/binary_reader.h"
#include "model/loaders.h"
#include "model/tokenizers.h"

namespace kvstream::model {
namespace {

enum GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9,
  kU64 = 10, kI64 = 11, kF64 = 12,
};
enum GgmlType : uint32_t { kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ8_0 = 8 };

constexpr uint64_t kMaxStringBytes = uint64_t{1} << 24;
constexpr int kMaxArrayDepth = 4;

// A metadata value: a number, a string, or an array of numbers or strings (nested arrays are skipped).
struct Value {
  uint32_t type = 0;
  double number = 0;
  std::string str;
  uint32_t elem_type = 0;
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

size_t ScalarSize(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

Result<std::string> ReadGgufString(ByteReader& r, const std::string& field) {
  KVSTREAM_ASSIGN_OR_RETURN(uint64_t len, r.Read<uint64_t>((field + " length").c_str()));
  if (len > kMaxStringBytes) return r.Error(field, "string length " + std::to_string(len) + " exceeds " + std::to_string(kMaxStringBytes));
  return r.ReadString(len, field.c_str());
}

Result<double> ReadScalar(ByteReader& r, uint32_t t, const std::string& field) {
  const char* f = field.c_str();
  switch (t) {
    case kU8: { KVSTREAM_ASSIGN_OR_RETURN(uint8_t v, r.Read<uint8_t>(f)); return static_cast<double>(v); }
    case kI8: { KVSTREAM_ASSIGN_OR_RETURN(int8_t v, r.Read<int8_t>(f)); return static_cast<double>(v); }
    case kBool: { KVSTREAM_ASSIGN_OR_RETURN(uint8_t v, r.Read<uint8_t>(f)); return static_cast<double>(v != 0); }
    case kU16: { KVSTREAM_ASSIGN_OR_RETURN(uint16_t v, r.Read<uint16_t>(f)); return static_cast<double>(v); }
    case kI16: { KVSTREAM_ASSIGN_OR_RETURN(int16_t v, r.Read<int16_t>(f)); return static_cast<double>(v); }
    case kU32: { KVSTREAM_ASSIGN_OR_RETURN(uint32_t v, r.Read<uint32_t>(f)); return static_cast<double>(v); }
    case kI32: { KVSTREAM_ASSIGN_OR_RETURN(int32_t v, r.Read<int32_t>(f)); return static_cast<double>(v); }
    case kF32: { KVSTREAM_ASSIGN_OR_RETURN(float v, r.Read<float>(f)); return static_cast<double>(v); }
    case kU64: { KVSTREAM_ASSIGN_OR_RETURN(uint64_t v, r.Read<uint64_t>(f)); return static_cast<double>(v); }
    case kI64: { KVSTREAM_ASSIGN_OR_RETURN(int64_t v, r.Read<int64_t>(f)); return static_cast<double>(v); }
    case kF64: { KVSTREAM_ASSIGN_OR_RETURN(double v, r.Read<double>(f)); return v; }
    default: return r.Error(field, "value type " + std::to_string(t) + " is not a GGUF scalar type");
  }
}

Status ReadValue(ByteReader& r, uint32_t type, const std::string& field, int depth, Value* out) {
  out->type = type;
  if (type == kString) {
    KVSTREAM_ASSIGN_OR_RETURN(out->str, ReadGgufString(r, field));
    return Status::Ok();
  }
  if (type != kArray) {
    KVSTREAM_ASSIGN_OR_RETURN(out->number, ReadScalar(r, type, field));
    return Status::Ok();
  }
  if (depth >= kMaxArrayDepth) return r.Error(field, "arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  KVSTREAM_ASSIGN_OR_RETURN(out->elem_type, r.Read<uint32_t>((field + " element type").c_str()));
  KVSTREAM_ASSIGN_OR_RETURN(uint64_t count, r.Read<uint64_t>((field + " count").c_str()));
  const size_t min_size = out->elem_type == kString ? 8 : out->elem_type == kArray ? 12 : ScalarSize(out->elem_type);
  if (min_size == 0) return r.Error(field, "array element type " + std::to_string(out->elem_type) + " is not a GGUF type");
  if (count > r.remaining() / min_size) {
    return r.Error(field, "array of " + std::to_string(count) + " elements cannot fit in the " + std::to_string(r.remaining()) + " bytes left");
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (out->elem_type == kString) {
      KVSTREAM_ASSIGN_OR_RETURN(std::string s, ReadGgufString(r, field));
      out->strings.push_back(std::move(s));
    } else if (out->elem_type == kArray) {
      Value nested;  // parsed for its length only: no field kvstream reads is a nested array
      KVSTREAM_RETURN_IF_ERROR(ReadValue(r, kArray, field, depth + 1, &nested));
    } else {
      KVSTREAM_ASSIGN_OR_RETURN(double v, ReadScalar(r, out->elem_type, field));
      out->numbers.push_back(v);
    }
  }
  return Status::Ok();
}

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ne0 (contiguous) first
  uint32_t type = 0;
  uint64_t offset = 0;
  uint64_t elements = 0;
  uint64_t bytes = 0;
};

class GgufFile {
 public:
  GgufFile(std::vector<uint8_t> bytes, std::string path) : bytes_(std::move(bytes)), r_(bytes_.data(), bytes_.size(), std::move(path)) {}

  Status Parse();
  const std::string& path() const { return r_.file(); }

  const Value* Find(const std::string& key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
  }
  Result<double> Number(const std::string& key) const {
    const Value* v = Find(key);
    if (!v) return Status::CorruptData(path() + ": metadata " + key + " is missing");
    if (v->type == kString || v->type == kArray) return Status::CorruptData(path() + ": metadata " + key + " is not a number");
    return v->number;
  }
  double NumberOr(const std::string& key, double fallback) const {
    const Value* v = Find(key);
    return v && v->type != kString && v->type != kArray ? v->number : fallback;
  }
  Result<int> Int(const std::string& key, int64_t lo, int64_t hi) const {
    KVSTREAM_ASSIGN_OR_RETURN(double v, Number(key));
    if (!(v >= static_cast<double>(lo) && v <= static_cast<double>(hi)) || v != std::floor(v)) {
      return Status::CorruptData(path() + ": metadata " + key + " = " + std::to_string(v) + ", expected an integer in " +
                                 std::to_string(lo) + ".." + std::to_string(hi));
    }
    return static_cast<int>(v);
  }
  Result<std::string> String(const std::string& key) const {
    const Value* v = Find(key);
    if (!v || v->type != kString) return Status::CorruptData(path() + ": metadata " + key + " is missing or not a string");
    return v->str;
  }

  // Dequantizes tensor `name` to fp32 after checking its shape is exactly `dims` (ne0 first).
  Result<std::vector<float>> Tensor(const std::string& name, std::vector<uint64_t> dims) const;
  bool HasTensor(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo* Info(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
  }

 private:
  std::vector<uint8_t> bytes_;
  ByteReader r_;
  std::map<std::string, Value> kv_;
  std::map<std::string, TensorInfo> tensors_;
  uint64_t data_start_ = 0;
};

Status GgufFile::Parse() {
  KVSTREAM_ASSIGN_OR_RETURN(uint32_t magic, r_.Read<uint32_t>("magic"));
  if (magic != 0x46554747u) return r_.Error("magic", "not a GGUF file (expected the bytes 'GGUF')");
  KVSTREAM_ASSIGN_OR_RETURN(uint32_t version, r_.Read<uint32_t>("version"));
  if (version != 2 && version != 3) {
    return Status::Unsupported(path() + ": version = " + std::to_string(version) + ", expected 2 or 3");
  }
  KVSTREAM_ASSIGN_OR_RETURN(uint64_t n_tensors, r_.Read<uint64_t>("tensor_count"));
  KVSTREAM_ASSIGN_OR_RETURN(uint64_t n_kv, r_.Read<uint64_t>("metadata_kv_count"));
  if (n_kv > r_.remaining() / 12) return r_.Error("metadata_kv_count", std::to_string(n_kv) + " entries cannot fit in the file");
  if (n_tensors > r_.remaining() / 28) return r_.Error("tensor_count", std::to_string(n_tensors) + " tensors cannot fit in the file");
  for (uint64_t i = 0; i < n_kv; ++i) {
    KVSTREAM_ASSIGN_OR_RETURN(std::string key, ReadGgufString(r_, "metadata key " + std::to_string(i)));
    KVSTREAM_ASSIGN_OR_RETURN(uint32_t type, r_.Read<uint32_t>(("metadata " + key + " type").c_str()));
    Value v;
    KVSTREAM_RETURN_IF_ERROR(ReadValue(r_, type, "metadata " + key, 0, &v));
    kv_[key] = std::move(v);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    TensorInfo t;
    KVSTREAM_ASSIGN_OR_RETURN(t.name, ReadGgufString(r_, "tensor " + std::to_string(i) + " name"));
    const std::string field = "tensor " + t.name;
    KVSTREAM_ASSIGN_OR_RETURN(uint32_t n_dims, r_.Read<uint32_t>((field + " n_dims").c_str()));
    if (n_dims < 1 || n_dims > 4) return r_.Error(field + " n_dims", std::to_string(n_dims) + ", expected 1..4");
    t.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      KVSTREAM_ASSIGN_OR_RETURN(uint64_t ne, r_.Read<uint64_t>((field + " dims").c_str()));
      if (ne == 0 || ne > (uint64_t{1} << 40) / t.elements) return r_.Error(field + " dims", "dimension " + std::to_string(ne) + " is zero or too large");
      t.dims.push_back(ne);
      t.elements *= ne;
    }
    KVSTREAM_ASSIGN_OR_RETURN(t.type, r_.Read<uint32_t>((field + " type").c_str()));
    KVSTREAM_ASSIGN_OR_RETURN(t.offset, r_.Read<uint64_t>((field + " offset").c_str()));
    const bool quantized = t.type == kGgmlQ4_0 || t.type == kGgmlQ4_1 || t.type == kGgmlQ8_0;
    if (quantized && t.dims[0] % 32 != 0) return r_.Error(field + " dims", "ne0 = " + std::to_string(t.dims[0]) + " is not a multiple of the block size 32");
    switch (t.type) {
      case kGgmlF32: t.bytes = t.elements * 4; break;
      case kGgmlF16: t.bytes = t.elements * 2; break;
      case kGgmlQ4_0: t.bytes = t.elements / 32 * 18; break;
      case kGgmlQ4_1: t.bytes = t.elements / 32 * 20; break;
      case kGgmlQ8_0: t.bytes = t.elements / 32 * 34; break;
      default: break;  // rejected when the tensor is used, so unused exotic tensors do not block a load
    }
    tensors_[t.name] = std::move(t);
  }
  uint64_t alignment = 32;
  if (const Value* a = Find("general.alignment")) {
    if (a->type == kString || a->type == kArray || a->number < 1 || a->number > 65536 ||
        (static_cast<uint64_t>(a->number) & (static_cast<uint64_t>(a->number) - 1)) != 0) {
      return r_.Error("general.alignment", "expected a power of two up to 65536");
    }
    alignment = static_cast<uint64_t>(a->number);
  }
  data_start_ = (r_.offset() + alignment - 1) / alignment * alignment;
  if (data_start_ > bytes_.size()) return r_.Truncated("tensor data", data_start_ - r_.offset());
  for (const auto& [name, t] : tensors_) {
    if (t.bytes == 0) continue;
    const uint64_t avail = bytes_.size() - data_start_;
    if (t.offset > avail || t.bytes > avail - t.offset) {
      return Status::CorruptData(path() + ": tensor " + name + ": data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) +
                                 ") lies past the end of the file (" + std::to_string(avail) + " bytes of tensor data)");
    }
  }
  return Status::Ok();
}

std::string DimsString(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

Result<std::vector<float>> GgufFile::Tensor(const std::string& name, std::vector<uint64_t> dims) const {
  const TensorInfo* t = Info(name);
  if (!t) return Status::CorruptData(path() + ": tensor " + name + " is missing");
  std::vector<uint64_t> have = t->dims;
  while (have.size() > dims.size() && have.back() == 1) have.pop_back();
  if (have != dims) {
    return Status::CorruptData(path() + ": tensor " + name + " has shape " + DimsString(t->dims) + ", expected " + DimsString(dims));
  }
  if (t->bytes == 0) {
    return Status::Unsupported(path() + ": tensor " + name + " has ggml type " + std::to_string(t->type) +
                               "; supported: F32 (0), F16 (1), Q4_0 (2), Q4_1 (3), Q8_0 (8)");
  }
  const uint8_t* p = bytes_.data() + data_start_ + t->offset;
  std::vector<float> out(t->elements);
  const uint64_t blocks = t->elements / 32;
  switch (t->type) {
    case kGgmlF32:
      std::memcpy(out.data(), p, t->bytes);
      break;
    case kGgmlF16:
      for (uint64_t i = 0; i < t->elements; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      break;
    case kGgmlQ8_0:
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = p + b * 34;
        uint16_t d16;
        std::memcpy(&d16, blk, 2);
        const float d = HalfToFloat(d16);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = static_cast<float>(static_cast<int8_t>(blk[2 + j])) * d;
      }
      break;
    case kGgmlQ4_0:
    case kGgmlQ4_1: {
      const bool has_min = t->type == kGgmlQ4_1;
      const size_t block_bytes = has_min ? 20 : 18;
      for (uint64_t b = 0; b < blocks; ++b) {
        const uint8_t* blk = p + b * block_bytes;
        uint16_t d16, m16 = 0;
        std::memcpy(&d16, blk, 2);
        if (has_min) std::memcpy(&m16, blk + 2, 2);
        const float d = HalfToFloat(d16), m = has_min ? HalfToFloat(m16) : 0.0f;
        const uint8_t* qs = blk + (has_min ? 4 : 2);
        const int bias = has_min ? 0 : 8;
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = static_cast<float>((qs[j] & 0x0F) - bias) * d + m;
          out[b * 32 + j + 16] = static_cast<float>((qs[j] >> 4) - bias) * d + m;
        }
      }
      break;
    }
    default:
      return Status::Internal("unreachable ggml type");
  }
  return out;
}

// A metadata number as an int, or `fallback` when it is absent or not a representable integer (the
// range check comes before the cast, which would otherwise be undefined behaviour).
int IntOr(double v, int fallback) {
  return v >= -2147483648.0 && v <= 2147483647.0 && v == std::floor(v) ? static_cast<int>(v) : fallback;
}

Result<std::unique_ptr<Tokenizer>> LoadTokenizer(const GgufFile& f) {
  KVSTREAM_ASSIGN_OR_RETURN(std::string kind, f.String("tokenizer.ggml.model"));
  if (kind != "gpt2") {
    return Status::Unsupported(f.path() + ": tokenizer.ggml.model = '" + kind + "', only 'gpt2' (byte-level BPE) is supported");
  }
  ByteLevelBpeSpec spec;
  const Value* tokens = f.Find("tokenizer.ggml.tokens");
  const Value* merges = f.Find("tokenizer.ggml.merges");
  if (!tokens || tokens->type != kArray || tokens->elem_type != kString || tokens->strings.empty()) {
    return Status::CorruptData(f.path() + ": metadata tokenizer.ggml.tokens is missing or not an array of strings");
  }
  if (!merges || merges->type != kArray || merges->elem_type != kString) {
    return Status::CorruptData(f.path() + ": metadata tokenizer.ggml.merges is missing or not an array of strings");
  }
  spec.tokens = tokens->strings;
  spec.merges = merges->strings;
  if (const Value* types = f.Find("tokenizer.ggml.token_type"); types && types->type == kArray) {
    for (double t : types->numbers) spec.token_types.push_back(IntOr(t, 0));
  }
  spec.bos_id = IntOr(f.NumberOr("tokenizer.ggml.bos_token_id", -1), -1);
  spec.eos_id = IntOr(f.NumberOr("tokenizer.ggml.eos_token_id", -1), -1);
  spec.unk_id = IntOr(f.NumberOr("tokenizer.ggml.unknown_token_id", -1), -1);
  spec.add_bos = f.NumberOr("tokenizer.ggml.add_bos_token", 0) != 0;
  std::string pre = "default";
  if (f.Find("tokenizer.ggml.pre")) {
    KVSTREAM_ASSIGN_OR_RETURN(pre, f.String("tokenizer.ggml.pre"));
  }
  // Pre-tokenizers that are the GPT-2 pattern, with or without digits split one by one (llama.cpp's table).
  static const std::map<std::string, bool> kKnownPre = {
      {"default", false}, {"gpt2", false},     {"gpt-2", false},   {"smollm", true},   {"starcoder", true},
      {"refact", true},   {"command-r", true}, {"codeshell", true}, {"exaone", true},  {"minerva-7b", true}};
  auto it = kKnownPre.find(pre);
  if (it == kKnownPre.end()) {
    return Status::Unsupported(f.path() + ": tokenizer.ggml.pre = '" + pre +
                               "' is not supported (supported: default, gpt2, smollm, starcoder, refact, command-r, codeshell, exaone, minerva-7b)");
  }
  spec.split_digits = it->second;
  return MakeByteLevelBpeTokenizer(std::move(spec), f.path());
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const std::string& path) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path));
  GgufFile f(std::move(bytes), path);
  KVSTREAM_RETURN_IF_ERROR(f.Parse());
  return LoadTokenizer(f);
}

Result<LoadedModel> LoadGguf(const std::string& path) {
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path));
  GgufFile f(std::move(bytes), path);
  KVSTREAM_RETURN_IF_ERROR(f.Parse());
  KVSTREAM_ASSIGN_OR_RETURN(std::string arch, f.String("general.architecture"));
  if (arch != "llama") {
    return Status::Unsupported(path + ": general.architecture = '" + arch + "', only 'llama' is supported");
  }
  if (const Value* scaling = f.Find("llama.rope.scaling.type"); scaling && scaling->type == kString && scaling->str != "none") {
    return Status::Unsupported(path + ": llama.rope.scaling.type = '" + scaling->str + "', only unscaled RoPE is supported");
  }
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = path.substr(path.find_last_of('/') + 1);
  if (c.name.size() > 5 && c.name.compare(c.name.size() - 5, 5, ".gguf") == 0) c.name.resize(c.name.size() - 5);
  KVSTREAM_ASSIGN_OR_RETURN(c.dim, f.Int("llama.embedding_length", 1, kMaxDim));
  KVSTREAM_ASSIGN_OR_RETURN(c.hidden_dim, f.Int("llama.feed_forward_length", 1, 8 * kMaxDim));
  KVSTREAM_ASSIGN_OR_RETURN(c.n_layers, f.Int("llama.block_count", 1, kMaxLayers));
  KVSTREAM_ASSIGN_OR_RETURN(c.n_heads, f.Int("llama.attention.head_count", 1, kMaxHeads));
  c.n_kv_heads = c.n_heads;
  if (f.Find("llama.attention.head_count_kv")) {
    KVSTREAM_ASSIGN_OR_RETURN(c.n_kv_heads, f.Int("llama.attention.head_count_kv", 1, kMaxHeads));
  }
  c.head_dim = c.dim / c.n_heads;
  if (f.Find("llama.attention.key_length")) {
    KVSTREAM_ASSIGN_OR_RETURN(c.head_dim, f.Int("llama.attention.key_length", 2, kMaxDim));
  }
  KVSTREAM_ASSIGN_OR_RETURN(c.max_seq_len, f.Int("llama.context_length", 1, kMaxSeqLen));
  const double theta = f.NumberOr("llama.rope.freq_base", 10000.0);
  const double eps = f.NumberOr("llama.attention.layer_norm_rms_epsilon", 1e-5);
  if (!(theta > 0.0 && theta <= 1e12)) return Status::CorruptData(path + ": llama.rope.freq_base = " + std::to_string(theta) + ", expected (0, 1e12]");
  if (!(eps > 0.0 && eps < 1.0)) return Status::CorruptData(path + ": llama.attention.layer_norm_rms_epsilon = " + std::to_string(eps) + ", expected (0, 1)");
  c.rope_theta = static_cast<float>(theta);
  c.rms_eps = static_cast<float>(eps);
  c.rope_layout = RopeLayout::kInterleaved;
  const TensorInfo* emb = f.Info("token_embd.weight");
  if (!emb || emb->dims.size() != 2) return Status::CorruptData(path + ": tensor token_embd.weight is missing or not 2-D");
  if (emb->dims[1] > static_cast<uint64_t>(kMaxVocab)) return Status::CorruptData(path + ": token_embd.weight vocabulary " + std::to_string(emb->dims[1]) + " exceeds " + std::to_string(kMaxVocab));
  c.vocab_size = static_cast<int>(emb->dims[1]);
  c.tied_embeddings = !f.HasTensor("output.weight");
  KVSTREAM_RETURN_IF_ERROR(ValidateConfig(c, path));

  const uint64_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim(), qd = static_cast<uint64_t>(c.n_heads) * c.head_dim;
  LlamaWeights& w = m.weights;
  KVSTREAM_ASSIGN_OR_RETURN(w.token_embedding, f.Tensor("token_embd.weight", {dim, static_cast<uint64_t>(c.vocab_size)}));
  KVSTREAM_ASSIGN_OR_RETURN(w.final_norm, f.Tensor("output_norm.weight", {dim}));
  if (!c.tied_embeddings) {
    KVSTREAM_ASSIGN_OR_RETURN(w.output, f.Tensor("output.weight", {dim, static_cast<uint64_t>(c.vocab_size)}));
  }
  w.layers.resize(c.n_layers);
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    KVSTREAM_ASSIGN_OR_RETURN(L.attn_norm, f.Tensor(p + "attn_norm.weight", {dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wq, f.Tensor(p + "attn_q.weight", {dim, qd}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wk, f.Tensor(p + "attn_k.weight", {dim, kv}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wv, f.Tensor(p + "attn_v.weight", {dim, kv}));
    KVSTREAM_ASSIGN_OR_RETURN(L.wo, f.Tensor(p + "attn_output.weight", {qd, dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.ffn_norm, f.Tensor(p + "ffn_norm.weight", {dim}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_gate, f.Tensor(p + "ffn_gate.weight", {dim, hidden}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_up, f.Tensor(p + "ffn_up.weight", {dim, hidden}));
    KVSTREAM_ASSIGN_OR_RETURN(L.w_down, f.Tensor(p + "ffn_down.weight", {hidden, dim}));
  }
  KVSTREAM_ASSIGN_OR_RETURN(m.tokenizer, LoadTokenizer(f));
  return m;
}

}  // namespace kvstream::model
