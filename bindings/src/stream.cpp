// kvstream.Sender and kvstream.Receiver: serving and fetching contexts from Python, the GIL released while
// a call waits on the network or the codec.
#include "bindings/src/stream.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings/src/arrays.h"
#include "bindings/src/errors.h"
#include "bindings/src/module.h"
#include "kvstream/scheduler.h"

namespace kvstream::python {
namespace {

namespace nb = nanobind;

std::vector<Level> LevelList(nb::handle value) {
  std::vector<Level> levels;
  if (value.is_none()) return levels;
  if (!PyList_Check(value.ptr()) && !PyTuple_Check(value.ptr())) {
    ThrowArgumentError("levels", std::string("expected a list of levels, got ") + Py_TYPE(value.ptr())->tp_name);
  }
  const nb::sequence items = nb::borrow<nb::sequence>(value);
  for (size_t i = 0; i < nb::len(items); ++i) levels.push_back(LevelArgument(items[i], "levels[" + std::to_string(i) + "]"));
  if (levels.empty()) ThrowArgumentError("levels", "empty; expected at least one level (or None for every level)");
  return levels;
}

std::string SecretArgument(nb::handle value) {
  if (value.is_none()) return "";
  std::string secret;
  if (PyBytes_Check(value.ptr())) secret = nb::cast<std::string>(nb::str(value.attr("decode")("latin-1")));
  else if (PyUnicode_Check(value.ptr())) secret = nb::cast<std::string>(value);
  else ThrowArgumentError("secret", std::string("expected str or bytes, got ") + Py_TYPE(value.ptr())->tp_name);
  if (secret.empty() || secret.size() > 4096) ThrowArgumentError("secret", std::to_string(secret.size()) + " bytes, expected 1..4096");
  return secret;
}

void CheckRange(const char* name, int64_t value, int64_t low, int64_t high) {
  if (value < low || value > high) {
    ThrowArgumentError(name, std::to_string(value) + ", expected " + std::to_string(low) + ".." + std::to_string(high));
  }
}

}  // namespace

PySender::PySender(SenderOptions options, const SenderStarter& start) {
  Result<std::unique_ptr<Sender>> sender = [&] {
    nb::gil_scoped_release release;
    return start(std::move(options));
  }();
  sender_.Reset(ValueOrThrow(std::move(sender)));
}

void PySender::Close() {
  sender_.Close();
  registered_.clear();  // nothing reads the arrays any more
}

int PySender::Port() {
  return sender_.Run([](Sender& s) { return s.port(); });
}

void PySender::Register(const std::string& id, nb::handle keys_arg, nb::handle values_arg, nb::handle token_ids_arg,
                        nb::handle importance_arg, int64_t batch_index) {
  const KvArrays keys = ImportKv(keys_arg, "keys", Access::kRead, batch_index);
  const KvArrays values = ImportKv(values_arg, "values", Access::kRead, batch_index);
  CheckSameShape(keys, values, "keys", "values");
  ContextSpec spec;
  spec.token_ids = PerToken<int32_t>(token_ids_arg, "token_ids", keys.tokens);
  spec.importance = PerToken<float>(importance_arg, "importance", keys.tokens);
  auto storage = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
  spec.keys = DenseView(keys, batch_index, &storage->first);
  spec.values = DenseView(values, batch_index, &storage->second);
  if (keys.per_layer) spec.owner = storage;
  ThrowIfError(sender_.Run([&](Sender& s) { return s.Register(id, std::move(spec)); }));
  registered_[id] = {nb::borrow(keys_arg), nb::borrow(values_arg)};
}

void PySender::Unregister(const std::string& id) {
  ThrowIfError(sender_.Run([&](Sender& s) { return s.Unregister(id); }));
  registered_.erase(id);
}

nb::dict PySender::Stats() {
  const Sender::Stats s = sender_.Run([](Sender& sender) { return sender.stats(); });
  nb::dict d;
  d["connections"] = s.connections;
  d["chunks_sent"] = s.chunks_sent;
  d["bytes_sent"] = s.bytes_sent;
  d["cache_bytes"] = s.cache_bytes;
  d["encodes"] = s.encodes;
  d["sends_pending"] = s.sends_pending;
  d["contexts"] = registered_.size();
  return d;
}

SenderOptions SenderOptionsOf(const std::string& host, int port, const Profile* profile, nb::handle secret,
                              const std::string& scheme, nb::handle levels, int chunk_tokens, double fine_fraction,
                              nb::handle fine_level, uint64_t cache_bytes, int encode_threads, int max_connections) {
  SenderOptions options;
  CheckRange("port", port, 0, 65535);
  CheckRange("chunk_tokens", chunk_tokens, 1, 65536);
  CheckRange("encode_threads", encode_threads, 1, 256);
  CheckRange("max_connections", max_connections, 1, 65536);
  if (!(fine_fraction >= 0 && fine_fraction <= 1)) ThrowArgumentError("fine_fraction", std::to_string(fine_fraction) + ", expected 0..1");
  options.listen_host = host;
  options.listen_port = port;
  options.control.secret = SecretArgument(secret);
  if (profile) options.profile = std::make_shared<const Profile>(*profile);
  options.scheme = SchemeArgument(scheme);
  options.levels = LevelList(levels);
  options.chunk_tokens = chunk_tokens;
  options.fine_fraction = fine_fraction;
  options.fine_level = LevelArgument(fine_level, "fine_level");
  options.cache_bytes = cache_bytes;
  options.encode_threads = encode_threads;
  options.max_connections = max_connections;
  return options;
}

namespace {

nb::dict ChunkDict(const ChunkTelemetry& t) {
  nb::dict d;
  d["chunk"] = t.chunk;
  d["level"] = LevelName(t.level);
  d["bytes"] = t.bytes;
  d["requested_at_ms"] = 1000 * t.requested_at_s;
  d["received_at_ms"] = 1000 * t.received_at_s;
  d["ready_ms"] = 1000 * t.decoded_at_s;
  d["transfer_ms"] = 1000 * t.transfer_s;
  d["decode_ms"] = 1000 * t.decode_s;
  return d;
}

// What `kvstream fetch --json` prints for a fetch, with the same names, plus the chunks and the estimate.
nb::dict ResultDict(const FetchResult& r, const LevelPolicy& policy, int inflight) {
  nb::dict d;
  d["context"] = r.context_id;
  d["policy"] = policy.name();
  d["bytes"] = r.bytes;
  d["kv_ready_ms"] = 1000 * r.kv_ready_s;
  d["inflight"] = inflight;
  d["retries"] = r.retries;
  d["deadline_met"] = r.deadline_met;
  d["last_byte_ms"] = 1000 * r.last_byte_s;
  d["decode_ms"] = 1000 * r.decode_s;
  d["path"] = r.path;
  d["device"] = r.device;
  d["complete"] = r.complete;
  const auto* adaptive = dynamic_cast<const AdaptivePolicy*>(&policy);
  d["bandwidth_estimate_bps"] = adaptive ? nb::object(nb::float_(adaptive->bandwidth_estimate_bps())) : nb::none();
  d["link_prior_bps"] = r.link_prior.bandwidth_bps;
  d["link_prior_rtt_ms"] = 1000 * r.link_prior.rtt_s;
  nb::list chunks;
  for (const ChunkTelemetry& t : r.chunks) chunks.append(ChunkDict(t));
  d["chunks"] = chunks;
  return d;
}

}  // namespace

PyReceiver::PyReceiver(const std::string& host, int port, nb::handle secret, const Profile* profile, int max_inflight_chunks,
                       int decode_threads, int chunk_timeout_ms, int connect_timeout_ms) {
  CheckRange("port", port, 1, 65535);
  CheckRange("max_inflight_chunks", max_inflight_chunks, 1, 1024);
  CheckRange("decode_threads", decode_threads, 1, 256);
  CheckRange("chunk_timeout_ms", chunk_timeout_ms, 1, 3600 * 1000);
  CheckRange("connect_timeout_ms", connect_timeout_ms, 1, 3600 * 1000);
  ReceiverOptions options;
  options.control.secret = SecretArgument(secret);
  options.control.connect_timeout_ms = connect_timeout_ms;
  if (profile) options.profile = std::make_shared<const Profile>(*profile);
  options.max_inflight_chunks = max_inflight_chunks;
  options.decode_threads = decode_threads;
  options.chunk_timeout_ms = chunk_timeout_ms;
  inflight_ = max_inflight_chunks;
  Result<std::unique_ptr<Receiver>> receiver = [&] {
    nb::gil_scoped_release release;
    return Receiver::Connect(host, port, std::move(options));
  }();
  receiver_.Reset(ValueOrThrow(std::move(receiver)));
}

nb::dict PyReceiver::Manifest(const std::string& id) {
  const ManifestReply m = ValueOrThrow(receiver_.Run([&](Receiver& r) { return r.GetManifest(id); }));
  nb::dict d;
  d["context"] = m.context_id;
  d["layers"] = m.layers;
  d["channels"] = m.channels;
  d["dtype"] = PythonDTypeName(m.dtype);
  d["tokens"] = m.manifest.total_tokens;
  d["chunks"] = m.manifest.num_chunks;
  d["chunk_tokens"] = nb::cast(m.manifest.chunk_tokens);
  nb::list levels;
  for (size_t i = 0; i < m.manifest.levels.size(); ++i) {
    nb::dict level;
    level["level"] = LevelName(m.manifest.levels[i].level);
    level["quality"] = m.manifest.levels[i].quality;
    uint64_t bytes = 0;
    for (const std::vector<uint64_t>& chunk : m.manifest.bytes) bytes += i < chunk.size() ? chunk[i] : 0;
    level["bytes"] = bytes;
    levels.append(level);
  }
  d["levels"] = levels;
  return d;
}

nb::dict PyReceiver::Fetch(const std::string& id, nb::handle keys_arg, nb::handle values_arg, double deadline_ms,
                           const std::string& policy_name, int64_t batch_index) {
  if (!(deadline_ms > 0)) ThrowArgumentError("deadline_ms", std::to_string(deadline_ms) + ", expected > 0");
  Result<std::unique_ptr<LevelPolicy>> made = MakeLevelPolicy(policy_name);
  if (!made.ok()) ThrowArgumentError("policy", made.status().message());
  std::unique_ptr<LevelPolicy> policy = std::move(made).value();
  const KvArrays keys = ImportKv(keys_arg, "keys_out", Access::kWrite, batch_index);
  const KvArrays values = ImportKv(values_arg, "values_out", Access::kWrite, batch_index);
  CheckSameShape(keys, values, "keys_out", "values_out");
  if (keys.per_layer && (keys.dtype != values.dtype || keys.arrays.front().strides != values.arrays.front().strides)) {
    ThrowArgumentError("values_out", "per-layer arrays of another dtype or strides than keys_out's; expected both laid out alike");
  }
  Result<FetchResult> result = receiver_.Run([&](Receiver& r) -> Result<FetchResult> {
    if (keys.per_layer) return r.Fetch(id, DestinationOf(keys, values, batch_index, 0), deadline_ms / 1000, *policy);
    return r.Fetch(id, ViewOf(keys), ViewOf(values), deadline_ms / 1000, *policy);
  });
  return ResultDict(ValueOrThrow(std::move(result)), *policy, inflight_);
}

void RegisterStream(nb::module_& m) {
  nb::class_<PySender>(m, "Sender",
                       "A prefill node's server: serves registered contexts' chunks to Receivers (kvstream serve).\n"
                       "Safe to use from several threads; close() (or a with block) stops serving.")
      .def(nb::new_([](const std::string& host, int port, const Profile* profile, nb::handle secret, const std::string& scheme,
                       nb::handle levels, int chunk_tokens, double fine_fraction, nb::handle fine_level, uint64_t cache_bytes,
                       int encode_threads, int max_connections) {
             return std::make_unique<PySender>(SenderOptionsOf(host, port, profile, secret, scheme, levels, chunk_tokens,
                                                               fine_fraction, fine_level, cache_bytes, encode_threads,
                                                               max_connections),
                                               &Sender::Start);
           }),
           nb::arg("host") = "127.0.0.1", nb::arg("port") = 0, nb::arg("profile") = nb::none(), nb::arg("secret") = nb::none(),
           nb::kw_only(), nb::arg("scheme") = "channel-uniform", nb::arg("levels") = nb::none(), nb::arg("chunk_tokens") = 256,
           nb::arg("fine_fraction") = kDefaultFineFraction, nb::arg("fine_level") = 2,
           nb::arg("cache_bytes") = uint64_t{512} << 20, nb::arg("encode_threads") = 1, nb::arg("max_connections") = 256,
           "Starts serving on host:port (port 0 picks a free one: .port). levels: those offered (default fp16,\n"
           "int8, every lossy level and text where token ids exist); secret: a shared secret receivers must know.")
      .def_prop_ro("port", &PySender::Port)
      .def("register", &PySender::Register, nb::arg("context_id"), nb::arg("keys"), nb::arg("values"),
           nb::arg("token_ids") = nb::none(), nb::kw_only(), nb::arg("importance") = nb::none(), nb::arg("batch_index") = 0,
           "Serves a context: keys and values as encode takes them, read in place while it is registered (a\n"
           "Hugging Face layout is copied once); token_ids allow the text level, importance fine rows.")
      .def("unregister", &PySender::Unregister, nb::arg("context_id"))
      .def("stats", &PySender::Stats, "connections, chunks_sent, bytes_sent, cache_bytes, encodes, sends_pending, contexts")
      .def("close", &PySender::Close, "Stops serving: connections close and pending sends fail.")
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", [](PySender& s, nb::args) { s.Close(); });

  nb::class_<PyReceiver>(m, "Receiver",
                         "A decode node's connection to a Sender: fetches contexts into the caller's arrays (kvstream fetch).\n"
                         "Fetches from several threads run one at a time.")
      .def(nb::init<const std::string&, int, nb::handle, const Profile*, int, int, int, int>(), nb::arg("host"), nb::arg("port"),
           nb::arg("secret") = nb::none(), nb::arg("profile") = nb::none(), nb::kw_only(), nb::arg("max_inflight_chunks") = 2,
           nb::arg("decode_threads") = 1, nb::arg("chunk_timeout_ms") = 10000, nb::arg("connect_timeout_ms") = 5000,
           "Connects and authenticates (PermissionDeniedError for a wrong secret, UnavailableError when nobody\n"
           "listens). profile: the one the sender encodes with, needed for its lossy chunks.")
      .def("manifest", &PyReceiver::Manifest, nb::arg("context_id"),
           "What the sender offers for a context: shape, chunks, levels with their bytes and quality.")
      .def("fetch", &PyReceiver::Fetch, nb::arg("context_id"), nb::arg("keys_out"), nb::arg("values_out"),
           nb::arg("deadline_ms") = 1000.0, nb::arg("policy") = "kvstream", nb::kw_only(), nb::arg("batch_index") = 0,
           nb::sig("def fetch(self, context_id: str, keys_out: object, values_out: object, deadline_ms: float = 1000.0, "
                   "policy: str = 'kvstream', *, batch_index: int = 0) -> dict[str, object]"),
           "Fetches every chunk into keys_out / values_out (either layout, holding the whole context). policy:\n"
           "\"kvstream\" (adaptive), \"cachegen-rule\" or \"fixed-<level>\". Returns what kvstream fetch --json\n"
           "prints (bytes, kv_ready_ms, last_byte_ms, decode_ms, retries, deadline_met, path, ...), the\n"
           "bandwidth estimate and per chunk its level, bytes, and transfer and decode times.")
      .def(
          "fetch_async",
          [](nb::handle self, nb::args args, nb::kwargs kwargs) {
            nb::object call = nb::module_::import_("functools").attr("partial")(self.attr("fetch"), *args, **kwargs);
            return nb::module_::import_("asyncio").attr("get_running_loop")().attr("run_in_executor")(nb::none(), call);
          },
          nb::sig("def fetch_async(self, context_id: str, keys_out: object, values_out: object, deadline_ms: float = 1000.0, "
                  "policy: str = 'kvstream', *, batch_index: int = 0) -> asyncio.Future[dict[str, object]]"),
          "fetch in the running event loop's executor: `result = await receiver.fetch_async(...)`.")
      .def("close", &PyReceiver::Close)
      .def("__enter__", [](nb::handle self) { return self; })
      .def("__exit__", [](PyReceiver& r, nb::args) { r.Close(); });
}

}  // namespace kvstream::python
