// kvstream.encode, decode_into and inspect: the codec on caller's arrays, the GIL released while it runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/src/arrays.h"
#include "bindings/src/errors.h"
#include "bindings/src/module.h"
#include "kvstream/codec.h"

namespace kvstream::python {
namespace {

namespace nb = nanobind;

nb::dict InfoDict(const ChunkInfo& c) {
  nb::dict d;
  const bool lossy = IsLossyLevel(c.level);
  d["version"] = c.version;
  d["level"] = LevelName(c.level);
  d["scheme"] = lossy ? nb::object(nb::str(SchemeName(c.scheme))) : nb::none();
  d["token_begin"] = c.token_begin;
  d["tokens"] = c.tokens;
  d["layers"] = c.layers;
  d["channels"] = c.channels;
  d["bytes"] = c.total_bytes;
  d["header_bytes"] = c.header_bytes;
  d["source_dtype"] = PythonDTypeName(c.source_dtype);
  d["stored_dtype"] = c.level == kLevelFp16 ? nb::object(nb::str(PythonDTypeName(c.stored_dtype))) : nb::none();
  d["in_chunk_tables"] = c.in_chunk_tables;
  d["profile_hash"] = c.profile_hash ? nb::object(nb::int_(c.profile_hash)) : nb::none();
  d["sink_rows"] = c.sink_rows;
  nb::list fine;
  for (size_t t = 0; t < c.fine_rows.size(); ++t) {
    if (c.fine_rows[t]) fine.append(c.token_begin + static_cast<int64_t>(t));
  }
  d["fine_level"] = c.fine_level ? nb::object(nb::str(LevelName(c.fine_level).c_str())) : nb::none();
  d["fine_rows"] = fine;
  d["segments"] = c.segments.size();
  const double values = 2.0 * static_cast<double>(c.layers * c.tokens * c.channels);
  d["bits_per_value"] = values > 0 && c.level != kLevelText ? 8.0 * static_cast<double>(c.total_bytes) / values : 0.0;
  return d;
}

nb::list Encode(nb::handle keys_arg, nb::handle values_arg, nb::handle level_arg, const Profile* profile,
                const std::string& scheme_name, int64_t chunk_tokens, nb::handle token_ids_arg, nb::handle importance_arg,
                double fine_fraction, nb::handle fine_level_arg, int threads, int64_t batch_index, int64_t token_begin,
                nb::handle out_arg) {
  const Level level = LevelArgument(level_arg, "level");
  const Level fine_level = LevelArgument(fine_level_arg, "fine_level");
  const QuantScheme scheme = SchemeArgument(scheme_name);
  if (chunk_tokens < 1 || chunk_tokens > 65536) ThrowArgumentError("chunk_tokens", std::to_string(chunk_tokens) + ", expected 1..65536");
  if (threads < 1 || threads > 256) ThrowArgumentError("threads", std::to_string(threads) + ", expected 1..256");
  if (!(fine_fraction >= 0 && fine_fraction <= 1)) ThrowArgumentError("fine_fraction", std::to_string(fine_fraction) + ", expected 0..1");
  if (token_begin < 0 || token_begin > (int64_t{1} << 40)) ThrowArgumentError("token_begin", std::to_string(token_begin) + ", expected >= 0");
  const KvArrays keys = ImportKv(keys_arg, "keys", Access::kRead, batch_index);
  const KvArrays values = ImportKv(values_arg, "values", Access::kRead, batch_index);
  CheckSameShape(keys, values, "keys", "values");
  const int64_t tokens = keys.tokens;
  const std::vector<int32_t> token_ids = PerToken<int32_t>(token_ids_arg, "token_ids", tokens);
  const std::vector<float> importance = PerToken<float>(importance_arg, "importance", tokens);
  if (level == kLevelText && token_ids.empty()) ThrowArgumentError("token_ids", "level \"text\" sends token ids: pass them");
  if (profile) ThrowIfError(profile->CheckShape(keys.layers, keys.channels, "the KV").WithContext("profile"));
  // Each chunk is written straight into its final home once its size is known: the caller's `out` buffer,
  // one chunk after the other, or a new bytes object (made with the GIL held).
  std::optional<ByteView> out;
  if (!out_arg.is_none()) out.emplace(out_arg, "out", Access::kWrite);
  std::vector<uint64_t> ends;   // `out`: where each chunk ends
  uint64_t short_of = 0;        // `out`: the size of the chunk that did not fit
  const ChunkAllocator into_out = [&](uint64_t size) -> uint8_t* {
    const uint64_t begin = ends.empty() ? 0 : ends.back();
    if (size > out->size() - begin) {
      short_of = size;
      return nullptr;
    }
    ends.push_back(begin + size);
    return out->writable_data() + begin;
  };
  std::vector<nb::bytes> chunks;
  const ChunkAllocator into_bytes = [&chunks](uint64_t size) -> uint8_t* {
    nb::gil_scoped_acquire acquire;
    PyObject* bytes = size <= static_cast<uint64_t>(PY_SSIZE_T_MAX) ? PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size)) : nullptr;
    if (!bytes) {
      PyErr_Clear();  // reported as the codec's kResourceExhausted
      return nullptr;
    }
    chunks.push_back(nb::steal<nb::bytes>(bytes));
    return reinterpret_cast<uint8_t*>(PyBytes_AS_STRING(bytes));
  };
  {
    nb::gil_scoped_release release;
    std::vector<uint8_t> key_storage, value_storage;
    const TensorView k = DenseView(keys, batch_index, &key_storage);
    const TensorView v = DenseView(values, batch_index, &value_storage);
    EncodeOptions options;
    options.level = level;
    options.profile = profile;
    options.scheme = scheme;
    options.threads = threads;
    options.fine_level = fine_level;
    if (!importance.empty() && fine_fraction > 0) {
      options.fine_min_importance = FineRowsThreshold(importance.data(), tokens, fine_fraction);
    }
    for (int64_t t0 = 0; t0 < tokens; t0 += chunk_tokens) {
      const int64_t n = std::min(chunk_tokens, tokens - t0);
      ChunkInput in;
      in.keys = SliceTokens(k, t0, n);
      in.values = SliceTokens(v, t0, n);
      in.token_begin = token_begin + t0;
      in.token_ids = token_ids.empty() ? nullptr : token_ids.data() + t0;
      in.importance = importance.empty() ? nullptr : importance.data() + t0;
      const Status encoded = EncodeChunkInto(in, options, out ? into_out : into_bytes).status();
      if (short_of) {
        throw StatusError(Status::ResourceExhausted(
            "out: " + std::to_string(out->size()) + " bytes; chunk " + std::to_string(ends.size()) + " (" + std::to_string(short_of) +
            " bytes) does not fit after the " + std::to_string(ends.empty() ? 0 : ends.back()) + " bytes of the chunks before it"));
      }
      ThrowIfError(encoded);
    }
  }
  nb::list result;
  if (!out) {
    for (nb::bytes& c : chunks) result.append(std::move(c));
    return result;
  }
  const nb::object bytes_view = nb::steal(PyMemoryView_FromObject(out_arg.ptr())).attr("cast")("B");
  uint64_t begin = 0;
  for (uint64_t end : ends) {
    result.append(bytes_view[nb::slice(static_cast<Py_ssize_t>(begin), static_cast<Py_ssize_t>(end))]);
    begin = end;
  }
  return result;
}

void DecodeInto(nb::handle chunk_arg, nb::handle keys_arg, nb::handle values_arg, const Profile* profile,
                int64_t token_offset, int threads, int64_t batch_index) {
  if (threads < 1 || threads > 256) ThrowArgumentError("threads", std::to_string(threads) + ", expected 1..256");
  const ByteView chunk(chunk_arg, "chunk");
  const KvArrays keys = ImportKv(keys_arg, "keys_out", Access::kWrite, batch_index);
  const KvArrays values = ImportKv(values_arg, "values_out", Access::kWrite, batch_index);
  CheckSameShape(keys, values, "keys_out", "values_out");
  DecodeOptions options;
  options.profile = profile;
  options.threads = threads;
  nb::gil_scoped_release release;
  const ChunkInfo info = ValueOrThrow(ReadChunkHeader(chunk.data(), chunk.size(), options.limits));
  if (info.level == kLevelText) {
    throw StatusError(Status::InvalidArgument("chunk: a text-level chunk holds token ids, not KV (recompute them with a model)"));
  }
  const int64_t first = info.token_begin - token_offset;
  if (first < 0 || first + info.tokens > keys.tokens) {
    throw StatusError(Status::InvalidArgument(
        "keys_out: holds context positions [" + std::to_string(token_offset) + ", " + std::to_string(token_offset + keys.tokens) +
        ") (token_offset " + std::to_string(token_offset) + ") but the chunk has [" + std::to_string(info.token_begin) + ", " +
        std::to_string(info.token_begin + info.tokens) + ")"));
  }
  if (!keys.per_layer) {
    // One array each: the decoder writes their strided views directly.
    ThrowIfError(DecodeChunk(chunk.data(), chunk.size(), options, SliceTokens(ViewOf(keys), first, info.tokens),
                             SliceTokens(ViewOf(values), first, info.tokens)));
    return;
  }
  if (keys.dtype != values.dtype || keys.arrays.front().strides != values.arrays.front().strides) {
    throw StatusError(Status::InvalidArgument("values_out: per-layer arrays of another dtype or strides than keys_out's; "
                                              "expected both laid out alike"));
  }
  ThrowIfError(DecodeChunkInto(chunk.data(), chunk.size(), options, DestinationOf(keys, values, batch_index, token_offset)));
}

nb::dict Inspect(nb::handle chunk_arg) {
  const ByteView chunk(chunk_arg, "chunk");
  Result<ChunkInfo> info = [&] {
    nb::gil_scoped_release release;
    return InspectChunk(chunk.data(), chunk.size());
  }();
  return InfoDict(ValueOrThrow(std::move(info)));
}

}  // namespace

Level LevelArgument(nb::handle value, const std::string& name) {
  const std::string expected = ", expected \"fp16\", \"int8\", \"text\", a lossy level 1..15 or \"L1\"..\"L15\"";
  if (PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr())) {
    const long n = PyLong_AsLong(value.ptr());
    if (n == -1 && PyErr_Occurred()) PyErr_Clear();
    else if (IsLossyLevel(static_cast<Level>(n))) return static_cast<Level>(n);
    ThrowArgumentError(name, nb::str(nb::repr(value)).c_str() + expected);
  }
  if (PyUnicode_Check(value.ptr())) {
    Level level = 0;
    if (ParseLevel(nb::cast<std::string>(value), &level)) return level;
  }
  ThrowArgumentError(name, nb::str(nb::repr(value)).c_str() + expected);
}

QuantScheme SchemeArgument(const std::string& name) {
  Result<QuantScheme> scheme = ParseQuantScheme(name);
  if (!scheme.ok()) ThrowArgumentError("scheme", scheme.status().message());
  return *scheme;
}

void RegisterCodec(nb::module_& m) {
  m.attr("CHUNK_FORMAT_VERSION") = kChunkFormatVersion;
  m.def("encode", &Encode,
        nb::sig("def encode(keys: object, values: object, level: int | str, profile: Profile | None = None, "
                "scheme: str = 'channel-uniform', chunk_tokens: int = 256, *, token_ids: collections.abc.Sequence[int] | None = None, "
                "importance: collections.abc.Sequence[float] | None = None, fine_fraction: float = 0.08, fine_level: int | str = 2, "
                "threads: int = 1, batch_index: int = 0, token_begin: int = 0, out: object | None = None) -> list[bytes] | list[memoryview]"),
        nb::arg("keys"), nb::arg("values"), nb::arg("level"), nb::arg("profile") = nb::none(),
        nb::arg("scheme") = "channel-uniform", nb::arg("chunk_tokens") = 256, nb::kw_only(), nb::arg("token_ids") = nb::none(),
        nb::arg("importance") = nb::none(), nb::arg("fine_fraction") = kDefaultFineFraction, nb::arg("fine_level") = 2,
        nb::arg("threads") = 1, nb::arg("batch_index") = 0, nb::arg("token_begin") = 0, nb::arg("out") = nb::none(),
        "Encodes a context's KV into chunks of chunk_tokens tokens (the last may be shorter); returns their bytes.\n\n"
        "keys, values: one [layers][tokens][channels] array each, or a sequence of per-layer Hugging Face\n"
        "[batch][kv_heads][tokens][head_dim] arrays (row batch_index is encoded; these are gathered once, the\n"
        "others read in place). float16, bfloat16 or float32, any non-negative strides.\n"
        "level: \"fp16\", \"int8\", \"text\" (needs token_ids), a lossy level n or \"L<n>\".\n"
        "scheme: \"channel-uniform\", \"transform\" or \"predicted\" (the last two need a profile learned for them).\n"
        "importance: per token attention received; with the transform and predicted schemes the fine_fraction\n"
        "most important tokens are coded at fine_level.\n"
        "token_begin: the context position of the arrays' first token (for a window of a context); positions\n"
        "below 4 are the sink rows lossy chunks store exactly.\n"
        "out: a writable buffer (bytearray, uint8 array) the chunks are written into one after the other;\n"
        "they are then returned as memoryviews of it. For a caller that encodes again and again into memory\n"
        "it keeps: a new bytes object is new memory, whose first touch the operating system pays for.\n"
        "Too small: ResourceExhaustedError (what was written before stays).");
  m.def("decode_into", &DecodeInto,
        nb::sig("def decode_into(chunk: bytes | bytearray | memoryview, keys_out: object, values_out: object, "
                "profile: Profile | None = None, *, token_offset: int = 0, threads: int = 1, batch_index: int = 0) -> None"),
        nb::arg("chunk"), nb::arg("keys_out"), nb::arg("values_out"),
        nb::arg("profile") = nb::none(), nb::kw_only(), nb::arg("token_offset") = 0, nb::arg("threads") = 1,
        nb::arg("batch_index") = 0,
        "Decodes one chunk in place into destinations that hold the context: the chunk's tokens go to their\n"
        "positions (from its header) minus token_offset. Destinations are laid out as encode's inputs are and\n"
        "written without copies; nothing is written when an argument or the chunk's header is wrong.");
  m.def("inspect", &Inspect, nb::sig("def inspect(chunk: bytes | bytearray | memoryview) -> dict[str, object]"),
        nb::arg("chunk"),
        "Validates a chunk (header, index, every CRC32C) without decoding it; returns its header as a dict.");
}

}  // namespace kvstream::python
