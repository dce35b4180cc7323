// The KV dump (kvstream/kv_dump.h): the schema of docs/kv-dump-format.md over a ZIP archive of stored .npy
// members (model/zip_archive.h, model/npy.h), the layout numpy.savez writes. Writing comes first, then reading:
// each member checked on its own, then the members checked against each other.
#include "kvstream/kv_dump.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>

#include "model/npy.h"
#include "model/zip_archive.h"

namespace kvstream {
namespace {

using model::ExpectArray;
using model::FileSource;
using model::IntAt;
using model::MemorySource;
using model::NpyArray;
using model::NpyHeader;
using model::ReadDirectory;
using model::ReadNpyMember;
using model::Source;
using model::ZipWriter;

constexpr int kConfigFields = 8;  // layers, tokens, kv_dim, n_heads, n_kv_heads, head_dim, rope_layout, vocab_size

// What makes a model's heads inconsistent (what both the writer and the reader refuse), or "".
std::string GeometryError(const KvDump& d) {
  if (d.n_kv_heads < 1 || d.n_heads < 1 || d.rope.head_dim < 1 || d.vocab_size < 1) {
    return "n_heads, n_kv_heads, head_dim and vocab_size must be positive";
  }
  if (d.kv_dim != d.n_kv_heads * d.rope.head_dim) {
    return "kv_dim = " + std::to_string(d.kv_dim) + " is not n_kv_heads x head_dim = " + std::to_string(d.n_kv_heads) + " x " +
           std::to_string(d.rope.head_dim);
  }
  if (d.n_heads % d.n_kv_heads != 0) {
    return "n_heads = " + std::to_string(d.n_heads) + " is not a multiple of n_kv_heads = " + std::to_string(d.n_kv_heads);
  }
  if (d.rope.head_dim % 2 != 0) return "head_dim = " + std::to_string(d.rope.head_dim) + " is odd";
  return "";
}

// ---------------------------------------------------------------------------------------------------------
// Writing

Status CheckDumpFields(const KvDump& d) {
  const uint64_t values = static_cast<uint64_t>(d.layers) * static_cast<uint64_t>(d.tokens) * static_cast<uint64_t>(d.kv_dim);
  if (d.layers < 1 || d.tokens < 1 || d.kv_dim < 1) return Status::InvalidArgument("kv dump: empty shape");
  if (d.dtype != DType::kF32 && d.dtype != DType::kF16) {
    return Status::InvalidArgument(std::string("kv dump: keys and values must be f32 or f16, not ") + DTypeName(d.dtype));
  }
  if (d.keys.size() != values * DTypeSize(d.dtype) || d.values.size() != d.keys.size()) {
    return Status::InvalidArgument("kv dump: keys and values must hold layers x tokens x kv_dim = " + std::to_string(values) +
                                   " values each");
  }
  if (const std::string geometry = GeometryError(d); !geometry.empty()) return Status::InvalidArgument("kv dump: " + geometry);
  if (!d.token_ids.empty() && d.token_ids.size() != static_cast<size_t>(d.tokens)) {
    return Status::InvalidArgument("kv dump: token_ids must be empty or hold one id per token");
  }
  if (!d.importance.empty() && d.importance.size() != static_cast<size_t>(d.tokens)) {
    return Status::InvalidArgument("kv dump: importance must be empty or hold one value per token");
  }
  return Status::Ok();
}

Status WriteMembers(const KvDump& d, ZipWriter& zip) {
  const char* descr = d.dtype == DType::kF16 ? "<f2" : "<f4";
  const std::vector<int64_t> shape = {d.layers, d.tokens, d.kv_dim};
  KVSTREAM_RETURN_IF_ERROR(zip.Add("k.npy", NpyHeader(descr, shape), d.keys.data(), d.keys.size()));
  KVSTREAM_RETURN_IF_ERROR(zip.Add("v.npy", NpyHeader(descr, shape), d.values.data(), d.values.size()));
  if (!d.token_ids.empty()) {
    KVSTREAM_RETURN_IF_ERROR(zip.Add("tokens.npy", NpyHeader("<i4", {d.tokens}), d.token_ids.data(), d.token_ids.size() * 4));
  }
  const int64_t config[kConfigFields] = {
      d.layers,    d.tokens, d.kv_dim, d.n_heads, d.n_kv_heads, d.rope.head_dim, static_cast<int64_t>(d.rope.layout),
      d.vocab_size};
  KVSTREAM_RETURN_IF_ERROR(zip.Add("config.npy", NpyHeader("<i8", {kConfigFields}), config, sizeof config));
  KVSTREAM_RETURN_IF_ERROR(zip.Add("rope_theta.npy", NpyHeader("<f4", {1}), &d.rope.theta, 4));
  if (!d.importance.empty()) {
    KVSTREAM_RETURN_IF_ERROR(
        zip.Add("importance.npy", NpyHeader("<f4", {d.tokens}), d.importance.data(), d.importance.size() * 4));
  }
  return zip.Finish();
}

// ---------------------------------------------------------------------------------------------------------
// Reading

// config.npy's fields into `d`, each within what a model can have.
Status ReadConfig(const NpyArray& config, KvDump* d) {
  KVSTREAM_RETURN_IF_ERROR(ExpectArray(config, "config.npy", {"<i8", "<i4"}, {kConfigFields}));
  const char* names[kConfigFields] = {"layers",     "tokens",   "kv_dim",      "n_heads",
                                      "n_kv_heads", "head_dim", "rope_layout", "vocab_size"};
  const int64_t limits[kConfigFields] = {4096, 1 << 24, 1 << 16, 1 << 12, 1 << 12, 1 << 12, 1, 1 << 24};
  int64_t v[kConfigFields];
  for (int i = 0; i < kConfigFields; ++i) {
    v[i] = IntAt(config, static_cast<uint64_t>(i));
    const int64_t lowest = i == 6 ? 0 : 1;
    if (v[i] < lowest || v[i] > limits[i]) {
      return Status::CorruptData("config.npy: " + std::string(names[i]) + " = " + std::to_string(v[i]) + " outside [" +
                                 std::to_string(lowest) + ", " + std::to_string(limits[i]) + "]");
    }
  }
  d->layers = static_cast<int>(v[0]);
  d->tokens = static_cast<int>(v[1]);
  d->kv_dim = static_cast<int>(v[2]);
  d->n_heads = static_cast<int>(v[3]);
  d->n_kv_heads = static_cast<int>(v[4]);
  d->rope.head_dim = static_cast<int>(v[5]);
  d->rope.layout = static_cast<RopeLayout>(v[6]);
  d->vocab_size = static_cast<int>(v[7]);
  const std::string geometry = GeometryError(*d);
  if (!geometry.empty()) return Status::CorruptData("config.npy: " + geometry);
  return Status::Ok();
}

Status ReadDump(const Source& src, KvDump* d) {
  KVSTREAM_ASSIGN_OR_RETURN(auto members, ReadDirectory(src));
  std::map<std::string, NpyArray> arrays;
  std::map<std::string, std::vector<uint8_t>> small;  // the data of the members besides keys and values
  // Member `name`'s array, its data read into *into (the keys and values) or kept in `small`.
  const auto array = [&](const std::string& name, bool required,
                         std::vector<uint8_t>* into = nullptr) -> Result<const NpyArray*> {
    const auto m = members.find(name);
    if (m == members.end()) {
      if (required) return Status::CorruptData(src.name() + ": no member " + name + " (docs/kv-dump-format.md lists them)");
      return static_cast<const NpyArray*>(nullptr);
    }
    Result<NpyArray> a = ReadNpyMember(src, name, m->second, into ? into : &small[name]);
    if (!a.ok()) return a.status().WithContext(src.name());
    return &(arrays[name] = std::move(*a));
  };
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* config, array("config.npy", true));
  Status st = ReadConfig(*config, d);
  if (!st.ok()) return st.WithContext(src.name());

  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* theta, array("rope_theta.npy", true));
  if (theta->numel != 1 || (theta->descr != "<f4" && theta->descr != "<f8")) {
    return Status::CorruptData(src.name() + ": rope_theta.npy must hold one <f4 or <f8, not " + std::to_string(theta->numel) +
                               " of " + theta->descr);
  }
  double theta_value;
  if (theta->descr == "<f4") {
    float f;
    std::memcpy(&f, theta->data, 4);
    theta_value = f;
  } else {
    std::memcpy(&theta_value, theta->data, 8);
  }
  if (!(theta_value > 0 && theta_value < 1e12)) {
    return Status::CorruptData(src.name() + ": rope_theta = " + std::to_string(theta_value) + ", expected a positive number");
  }
  d->rope.theta = static_cast<float>(theta_value);

  const std::vector<int64_t> shape = {d->layers, d->tokens, d->kv_dim};
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* k, array("k.npy", true, &d->keys));
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* v, array("v.npy", true, &d->values));
  for (const auto& [a, name] : {std::pair{k, "k.npy"}, std::pair{v, "v.npy"}}) {
    st = ExpectArray(*a, name, {"<f4", "<f2"}, shape);
    if (!st.ok()) return st.WithContext(src.name());
  }
  if (k->descr != v->descr) return Status::CorruptData(src.name() + ": k.npy is " + k->descr + ", v.npy " + v->descr);
  d->dtype = k->descr == "<f2" ? DType::kF16 : DType::kF32;

  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* ids, array("tokens.npy", false));
  if (ids) {
    st = ExpectArray(*ids, "tokens.npy", {"<i4", "<i8"}, {d->tokens});
    if (!st.ok()) return st.WithContext(src.name());
    d->token_ids.resize(static_cast<size_t>(d->tokens));
    for (uint64_t t = 0; t < ids->numel; ++t) {
      const int64_t id = IntAt(*ids, t);
      if (id < 0 || id >= d->vocab_size) {
        return Status::CorruptData(src.name() + ": tokens.npy: token " + std::to_string(t) + " is " + std::to_string(id) +
                                   ", outside the vocabulary of " + std::to_string(d->vocab_size));
      }
      d->token_ids[t] = static_cast<int32_t>(id);
    }
  }
  KVSTREAM_ASSIGN_OR_RETURN(const NpyArray* importance, array("importance.npy", false));
  if (importance) {
    st = ExpectArray(*importance, "importance.npy", {"<f4"}, {d->tokens});
    if (!st.ok()) return st.WithContext(src.name());
    d->importance.resize(static_cast<size_t>(d->tokens));
    std::memcpy(d->importance.data(), importance->data, d->importance.size() * 4);
    for (size_t t = 0; t < d->importance.size(); ++t) {
      if (!(d->importance[t] >= 0 && std::isfinite(d->importance[t]))) {
        return Status::CorruptData(src.name() + ": importance.npy: token " + std::to_string(t) + " is " +
                                   std::to_string(d->importance[t]) + ", expected a finite value >= 0");
      }
    }
  }
  return Status::Ok();
}

Result<KvDump> Parse(const Source& src) {
  KvDump d;
  KVSTREAM_RETURN_IF_ERROR(ReadDump(src, &d));
  return d;
}

}  // namespace

TensorView KvDump::keys_view() const {
  return TensorView::Dense(const_cast<uint8_t*>(keys.data()), dtype, layers, tokens, kv_dim);
}
TensorView KvDump::values_view() const {
  return TensorView::Dense(const_cast<uint8_t*>(values.data()), dtype, layers, tokens, kv_dim);
}

Result<KvDump> ParseKvDump(const uint8_t* data, size_t size) { return Parse(MemorySource("kv dump", data, size)); }

Result<KvDump> ReadKvDump(const std::string& path, uint64_t max_bytes) {
  KVSTREAM_ASSIGN_OR_RETURN(const std::unique_ptr<FileSource> file, FileSource::Open(path, max_bytes));
  return Parse(*file);
}

Status WriteKvDump(const KvDump& dump, const std::string& path) {
  KVSTREAM_RETURN_IF_ERROR(CheckDumpFields(dump));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::IoError(path + ": " + std::strerror(errno));
  ZipWriter zip(f, path);
  Status s = WriteMembers(dump, zip);
  if (std::fclose(f) != 0 && s.ok()) s = Status::IoError(path + ": close failed");
  if (!s.ok()) std::remove(path.c_str());
  return s;
}

}  // namespace kvstream
