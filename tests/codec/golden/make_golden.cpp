// make_golden — writes the golden chunk files of the current chunk format version, and the profiles they
// need, into tests/codec/golden/v<version>/ with their MANIFEST (golden_manifest.h).
//
// Run once per format version, by hand (not by CI): `ninja -C build codec_make_golden &&
// build/tests/codec/codec_make_golden tests/codec/golden`. It refuses to write into a folder that exists:
// a version's golden files are never regenerated (docs/format.md, "Golden files"), so a change to the
// decoded bits of an existing version shows up as a failing codec_golden_test instead of new files.
//
// The KV comes from the tiny real model stories260K (found like the tests find it) prefilled with the
// start of the GPL-3 text; the profiles are learned from its first 96 positions, the chunks cover 16
// tokens, so the whole set stays small.
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "codec/common/container_format.h"
#include "golden_manifest.h"
#include "kvstream/codec.h"
#include "kvstream/model.h"
#include "kvstream/profile.h"

namespace kvstream::golden {
namespace {

constexpr int kPrefillTokens = 128;
constexpr int kSampleTokens = 96;
constexpr int kChunkTokens = 16;

struct Prefill {
  std::unique_ptr<Model> model;
  std::vector<int> tokens;
  KvCache cache;
};

Result<Prefill> Run(const std::string& model_name) {
  Prefill p;
  KVSTREAM_ASSIGN_OR_RETURN(p.model, Model::Load(model_name));
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  std::stringstream text;
  text << in.rdbuf();
  p.tokens = p.model->tokenizer().Encode(text.str(), p.model->tokenizer().adds_bos());
  if (p.tokens.size() < kPrefillTokens) return Status::InvalidArgument("the GPL-3 text is too short");
  p.tokens.resize(kPrefillTokens);
  p.cache = KvCache::Allocate(p.model->config(), kPrefillTokens);
  KVSTREAM_RETURN_IF_ERROR(p.model->Forward(p.tokens, p.cache, nullptr));
  return p;
}

Result<Profile> Learn(const Prefill& p, bool transform, bool predict) {
  ProfileOptions options;
  options.model = "stories260K";
  options.transform = transform;
  options.predict = predict;
  options.rope = p.model->config().rope();
  ProfileBuilder builder(options);
  KVSTREAM_RETURN_IF_ERROR(builder.AddSample(SliceTokens(p.cache.keys(), 0, kSampleTokens),
                                             SliceTokens(p.cache.values(), 0, kSampleTokens)));
  return builder.Build();
}

Status WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return out ? Status::Ok() : Status::IoError("cannot write " + path);
}

// One golden chunk: what to encode and how.
struct Spec {
  std::string name;
  Level level = 1;
  QuantScheme scheme = QuantScheme::kChannelUniform;
  int64_t token_begin = 0;
  const Profile* profile = nullptr;
  std::string profile_file = "-";
  std::string features;  // besides the ones measured (escapes, fine rows, sink rows)
  Level fine_level = 0;  // with fine rows: the 4 most important coded tokens at this level
};

// Encodes `spec`, checks it decodes, and appends its MANIFEST entry.
Status Make(const Prefill& p, const Spec& spec, const std::string& dir, std::vector<Entry>* manifest) {
  ChunkInput in;
  in.keys = SliceTokens(p.cache.keys(), spec.token_begin, kChunkTokens);
  in.values = SliceTokens(p.cache.values(), spec.token_begin, kChunkTokens);
  in.token_begin = spec.token_begin;
  in.token_ids = p.tokens.data() + spec.token_begin;
  const std::vector<float> importance = p.cache.Importance();
  in.importance = importance.data() + spec.token_begin;
  EncodeOptions eo;
  eo.level = spec.level;
  eo.scheme = spec.scheme;
  eo.profile = spec.profile;
  EncodeStats stats;
  eo.stats = &stats;
  if (spec.fine_level != 0) {
    std::vector<float> ranked(importance.begin() + spec.token_begin + 4,
                              importance.begin() + spec.token_begin + kChunkTokens);
    std::sort(ranked.rbegin(), ranked.rend());
    eo.fine_min_importance = ranked[3];
    eo.fine_level = spec.fine_level;
  }
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodeChunk(in, eo));
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info, InspectChunk(bytes.data(), bytes.size()));

  Entry e;
  e.name = spec.name;
  e.version = info.version;
  e.scheme = IsLossyLevel(spec.level) ? SchemeName(spec.scheme) : "none";
  e.level = LevelName(spec.level);
  e.features = spec.features;
  auto add = [&e](const std::string& f) { e.features += (e.features.empty() ? "" : ",") + f; };
  if (info.sink_rows > 0) add("sink-rows");
  if (!info.fine_rows.empty()) add("fine-rows=" + LevelName(info.fine_level));
  if (stats.escapes > 0) add("escapes=" + std::to_string(stats.escapes));
  if (e.features.empty()) e.features = "-";
  std::memcpy(&e.header_crc, bytes.data() + info.header_bytes - 4, 4);
  for (const SegmentInfo& s : info.segments) e.segment_crcs.push_back(s.crc32c);
  e.profile = spec.profile_file;

  if (spec.level == kLevelText) {
    KVSTREAM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, DecodeChunkTokens(bytes.data(), bytes.size()));
    e.hash = Fnv1a64(ids.data(), ids.size() * sizeof(int32_t));
  } else {
    const size_t half = static_cast<size_t>(info.layers * info.tokens * info.channels);
    std::vector<uint16_t> decoded(2 * half);
    DecodeOptions o;
    o.profile = spec.profile;
    KVSTREAM_RETURN_IF_ERROR(DecodeChunk(
        bytes.data(), bytes.size(), o, TensorView::Dense(decoded.data(), DType::kF16, info.layers, info.tokens, info.channels),
        TensorView::Dense(decoded.data() + half, DType::kF16, info.layers, info.tokens, info.channels)));
    e.hash = Fnv1a64(decoded.data(), decoded.size() * sizeof(uint16_t));
  }
  KVSTREAM_RETURN_IF_ERROR(WriteFile(dir + "/" + spec.name, bytes));
  manifest->push_back(e);
  std::printf("%s\n", FormatEntry(e).c_str());
  return Status::Ok();
}

Status Main(const std::string& root) {
  const std::string dir = root + "/v" + std::to_string(codec::kChunkVersion);
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    return Status::InvalidArgument(dir + " exists: a format version's golden files are never regenerated");
  }
  if (::mkdir(dir.c_str(), 0755) != 0) return Status::IoError("cannot create " + dir);

  KVSTREAM_ASSIGN_OR_RETURN(Prefill p, Run("stories260K"));
  KVSTREAM_ASSIGN_OR_RETURN(Profile uniform, Learn(p, /*transform=*/false, /*predict=*/false));
  KVSTREAM_ASSIGN_OR_RETURN(Profile predicted, Learn(p, /*transform=*/true, /*predict=*/true));
  KVSTREAM_RETURN_IF_ERROR(WriteFile(dir + "/uniform.kvpf", uniform.bytes()));
  KVSTREAM_RETURN_IF_ERROR(WriteFile(dir + "/predicted.kvpf", predicted.bytes()));

  const QuantScheme cu = QuantScheme::kChannelUniform;
  const QuantScheme tr = QuantScheme::kTransform;
  const QuantScheme pr = QuantScheme::kPredicted;
  // Chunks at position 0 hold sink rows; chunks from position 96 code tokens the profiles never saw, which
  // at the finest level escapes a few values.
  const std::vector<Spec> specs = {
      {"fp16.kvck", kLevelFp16, cu, 0, nullptr, "-", "fp32-input"},
      {"int8.kvck", kLevelInt8, cu, 96, nullptr, "-", ""},
      {"text.kvck", kLevelText, cu, 96, nullptr, "-", ""},
      {"uniform_profile_L1.kvck", 1, cu, 96, &uniform, "uniform.kvpf", "profile-tables"},
      {"uniform_profile_L3.kvck", 3, cu, 0, &uniform, "uniform.kvpf", "profile-tables"},
      {"uniform_inchunk_L3.kvck", 3, cu, 96, nullptr, "-", "in-chunk-tables"},
      {"uniform_inchunk_L6.kvck", 6, cu, 0, nullptr, "-", "in-chunk-tables"},
      {"transform_L1.kvck", 1, tr, 96, &predicted, "predicted.kvpf", "profile-tables"},
      {"transform_L3.kvck", 3, tr, 0, &predicted, "predicted.kvpf", "profile-tables"},
      {"transform_fine_L4.kvck", 4, tr, 96, &predicted, "predicted.kvpf", "profile-tables", 2},
      {"predicted_L1.kvck", 1, pr, 96, &predicted, "predicted.kvpf", "profile-tables"},
      {"predicted_L3.kvck", 3, pr, 0, &predicted, "predicted.kvpf", "profile-tables"},
      {"predicted_fine_L4.kvck", 4, pr, 96, &predicted, "predicted.kvpf", "profile-tables", 2},
  };
  std::vector<Entry> manifest;
  for (const Spec& spec : specs) KVSTREAM_RETURN_IF_ERROR(Make(p, spec, dir, &manifest));

  std::ofstream out(dir + "/MANIFEST");
  out << "# Golden chunks of chunk format version " << codec::kChunkVersion
      << ", written by tests/codec/golden/make_golden.cpp; never regenerated.\n"
      << "# name version scheme level features fnv1a64(decoded fp16) header_crc segment_crcs profile\n";
  for (const Entry& e : manifest) out << FormatEntry(e) << "\n";
  return out ? Status::Ok() : Status::IoError("cannot write " + dir + "/MANIFEST");
}

}  // namespace
}  // namespace kvstream::golden

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <tests/codec/golden>\n", argv[0]);
    return 2;
  }
  const kvstream::Status st = kvstream::golden::Main(argv[1]);
  if (!st.ok()) {
    std::fprintf(stderr, "make_golden: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
