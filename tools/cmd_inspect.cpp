// `kvstream inspect`: prints a chunk's header and segment index, a profile's summary, or a KV dump's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/whole_file.h"
#include "kvstream/codec.h"
#include "kvstream/kv_dump.h"
#include "tools/codec_files.h"
#include "tools/command.h"

namespace kvstream::cli {
namespace {

std::string Num(double v, const char* fmt) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}


// A scheme's levels: the share of components kept (over every layer and K/V) and the measured quality.
void PrintKeptComponents(const ProfileSummary::Components& components, const std::vector<LevelQuality>& quality) {
  std::printf("  level  kept-components  top1    ppl%%    kl       bits\n");
  for (size_t i = 0; i < quality.size() && i < components.kept_share.size(); ++i) {
    const LevelQuality& q = quality[i];
    std::printf("  L%-5zu %-16.3f %-7s %-7s %-8s %s\n", i + 1, components.kept_share[i],
                Num(q.top1_agreement, "%.4f").c_str(), Num(q.ppl_delta_pct, "%+.2f").c_str(), Num(q.kl_mean, "%.5f").c_str(),
                Num(q.bits_per_value, "%.3f").c_str());
  }
}

Status InspectProfileFile(const std::string& path) {
  KVSTREAM_ASSIGN_OR_RETURN(Profile p, Profile::Load(path));
  std::printf("%s: kvstream profile\n  model      %s\n  hash       %s\n  bytes      %zu\n  shape      %d layers x %d channels\n",
              path.c_str(), p.model().c_str(), HashHex(p.hash()).c_str(), p.bytes().size(), p.layers(), p.channels());
  std::printf("  level  key-step  value-step  top1    ppl%%    kl       bits\n");
  for (size_t i = 0; i < p.ladder().size(); ++i) {
    const LevelSpec& s = p.ladder()[i];
    const LevelQuality& q = p.quality()[i];
    std::printf("  L%-5d %-9.3g %-11.3g %-7s %-7s %-8s %s\n", s.level, s.step_multiplier[0],
                s.step_multiplier[1], Num(q.top1_agreement, "%.4f").c_str(),
                Num(q.ppl_delta_pct, "%+.2f").c_str(), Num(q.kl_mean, "%.5f").c_str(), Num(q.bits_per_value, "%.3f").c_str());
  }
  if (!p.Supports(QuantScheme::kTransform)) {
    std::printf("  transform  none (chunks of scheme transform need a profile made with --transform)\n");
    return Status::Ok();
  }
  const ProfileSummary summary = p.Summary();
  const RopeSpec& rope = summary.transform_rope;
  std::printf("  transform  PCA bases of the keys (RoPE undone: head_dim %d, theta %g, %s pairs) and of the values\n",
              rope.head_dim, rope.theta, rope.layout == RopeLayout::kInterleaved ? "interleaved" : "rotate-half");
  PrintKeptComponents(summary.transform, p.QualityOf(QuantScheme::kTransform));
  if (!p.Supports(QuantScheme::kPredicted)) {
    std::printf("  predicted  none (chunks of scheme predicted need a profile made with --predict)\n");
    return Status::Ok();
  }
  // Weights within int8 (kvstream profile --byte-predictors) are what the AMX and AVX-512 VNNI kernels
  // multiply as bytes.
  std::printf("  predicted  each layer's keys and values from the previous layer's, values also from this layer's keys:\n"
              "             %d predictor matrices (%s) and %d residual bases of %d x %d\n",
              summary.predictor_matrices, summary.byte_predictors ? "weights within int8" : "int16 weights",
              2 * p.layers(), p.channels(), p.channels());
  PrintKeptComponents(summary.predicted, p.QualityOf(QuantScheme::kPredicted));
  return Status::Ok();
}

Status InspectChunkFile(const std::string& path, bool segments) {
  const DecodeLimits limits;
  KVSTREAM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadWholeFile(path, limits.max_chunk_bytes));
  auto info = InspectChunk(bytes.data(), bytes.size(), limits);
  if (!info.ok()) return info.status().WithContext(path);
  const ChunkInfo& c = *info;
  const double values = 2.0 * static_cast<double>(c.layers * c.tokens * c.channels);
  std::printf("%s: kvstream chunk v%u\n", path.c_str(), c.version);
  std::printf("  level        %s\n", LevelName(c.level).c_str());
  if (IsLossyLevel(c.level)) {
    std::printf("  scheme       %s\n", SchemeName(c.scheme));
    std::printf("  tables       %s\n", c.in_chunk_tables ? "in the chunk" : ("profile " + HashHex(c.profile_hash)).c_str());
    std::printf("  sink rows    %lld (exact fp16: context positions < 4)\n", static_cast<long long>(c.sink_rows));
    if (!c.fine_rows.empty()) {
      std::printf("  fine rows    %lld at level %s:", static_cast<long long>(std::count(c.fine_rows.begin(), c.fine_rows.end(), 1)),
                  LevelName(c.fine_level).c_str());
      for (size_t t = 0; t < c.fine_rows.size(); ++t) {
        if (c.fine_rows[t]) std::printf(" %lld", static_cast<long long>(c.token_begin) + static_cast<long long>(t));
      }
      std::printf("\n");
    }
  }
  std::printf("  source dtype %s\n", DTypeName(c.source_dtype));
  if (c.level == kLevelFp16) std::printf("  stored dtype %s\n", DTypeName(c.stored_dtype));
  std::printf("  shape        %lld layers x %lld tokens x %lld channels (K and V)\n", static_cast<long long>(c.layers),
              static_cast<long long>(c.tokens), static_cast<long long>(c.channels));
  std::printf("  tokens       [%lld, %lld)\n", static_cast<long long>(c.token_begin), static_cast<long long>(c.token_begin + c.tokens));
  std::printf("  bytes        %llu (header and index %u, %zu segments)\n", static_cast<unsigned long long>(c.total_bytes),
              c.header_bytes, c.segments.size());
  if (c.level != kLevelText) {
    std::printf("  bits/value   %.4f (fp16: 16, ratio %.2fx)\n", 8.0 * static_cast<double>(c.total_bytes) / values,
                16.0 * values / 8.0 / static_cast<double>(c.total_bytes));
  }
  std::printf("  CRC32C       header and every segment verified\n");
  if (segments) {
    std::printf("  segment  layer  tensor  offset      size        crc32c\n");
    for (size_t i = 0; i < c.segments.size(); ++i) {
      const SegmentInfo& s = c.segments[i];
      const char* t = s.tensor == SegmentTensor::kKeys ? "keys" : s.tensor == SegmentTensor::kValues ? "values" : "tokens";
      std::printf("  %-8zu %-6u %-7s %-11llu %-11u %08x\n", i, s.layer, t, static_cast<unsigned long long>(s.offset), s.size,
                  s.crc32c);
    }
  }
  return Status::Ok();
}

Status InspectKvDumpFile(const std::string& path) {
  KVSTREAM_ASSIGN_OR_RETURN(KvDump d, ReadKvDump(path));
  std::printf("%s: KV dump (docs/kv-dump-format.md)\n", path.c_str());
  std::printf("  model        %d layers, %d heads, %d KV heads of %d, vocabulary %d\n", d.layers, d.n_heads, d.n_kv_heads,
              d.rope.head_dim, d.vocab_size);
  std::printf("  RoPE         theta %g, %s\n", static_cast<double>(d.rope.theta),
              d.rope.layout == RopeLayout::kInterleaved ? "interleaved" : "rotate-half");
  std::printf("  KV           %s, %d layers x %d tokens x %d channels (K and V), %zu bytes\n", DTypeName(d.dtype), d.layers,
              d.tokens, d.kv_dim, d.keys.size() + d.values.size());
  std::printf("  token ids    %s\n", d.token_ids.empty() ? "none (no text level when served)" : "one per token");
  if (d.importance.empty()) {
    std::printf("  importance   none (no fine rows when served)\n");
  } else {
    std::printf("  importance   one per token, largest %.3g\n",
                static_cast<double>(*std::max_element(d.importance.begin(), d.importance.end())));
  }
  std::printf("  CRC-32       every member read verified\n");
  return Status::Ok();
}

// The first bytes of a file, for telling its kind (the inspector of that kind then reads it whole, with its
// own limits and checks).
std::string FileMagic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, sizeof magic);
  return std::string(magic, static_cast<size_t>(in.gcount()));
}

Status RunInspect(const Args& args) {
  if (args.positional().empty()) return Status::InvalidArgument("inspect: give at least one FILE (see --help)");
  const bool segments = !args.Has("summary");
  for (const std::string& path : args.positional()) {
    const std::string magic = FileMagic(path);
    if (magic == "KVPF") {  // docs/format.md, "Profile"
      KVSTREAM_RETURN_IF_ERROR(InspectProfileFile(path));
    } else if (magic == "PK\x03\x04" || magic == "PK\x05\x06") {
      KVSTREAM_RETURN_IF_ERROR(InspectKvDumpFile(path));
    } else {
      KVSTREAM_RETURN_IF_ERROR(InspectChunkFile(path, segments));
    }
  }
  return Status::Ok();
}

}  // namespace

KVSTREAM_REGISTER_COMMAND(inspect, {
    "inspect",
    "print a chunk's header and segment index, a profile's ladder, or a KV dump's contents",
    "usage: kvstream inspect FILE... [--summary]\n\n"
    "For a chunk (written by `kvstream encode` or the stream layer): validates it (header, segment index and\n"
    "every CRC32C, under the default decode limits) and prints its level, scheme, table source, shape, token\n"
    "range, size, bits per value and one line per segment. For a profile (`kvstream profile`): its model,\n"
    "hash, shape and level ladder with any measured quality. For a KV dump (.npz, docs/kv-dump-format.md):\n"
    "its model geometry, RoPE, dtype and shape and whether it has token ids and importance, after reading it\n"
    "as kvstream serve --kv-dump does. Fails with the reason on a malformed file.\n\n"
    "  --summary   omit the per-segment lines",
    {},
    {"summary"},
    RunInspect,
});

}  // namespace kvstream::cli
