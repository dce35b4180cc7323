// The chunk folder of `kvstream bench gpu` (gpu_chunk_set.h).
#include "bench/gpu/gpu_chunk_set.h"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "codec/common/profile_data.h"
#include "common/whole_file.h"
#include "kvstream/codec.h"

namespace kvstream::bench {
namespace {

Status WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return out ? Status::Ok() : Status::IoError("bench gpu: cannot write " + path);
}

}  // namespace

Result<uint64_t> CpuDecodedHash(const GpuChunkSet& set, const Profile* profile) {
  if (set.chunks.empty()) return Status::InvalidArgument("chunk set " + set.name + ": no chunks");
  KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo first, InspectChunk(set.chunks[0].data(), set.chunks[0].size()));
  const int64_t L = first.layers, T = set.tokens, C = first.channels;
  std::vector<uint16_t> kv(static_cast<size_t>(2 * L * T * C));
  KVSTREAM_ASSIGN_OR_RETURN(
      KvDestination d, KvDestination::Contiguous(TensorView::Dense(kv.data(), DType::kF16, L, T, C),
                                                 TensorView::Dense(kv.data() + kv.size() / 2, DType::kF16, L, T, C), 1));
  DecodeOptions options;
  options.profile = profile;
  for (const std::vector<uint8_t>& chunk : set.chunks) {
    KVSTREAM_RETURN_IF_ERROR(DecodeChunkInto(chunk.data(), chunk.size(), options, d).WithContext("chunk set " + set.name));
  }
  return ProfileHash(reinterpret_cast<const uint8_t*>(kv.data()), kv.size() * sizeof(uint16_t));
}

Result<GpuChunkFolder> MakeGpuChunkFolder(const TensorView& keys, const TensorView& values,
                                          const std::vector<float>& importance, const Profile& profile,
                                          const GpuChunkFolderOptions& options) {
  struct Kind {
    QuantScheme scheme;
    Level level;
    bool profile_tables;
    bool fine;
  };
  const Level top = static_cast<Level>(profile.ladder().size());
  std::vector<Kind> kinds = {{QuantScheme::kChannelUniform, kLevelFp16, false, false},
                             {QuantScheme::kChannelUniform, kLevelInt8, false, false},
                             {QuantScheme::kChannelUniform, 1, true, false},
                             {QuantScheme::kChannelUniform, 4, true, false},
                             {QuantScheme::kChannelUniform, top, true, false},
                             {QuantScheme::kChannelUniform, 3, false, false}};
  for (QuantScheme scheme : {QuantScheme::kTransform, QuantScheme::kPredicted}) {
    if (!profile.Supports(scheme)) continue;
    for (const Kind& k : {Kind{scheme, 2, true, false}, Kind{scheme, 4, true, true}, Kind{scheme, top, true, false}}) {
      kinds.push_back(k);
    }
  }
  GpuChunkFolder folder;
  folder.profile_bytes = profile.bytes();
  const float fine_threshold = importance.empty() ? std::numeric_limits<float>::infinity()
                                                  : FineRowsThreshold(importance.data(), keys.tokens(), options.fine_fraction);
  for (const Kind& k : kinds) {
    const bool lossy = IsLossyLevel(k.level);
    GpuChunkSet set;
    set.scheme = lossy ? SchemeName(k.scheme) : "none";
    set.level = LevelName(k.level);
    set.name = (lossy ? set.scheme + "-" : "") + set.level + (lossy && !k.profile_tables ? "-in-chunk" : "") +
               (k.fine ? "-fine" : "");
    set.tokens = lossy ? keys.tokens() : std::min(options.passthrough_tokens, keys.tokens());
    for (int64_t t0 = 0; t0 < set.tokens; t0 += options.chunk_tokens) {
      const int64_t n = std::min(options.chunk_tokens, set.tokens - t0);
      ChunkInput in;
      in.keys = SliceTokens(keys, t0, n);
      in.values = SliceTokens(values, t0, n);
      in.token_begin = t0;
      in.importance = importance.empty() ? nullptr : importance.data() + t0;
      EncodeOptions eo;
      eo.level = k.level;
      eo.scheme = k.scheme;
      eo.profile = k.profile_tables ? &profile : nullptr;
      if (k.fine && in.importance) {
        eo.fine_min_importance = fine_threshold;
        eo.fine_level = options.fine_level;
      }
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EncodeChunk(in, eo));
      set.chunks.push_back(std::move(bytes));
    }
    KVSTREAM_ASSIGN_OR_RETURN(set.hash, CpuDecodedHash(set, &profile));
    folder.sets.push_back(std::move(set));
  }
  return folder;
}

Status WriteGpuChunkFolder(const std::string& dir, const GpuChunkFolder& folder) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IoError("bench gpu: cannot create " + dir + ": " + ec.message());
  std::ostringstream manifest;
  manifest << "# kvstream bench gpu chunk folder (bench/gpu/gpu_chunk_set.h)\n";
  if (!folder.profile_bytes.empty()) {
    KVSTREAM_RETURN_IF_ERROR(WriteFile(dir + "/profile.kvprofile", folder.profile_bytes));
    manifest << "profile profile.kvprofile\n";
  }
  for (const GpuChunkSet& set : folder.sets) {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016" PRIx64, set.hash);
    manifest << "set " << set.name << " " << set.scheme << " " << set.level << " " << set.tokens << " " << hash << " ";
    for (size_t i = 0; i < set.chunks.size(); ++i) {
      const std::string file = set.name + "." + std::to_string(i) + ".kvck";
      KVSTREAM_RETURN_IF_ERROR(WriteFile(dir + "/" + file, set.chunks[i]));
      manifest << (i ? "," : "") << file;
    }
    manifest << "\n";
  }
  const std::string text = manifest.str();
  return WriteFile(dir + "/MANIFEST", std::vector<uint8_t>(text.begin(), text.end()));
}

Result<GpuChunkFolder> ReadGpuChunkFolder(const std::string& dir) {
  std::ifstream in(dir + "/MANIFEST");
  if (!in) return Status::NotFound("bench gpu: no MANIFEST in " + dir);
  GpuChunkFolder folder;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    const std::string where = dir + "/MANIFEST:" + std::to_string(number);
    if (kind == "profile") {
      std::string file;
      fields >> file;
      KVSTREAM_ASSIGN_OR_RETURN(folder.profile_bytes, ReadWholeFile(dir + "/" + file));
      continue;
    }
    if (kind != "set") return Status::CorruptData(where + ": expected 'profile' or 'set', got '" + kind + "'");
    GpuChunkSet set;
    std::string hash, files;
    fields >> set.name >> set.scheme >> set.level >> set.tokens >> hash >> files;
    if (!fields || set.tokens <= 0 || hash.size() != 16) return Status::CorruptData(where + ": malformed set line");
    char* end = nullptr;
    set.hash = std::strtoull(hash.c_str(), &end, 16);
    if (end != hash.c_str() + hash.size()) return Status::CorruptData(where + ": hash '" + hash + "' is not hexadecimal");
    std::istringstream list(files);
    for (std::string file; std::getline(list, file, ',');) {
      KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(dir + "/" + file));
      set.chunks.push_back(std::move(bytes));
    }
    folder.sets.push_back(std::move(set));
  }
  return folder;
}

}  // namespace kvstream::bench
