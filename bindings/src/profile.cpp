// kvstream.Profile: load, parse, inspect and learn a model's codec profile.
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings/src/arrays.h"
#include "bindings/src/errors.h"
#include "bindings/src/module.h"
#include "common/whole_file.h"
#include "kvstream/model.h"
#include "kvstream/profile.h"
#include "measure/profile_learning.h"

namespace kvstream::python {
namespace {

namespace nb = nanobind;

nb::object Measured(double value) { return std::isnan(value) ? nb::none() : nb::object(nb::float_(value)); }

nb::dict QualityDict(const LevelQuality& q) {
  nb::dict d;
  d["top1_agreement"] = Measured(q.top1_agreement);
  d["ppl_delta_pct"] = Measured(q.ppl_delta_pct);
  d["kl_mean"] = Measured(q.kl_mean);
  d["bits_per_value"] = Measured(q.bits_per_value);
  return d;
}

nb::dict Summary(const Profile& p) {
  const ProfileSummary s = p.Summary();
  nb::dict d;
  d["model"] = p.model();
  d["hash"] = HashHex(p.hash());
  d["bytes"] = p.bytes().size();
  d["layers"] = p.layers();
  d["channels"] = p.channels();
  nb::list schemes;
  for (QuantScheme scheme : {QuantScheme::kChannelUniform, QuantScheme::kTransform, QuantScheme::kPredicted}) {
    if (p.Supports(scheme)) schemes.append(SchemeName(scheme));
  }
  d["schemes"] = schemes;
  nb::list levels;
  for (const LevelSpec& spec : p.ladder()) {
    nb::dict level;
    level["level"] = LevelName(spec.level);
    level["key_step"] = spec.step_multiplier[0];
    level["value_step"] = spec.step_multiplier[1];
    nb::dict quality;
    for (QuantScheme scheme : {QuantScheme::kChannelUniform, QuantScheme::kTransform, QuantScheme::kPredicted}) {
      const std::vector<LevelQuality>& q = p.QualityOf(scheme);
      if (static_cast<size_t>(spec.level - 1) < q.size()) quality[SchemeName(scheme)] = QualityDict(q[static_cast<size_t>(spec.level - 1)]);
    }
    level["quality"] = quality;
    levels.append(level);
  }
  d["levels"] = levels;
  auto components = [](const ProfileSummary::Components& c) { return nb::cast(c.kept_share); };
  if (p.Supports(QuantScheme::kTransform)) {
    nb::dict t;
    t["kept_share"] = components(s.transform);
    t["rope_head_dim"] = s.transform_rope.head_dim;
    t["rope_theta"] = s.transform_rope.theta;
    t["rope_layout"] = s.transform_rope.layout == RopeLayout::kRotateHalf ? "rotate-half" : "interleaved";
    d["transform"] = t;
  } else {
    d["transform"] = nb::none();
  }
  if (p.Supports(QuantScheme::kPredicted)) {
    nb::dict pr;
    pr["kept_share"] = components(s.predicted);
    pr["predictor_matrices"] = s.predictor_matrices;
    pr["byte_predictors"] = s.byte_predictors;
    d["predicted"] = pr;
  } else {
    d["predicted"] = nb::none();
  }
  const std::optional<MeasuredFineRows> fine = p.measured_fine_rows();
  if (fine) {
    nb::dict f;
    f["fraction"] = fine->fraction;
    f["level"] = fine->level ? nb::object(nb::str(LevelName(fine->level).c_str())) : nb::none();
    d["measured_fine_rows"] = f;
  } else {
    d["measured_fine_rows"] = nb::none();
  }
  return d;
}

RopeLayout RopeLayoutArgument(const std::string& name) {
  if (name == "interleaved") return RopeLayout::kInterleaved;
  if (name == "rotate-half") return RopeLayout::kRotateHalf;
  ThrowArgumentError("rope_layout", "\"" + name + "\", expected \"interleaved\" (llama.cpp, llama2.c) or \"rotate-half\" (Hugging Face)");
}

// Sample contexts as the caller passed them: a list of (keys, values) pairs in encode's layouts.
struct Samples {
  std::vector<KvArrays> keys, values;
};

Samples ImportSamples(nb::handle samples_arg) {
  if (!PyList_Check(samples_arg.ptr()) && !PyTuple_Check(samples_arg.ptr())) {
    ThrowArgumentError("samples", std::string("expected a list of (keys, values) pairs, got ") + Py_TYPE(samples_arg.ptr())->tp_name);
  }
  const nb::sequence samples = nb::borrow<nb::sequence>(samples_arg);
  Samples out;
  for (size_t i = 0; i < nb::len(samples); ++i) {
    const std::string name = "samples[" + std::to_string(i) + "]";
    nb::handle pair = samples[i];
    if (!(PyTuple_Check(pair.ptr()) || PyList_Check(pair.ptr())) || nb::len(pair) != 2) {
      ThrowArgumentError(name, "expected a (keys, values) pair");
    }
    out.keys.push_back(ImportKv(pair[0], name + "[0]", Access::kRead, 0));
    out.values.push_back(ImportKv(pair[1], name + "[1]", Access::kRead, 0));
    CheckSameShape(out.keys.back(), out.values.back(), name + "[0]", name + "[1]");
  }
  return out;
}

// The samples as [layers][tokens][channels] views; `storage` keeps the copies Hugging Face layouts need.
std::vector<KvSample> SampleViews(const Samples& samples, std::vector<std::vector<uint8_t>>* storage) {
  std::vector<KvSample> views;
  storage->resize(samples.keys.size() * 2);
  for (size_t i = 0; i < samples.keys.size(); ++i) {
    views.push_back({DenseView(samples.keys[i], 0, &(*storage)[2 * i]), DenseView(samples.values[i], 0, &(*storage)[2 * i + 1])});
  }
  return views;
}

void CheckLadderSize(const std::vector<float>& ladder) {
  if (ladder.size() > static_cast<size_t>(kMaxLossyLevel)) {
    ThrowArgumentError("ladder", std::to_string(ladder.size()) + " steps, expected at most " + std::to_string(kMaxLossyLevel));
  }
}

Profile LearnFromSamples(nb::handle samples_arg, const std::string& model, bool transform, bool predict, bool byte_predictors,
                         int rope_head_dim, float rope_theta, const std::string& rope_layout, int max_tables,
                         const std::vector<float>& ladder, float channel_exponent) {
  ProfileOptions options;
  if (model.size() > 255) ThrowArgumentError("model", std::to_string(model.size()) + " bytes, expected at most 255");
  options.model = model;
  options.transform = transform || predict;
  options.predict = predict;
  options.byte_predictors = byte_predictors;
  if (rope_head_dim < 2 || rope_head_dim % 2 != 0) ThrowArgumentError("rope_head_dim", std::to_string(rope_head_dim) + ", expected an even size >= 2");
  if (!(rope_theta > 0)) ThrowArgumentError("rope_theta", std::to_string(rope_theta) + ", expected > 0");
  options.rope = RopeSpec{rope_head_dim, rope_theta, RopeLayoutArgument(rope_layout)};
  if (max_tables < 1 || max_tables > 255) ThrowArgumentError("max_tables", std::to_string(max_tables) + ", expected 1..255");
  options.max_tables = max_tables;
  options.channel_exponent = channel_exponent;
  CheckLadderSize(ladder);
  const Samples samples = ImportSamples(samples_arg);
  if (samples.keys.empty()) ThrowArgumentError("samples", "empty; expected at least one (keys, values) context");
  nb::gil_scoped_release release;
  if (!ladder.empty()) options.ladder = LadderOfSteps(static_cast<int>(samples.keys.front().layers), ladder);
  ProfileBuilder builder(options);
  std::vector<std::vector<uint8_t>> storage;
  const std::vector<KvSample> views = SampleViews(samples, &storage);
  for (size_t i = 0; i < views.size(); ++i) {
    ThrowIfError(builder.AddSample(views[i].keys, views[i].values).WithContext("samples[" + std::to_string(i) + "]"));
  }
  return ValueOrThrow(builder.Build());
}

bool IsPath(nb::handle value) {
  return PyUnicode_Check(value.ptr()) || PyBytes_Check(value.ptr()) || PyObject_HasAttrString(value.ptr(), "__fspath__");
}

// A str, bytes or os.PathLike as the file name it is; anything else names `name` in the error.
std::string PathArgument(nb::handle value, const std::string& name) {
  if (!IsPath(value)) ThrowArgumentError(name, std::string("expected a path, got ") + Py_TYPE(value.ptr())->tp_name);
  return nb::cast<std::string>(nb::module_::import_("os").attr("fsdecode")(value));
}

// A list of paths (or one path) as strings.
std::vector<std::string> TextPaths(nb::handle text) {
  if (text.is_none()) return {kDefaultText};
  if (IsPath(text)) return {PathArgument(text, "text")};
  if (!PyList_Check(text.ptr()) && !PyTuple_Check(text.ptr())) {
    ThrowArgumentError("text", std::string("expected a path or a list of paths, got ") + Py_TYPE(text.ptr())->tp_name);
  }
  std::vector<std::string> paths;
  for (nb::handle item : nb::borrow<nb::sequence>(text)) paths.push_back(PathArgument(item, "text"));
  return paths;
}

Profile Learn(nb::handle model_arg, nb::handle text, int contexts, int context_tokens, nb::handle samples_arg, int eval_tokens,
              int chunk_tokens, bool transform, bool predict, bool byte_predictors, double fine_fraction, nb::handle fine_level_arg,
              bool weigh_slices, const std::vector<float>& ladder, bool measure, int max_tables, float channel_exponent,
              nb::handle tokenizer, int threads) {
  const std::string model_name = PathArgument(model_arg, "model");
  ProfileLearningOptions options;
  options.texts = TextPaths(text);
  options.contexts = contexts;
  options.context_tokens = context_tokens;
  options.eval_tokens = eval_tokens;
  options.chunk_tokens = chunk_tokens;
  options.profile.transform = transform;
  options.profile.predict = predict;
  options.profile.byte_predictors = byte_predictors;
  options.profile.max_tables = max_tables;
  options.profile.channel_exponent = channel_exponent;
  options.fine = {fine_fraction, LevelArgument(fine_level_arg, "fine_level")};
  options.weigh_slices = weigh_slices;
  options.ladder_steps = ladder;
  options.measure = measure;
  LoadOptions load;
  if (!tokenizer.is_none()) load.tokenizer_path = PathArgument(tokenizer, "tokenizer");
  if (threads < 0 || threads > 1024) ThrowArgumentError("threads", std::to_string(threads) + ", expected 0..1024");
  load.threads = threads;
  const Samples samples = samples_arg.is_none() ? Samples{} : ImportSamples(samples_arg);
  nb::gil_scoped_release release;
  const std::unique_ptr<Model> model = ValueOrThrow(Model::Load(model_name, load));
  std::vector<std::vector<uint8_t>> storage;
  return ValueOrThrow(LearnProfile(*model, options, SampleViews(samples, &storage))).profile;
}

}  // namespace

void RegisterProfile(nb::module_& m) {
  nb::class_<Profile>(m, "Profile",
                      "A model's codec profile: level ladder, quantisation parameters, entropy tables (docs/codec.md).\n"
                      "Immutable; safe to share between threads.")
      .def_static(
          "load", [](const std::filesystem::path& path) { return ValueOrThrow(Profile::Load(path.string())); }, nb::arg("path"),
          "Reads a profile file (kvstream profile --out); errors name the file.")
      .def_static(
          "from_bytes",
          [](nb::handle data) {
            const ByteView bytes(data, "data");
            return ValueOrThrow(Profile::Parse(bytes.data(), bytes.size()));
          },
          nb::sig("def from_bytes(data: bytes | bytearray | memoryview) -> Profile"), nb::arg("data"), "Parses profile bytes (untrusted: every count and table is checked).")
      .def_static("learn", &Learn,
                  nb::sig("def learn(model: str | os.PathLike[str], *, text: str | os.PathLike[str] | collections.abc.Sequence[str | os.PathLike[str]] | None = None, "
                          "contexts: int = 4, context_tokens: int = 512, samples: collections.abc.Sequence[tuple[object, object]] | None = None, "
                          "eval_tokens: int = 128, chunk_tokens: int = 256, transform: bool = False, predict: bool = False, "
                          "byte_predictors: bool = False, fine_fraction: float = 0.08, fine_level: int | str = 2, weigh_slices: bool = False, "
                          "ladder: collections.abc.Sequence[float] = [], measure: bool = False, max_tables: int = 16, "
                          "channel_exponent: float = 0.0, tokenizer: str | os.PathLike[str] | None = None, threads: int = 0) -> Profile"),
                  nb::arg("model"), nb::kw_only(), nb::arg("text") = nb::none(), nb::arg("contexts") = 4, nb::arg("context_tokens") = 512,
                  nb::arg("samples") = nb::none(), nb::arg("eval_tokens") = 128, nb::arg("chunk_tokens") = 256, nb::arg("transform") = false,
                  nb::arg("predict") = false, nb::arg("byte_predictors") = false, nb::arg("fine_fraction") = kDefaultFineFraction,
                  nb::arg("fine_level") = 2, nb::arg("weigh_slices") = false, nb::arg("ladder") = std::vector<float>{},
                  nb::arg("measure") = false, nb::arg("max_tables") = 16, nb::arg("channel_exponent") = 0.0f,
                  nb::arg("tokenizer") = nb::none(), nb::arg("threads") = 0,
                  "Learns a model's profile as `kvstream profile` does, each keyword its flag (--context-tokens is\n"
                  "context_tokens, ...): prefills `contexts` windows of the text with kvstream's reference engine,\n"
                  "learns the profile, then codes the window after them at every level (measure=True also scores the\n"
                  "eval_tokens after it and records each level's quality: see summary()).\n\n"
                  "model: a short name (stories260K, tinystories656k, smollm2) or a checkpoint path.\n"
                  "text: a file or a list of files (default GPL-3); window i comes from file i mod n.\n"
                  "samples: (keys, values) pairs of another engine's KV of this model, in the model's own layout\n"
                  "(like --kv-dump; contexts=0 to learn from them alone).")
      .def_static("learn_from_samples", &LearnFromSamples,
                  nb::sig("def learn_from_samples(samples: collections.abc.Sequence[tuple[object, object]], *, model: str = '', transform: bool = False, "
                          "predict: bool = False, byte_predictors: bool = False, rope_head_dim: int = 64, "
                          "rope_theta: float = 10000.0, rope_layout: str = 'interleaved', max_tables: int = 16, "
                          "ladder: collections.abc.Sequence[float] = [], channel_exponent: float = 0.0) -> Profile"),
                  nb::arg("samples"), nb::kw_only(), nb::arg("model") = "", nb::arg("transform") = false,
                  nb::arg("predict") = false, nb::arg("byte_predictors") = false, nb::arg("rope_head_dim") = 64,
                  nb::arg("rope_theta") = 10000.0f, nb::arg("rope_layout") = "interleaved", nb::arg("max_tables") = 16,
                  nb::arg("ladder") = std::vector<float>{}, nb::arg("channel_exponent") = 0.0f,
                  "Learns a profile from sample contexts alone, without a model (no held-out coding, no qualities).\n\n"
                  "samples: a list of (keys, values) pairs, each a context from position 0 in encode's layouts.\n"
                  "model: the name recorded in the profile.\n"
                  "transform / predict: also learn those schemes (predict implies transform); their keys are\n"
                  "de-rotated with the model's RoPE (rope_head_dim, rope_theta, rope_layout: \"interleaved\" for\n"
                  "llama.cpp and llama2.c caches, \"rotate-half\" for Hugging Face's).\n"
                  "ladder: the levels' step multipliers (default 0.10, 0.15, 0.25, 0.35, 0.5, 1.0).")
      .def(
          "save",
          [](const Profile& p, const std::filesystem::path& path) {
            ThrowIfError(WriteWholeFile(path.string(), p.bytes().data(), p.bytes().size()));
          },
          nb::arg("path"), "Writes the profile's bytes to a file (what load reads).")
      .def("to_bytes", [](const Profile& p) { return nb::bytes(p.bytes().data(), p.bytes().size()); },
           "The canonical bytes (what a profile file holds).")
      .def_prop_ro("hash", &Profile::hash, "64-bit hash of the bytes: what chunks reference.")
      .def_prop_ro("model", &Profile::model)
      .def_prop_ro("layers", &Profile::layers)
      .def_prop_ro("channels", &Profile::channels)
      .def_prop_ro(
          "levels",
          [](const Profile& p) {
            std::vector<std::string> names;
            for (const LevelSpec& s : p.ladder()) names.push_back(LevelName(s.level));
            return names;
          },
          "The lossy levels it serves, \"L1\"..\"Ln\".")
      .def(
          "supports", [](const Profile& p, const std::string& scheme) { return p.Supports(SchemeArgument(scheme)); },
          nb::arg("scheme"), "Whether chunks of this scheme can be coded with it.")
      .def("summary", &Summary, nb::sig("def summary(self) -> dict[str, object]"), "What `kvstream inspect PROFILE` prints, as a dict.")
      .def("__repr__", [](const Profile& p) {
        return "kvstream.Profile(model='" + p.model() + "', hash=" + HashHex(p.hash()) + ", layers=" + std::to_string(p.layers()) +
               ", channels=" + std::to_string(p.channels()) + ", levels=" + std::to_string(p.ladder().size()) + ")";
      });
}

}  // namespace kvstream::python
