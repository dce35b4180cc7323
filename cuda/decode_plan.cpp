// The host's half of a GPU decode (decode_plan.h).
#include "cuda/decode_plan.h"

#include <algorithm>
#include <string>

#include "codec/common/key_rotation.h"
#include "codec/common/kv_address.h"
#include "codec/common/profile_data.h"
#include "codec/decompress/container_reader.h"
#include "cuda/kernels/entropy_kernel.h"
#include "cuda/kernels/frame_kernel.h"
#include "cuda/kernels/reconstruct_kernel.h"
#include "cuda/kernels/table_kernel.h"

namespace kvstream::cuda {
namespace {

size_t AlignUp(size_t n) { return (n + 255) / 256 * 256; }

Status CheckScheme(const ChunkInfo& info, size_t chunk) {
  if (info.level == kLevelText) {
    return Status::InvalidArgument("chunk " + std::to_string(chunk) +
                                   ": a text-level chunk holds token ids, not KV; recompute them with the model");
  }
  return Status::Ok();
}

Status CheckDestinationFits(const ChunkInfo& info, const KvDestination& d, size_t chunk) {
  if (d.layers != info.layers || d.channels() != info.channels) {
    return Status::InvalidArgument("destination: " + std::to_string(d.layers) + " layers x " +
                                   std::to_string(d.channels()) + " channels but chunk " + std::to_string(chunk) +
                                   " has " + std::to_string(info.layers) + " x " + std::to_string(info.channels));
  }
  const int64_t first = info.token_begin - d.position_offset;
  if (first < 0 || first + info.tokens > d.positions) {
    return Status::InvalidArgument("destination: chunk " + std::to_string(chunk) + "'s positions [" +
                                   std::to_string(info.token_begin) + ", " + std::to_string(info.token_begin + info.tokens) +
                                   ") are outside its " + std::to_string(d.positions) + " positions from " +
                                   std::to_string(d.position_offset));
  }
  return Status::Ok();
}

// Appends a bank's slot tables to `slots` (all banks' tables, numbered in order) and each of its channels'
// table numbers to `table`.
void AppendBank(const codec::TableBank& bank, std::vector<uint16_t>* table, std::vector<uint32_t>* slots) {
  const size_t first = slots->size() / kSlotsPerTable;
  for (uint8_t index : bank.index) table->push_back(static_cast<uint16_t>(first + index));
  for (const codec::RansModel& m : bank.models) slots->insert(slots->end(), m.decode_table(), m.decode_table() + kSlotsPerTable);
}

}  // namespace

ProfileTables ProfileImage::HostTables() const {
  ProfileTables t;
  t.layers = layers;
  t.channels = channels;
  t.levels = levels;
  t.means = means.data();
  t.steps = steps.data();
  t.slots = slots.data();
  t.channel_table = channel_table.data();
  t.head_dim = head_dim;
  t.rope_layout = rope_layout;
  t.transform_means = transform_means.empty() ? nullptr : transform_means.data();
  t.bases = bases.empty() ? nullptr : bases.data();
  t.transform_steps = transform_steps.empty() ? nullptr : transform_steps.data();
  t.transform_kept = transform_kept.empty() ? nullptr : transform_kept.data();
  t.transform_table = transform_table.empty() ? nullptr : transform_table.data();
  const auto or_null = [](const auto& v) { return v.empty() ? nullptr : v.data(); };
  t.input_scales = or_null(input_scales);
  t.bias = or_null(bias);
  t.predictor = or_null(predictor);
  t.predictor_scales = or_null(predictor_scales);
  t.residual_bases = or_null(residual_bases);
  t.prediction_kept = or_null(prediction_kept);
  t.prediction_table = or_null(prediction_table);
  t.predictor_bytes = predictor_bytes ? 1 : 0;
  return t;
}

Result<ProfileImage> MakeProfileImage(const Profile& profile) {
  const ProfileData& d = DataOf(profile);
  ProfileImage image;
  image.layers = d.layers;
  image.channels = d.channels;
  image.levels = static_cast<int32_t>(d.levels.size());
  image.means = d.means;
  for (const ProfileLevelData& level : d.levels) {
    image.steps.insert(image.steps.end(), level.steps.begin(), level.steps.end());
    AppendBank(level.bank, &image.channel_table, &image.slots);
  }
  if (d.has_transform) {
    const ProfileTransform& tr = d.transform;
    image.head_dim = tr.rope.head_dim;
    image.rope_layout = tr.rope.layout == RopeLayout::kInterleaved ? 0 : 1;
    image.transform_means = tr.means;
    image.bases = tr.bases;
    for (const ProfileTransformLevel& level : tr.levels) {
      image.transform_steps.insert(image.transform_steps.end(), level.steps.begin(), level.steps.end());
      image.transform_kept.insert(image.transform_kept.end(), level.kept.begin(), level.kept.end());
      AppendBank(level.bank, &image.transform_table, &image.slots);
    }
  }
  if (d.has_prediction) {
    const ProfilePrediction& pr = d.prediction;
    image.input_scales = pr.input_scales;
    image.bias = pr.bias;
    image.predictor = pr.weights;
    image.predictor_bytes = std::all_of(pr.weights.begin(), pr.weights.end(), [](int16_t w) { return w >= -128 && w <= 127; });
    image.predictor_scales = pr.weight_scales;
    image.residual_bases = pr.bases;
    for (const ProfilePredictionLevel& level : pr.levels) {
      image.prediction_kept.insert(image.prediction_kept.end(), level.kept.begin(), level.kept.end());
      AppendBank(level.bank, &image.prediction_table, &image.slots);
    }
  }
  const size_t models = image.slots.size() / kSlotsPerTable;
  if (models > 65535) return Status::ResourceExhausted("profile: " + std::to_string(models) + " tables, the GPU decoder takes 65535");
  return image;
}

Result<DecodePlan> PlanDecode(const std::vector<GpuChunk>& chunks, const Profile* profile,
                              const KvDestination& destination, const DecodeLimits& limits) {
  KVSTREAM_RETURN_IF_ERROR(ValidateDestination(destination, "destination"));
  DecodePlan plan;
  plan.destination = destination;
  plan.bases = codec::JoinedBases(destination);
  plan.tile_first.push_back(0);
  size_t symbols = 0, row_escapes = 0, channel_tables = 0, tables = 0, rings = 0, sums = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const GpuChunk& chunk = chunks[i];
    if (chunk.host_header == nullptr) return Status::InvalidArgument("chunk " + std::to_string(i) + ": no host copy of its header");
    if (chunk.bytes == nullptr) return Status::InvalidArgument("chunk " + std::to_string(i) + ": null bytes");
    KVSTREAM_ASSIGN_OR_RETURN(ChunkInfo info,
                              codec::ReadContainerHeader(chunk.host_header, chunk.host_header_size, chunk.size, limits));
    KVSTREAM_RETURN_IF_ERROR(CheckScheme(info, i));
    KVSTREAM_RETURN_IF_ERROR(codec::CheckChunkProfile(info, profile));
    KVSTREAM_RETURN_IF_ERROR(CheckDestinationFits(info, destination, i));
    const bool lossy = IsLossyLevel(info.level);
    const bool predicted = lossy && info.scheme == QuantScheme::kPredicted;
    const bool transform = lossy && (info.scheme == QuantScheme::kTransform || predicted);  // RoPE, fine rows
    if (transform && !profile->Supports(info.scheme)) {
      return Status::CorruptData("chunk " + std::to_string(i) + ": a " + SchemeName(info.scheme) +
                                 " chunk, but its profile has no " + (predicted ? "prediction" : "transform"));
    }
    // The segments to decode: the chunk's layer range (a predicted chunk's from layer 0: each layer is
    // predicted from the ones before).
    const int64_t layer_end = chunk.layer_end < 0 ? info.layers : chunk.layer_end;
    if (chunk.layer_begin < 0 || chunk.layer_begin >= layer_end || layer_end > info.layers) {
      return Status::InvalidArgument("chunk " + std::to_string(i) + ": layers [" + std::to_string(chunk.layer_begin) +
                                     ", " + std::to_string(layer_end) + ") of a chunk of " + std::to_string(info.layers));
    }
    const size_t first_segment_index = predicted ? 0 : static_cast<size_t>(2 * chunk.layer_begin);
    const size_t end_segment_index = static_cast<size_t>(2 * layer_end);
    size_t ring = 0;  // predicted: the chunk's predictor ring, offset + 1
    if (predicted) {
      ring = rings + 1;
      rings += static_cast<size_t>(info.tokens - info.sink_rows) * 4 * static_cast<size_t>(info.channels);
    }
    // A transform chunk's RoPE table (its keys' positions) and, with fine rows, where each coded row is.
    size_t rope_at = 0, row_map_at = 0;
    bool has_row_map = false;
    int32_t stream_rows[2] = {static_cast<int32_t>(info.tokens - info.sink_rows), 0};
    if (transform) {
      const codec::RopeTable rope(DataOf(*profile).transform.rope, info.token_begin, info.tokens);
      const int pairs = DataOf(*profile).transform.rope.head_dim / 2;
      rope_at = plan.data.size();
      for (int64_t t = 0; t < info.tokens; ++t) {
        for (const float* v : {rope.Cos(t), rope.Sin(t)}) {
          for (int k = 0; k < pairs; ++k) plan.data.push_back(FloatBits(v[k]));
        }
      }
      if (!info.fine_rows.empty()) {
        row_map_at = plan.data.size();
        has_row_map = true;
        stream_rows[0] = 0;
        for (int64_t t = info.sink_rows; t < info.tokens; ++t) {
          const bool fine = info.fine_rows[static_cast<size_t>(t)] != 0;
          plan.data.push_back(fine ? (kFineRowBit | static_cast<uint32_t>(stream_rows[1]++))
                                   : static_cast<uint32_t>(stream_rows[0]++));
        }
      }
    }
    for (size_t index = first_segment_index; index < end_segment_index; ++index) {
      const SegmentInfo& seg = info.segments[index];
      SegmentJob job{};
      job.bytes = chunk.bytes + seg.offset;
      job.size = seg.size;
      job.layer = static_cast<int32_t>(seg.layer);
      job.kv = seg.tensor == SegmentTensor::kValues ? 1 : 0;
      job.kind = info.level == kLevelFp16 ? SegmentKind::kFp16
                 : info.level == kLevelInt8 ? SegmentKind::kInt8
                 : predicted                 ? SegmentKind::kPredicted
                 : transform                 ? SegmentKind::kTransform
                                             : SegmentKind::kChannelUniform;
      const bool first_segment = seg.layer == 0 && seg.tensor == SegmentTensor::kKeys;
      job.predictor_ring = ring && first_segment ? reinterpret_cast<int16_t*>(ring) : nullptr;
      job.predicted_slices = predicted && first_segment ? static_cast<int32_t>(end_segment_index) : 0;
      // The exact sums' scratch (offset + 1): a transform segment's tokens, rounded up to whole tiles; a
      // predicted chunk's tiles, kPredictedSumArrays arrays each, at its first segment.
      const size_t tiles = static_cast<size_t>((info.tokens + kTileRows - 1) / kTileRows);
      const size_t tile_values = static_cast<size_t>(kTileRows) * static_cast<size_t>(info.channels);
      const size_t sum_values = predicted ? (first_segment ? tiles * kPredictedSumArrays * tile_values : 0)
                                : transform ? tiles * tile_values : 0;
      job.sums = sum_values ? reinterpret_cast<int32_t*>(sums + 1) : nullptr;
      sums += sum_values;
      job.fine_level = static_cast<int8_t>(info.fine_rows.empty() ? 0 : info.fine_level);
      job.stream_rows[0] = stream_rows[0];
      job.stream_rows[1] = stream_rows[1];
      // Data, as offsets into plan.data plus one (0: none) for now.
      job.rope = transform && seg.tensor == SegmentTensor::kKeys ? reinterpret_cast<const float*>(rope_at + 1) : nullptr;
      job.row_map = has_row_map ? reinterpret_cast<const uint32_t*>(row_map_at + 1) : nullptr;
      job.stored_bf16 = info.stored_dtype == DType::kBF16;
      job.in_chunk_tables = info.in_chunk_tables;
      job.level = static_cast<int8_t>(lossy ? info.level : 0);
      job.tokens = static_cast<int32_t>(info.tokens);
      job.channels = static_cast<int32_t>(info.channels);
      job.sink_rows = static_cast<int32_t>(info.sink_rows);
      job.token_begin = info.token_begin;
      // Scratch, as offsets for now (AssignScratch makes them pointers).
      if (lossy) {
        const size_t rows = static_cast<size_t>(info.tokens - info.sink_rows);
        job.symbols = reinterpret_cast<uint8_t*>(symbols);
        symbols += rows * static_cast<size_t>(info.channels);
        job.row_escapes = reinterpret_cast<uint32_t*>(row_escapes);
        row_escapes += rows;
        if (info.in_chunk_tables) {
          job.channel_table = reinterpret_cast<uint16_t*>(channel_tables);
          channel_tables += static_cast<size_t>(info.channels);
          job.tables = reinterpret_cast<uint32_t*>(tables);
          tables += static_cast<size_t>(kMaxInChunkTables) * kSlotsPerTable;
        }
      }
      plan.jobs.push_back(job);
      plan.chunk_of.push_back(static_cast<uint32_t>(i));
      plan.segment_of.push_back(seg);
      plan.tile_first.push_back(plan.tile_first.back() + static_cast<uint32_t>(tiles));
    }
  }
  ScratchLayout& s = plan.scratch;
  s.symbols = 0;
  s.row_escapes = AlignUp(symbols);
  s.channel_tables = s.row_escapes + AlignUp(4 * row_escapes);
  s.tables = s.channel_tables + AlignUp(2 * channel_tables);
  s.rings = s.tables + AlignUp(4 * tables);
  s.sums = s.rings + AlignUp(2 * rings);
  s.bytes = s.sums + 4 * sums;
  return plan;
}

void AssignScratch(DecodePlan& plan, uint8_t* base, const uint32_t* data) {
  const ScratchLayout& s = plan.scratch;
  for (SegmentJob& job : plan.jobs) {
    if (job.rope) job.rope = reinterpret_cast<const float*>(data + (reinterpret_cast<size_t>(job.rope) - 1));
    if (job.row_map) job.row_map = data + (reinterpret_cast<size_t>(job.row_map) - 1);
    if (job.sums) job.sums = reinterpret_cast<int32_t*>(base + s.sums) + (reinterpret_cast<size_t>(job.sums) - 1);
    if (job.predictor_ring) {
      job.predictor_ring = reinterpret_cast<int16_t*>(base + s.rings) + (reinterpret_cast<size_t>(job.predictor_ring) - 1);
    }
    if (!IsEntropyCoded(job.kind)) continue;
    job.symbols = base + s.symbols + reinterpret_cast<size_t>(job.symbols);
    job.row_escapes = reinterpret_cast<uint32_t*>(base + s.row_escapes) + reinterpret_cast<size_t>(job.row_escapes);
    if (job.in_chunk_tables) {
      job.channel_table = reinterpret_cast<uint16_t*>(base + s.channel_tables) + reinterpret_cast<size_t>(job.channel_table);
      job.tables = reinterpret_cast<uint32_t*>(base + s.tables) + reinterpret_cast<size_t>(job.tables);
    }
  }
}

DecodeArgs MakeDecodeArgs(const DecodePlan& plan, SegmentJob* jobs, SegmentFrame* frames, uint32_t* errors,
                          const ProfileTables& profile, void* const* bases) {
  DecodeArgs a;
  a.jobs = jobs;
  a.frames = frames;
  a.errors = errors;
  a.segments = static_cast<int32_t>(plan.jobs.size());
  a.profile = profile;
  a.destination = codec::MakeKvAddress(plan.destination, bases, plan.destination.block_table);
  return a;
}

namespace {

const char* ErrorText(uint32_t e) {
  switch (e) {
    case kGpuFrameTruncated: return "a field of the frame runs past the segment";
    case kGpuFrameLeftOver: return "bytes left over after the escapes";
    case kGpuBadStep: return "step is not a finite positive number";
    case kGpuBadMean: return "a channel mean is not finite";
    case kGpuBadBank: return "bad table bank (symbol range, frequencies not summing to 4096, or a table index)";
    case kGpuTooManyTables: return "an in-chunk bank of more than 16 tables (the GPU decoder's limit)";
    case kGpuEscapeCount: return "escape count does not match the stream's escape symbols";
    case kGpuBadSize: return "size does not fit the level and shape";
    case kGpuRansHeader: return "rANS stream: bad header (truncated, padding bits, tail or odd length)";
    case kGpuRansTruncated: return "rANS stream: truncated, a state needs a word past the end";
    case kGpuRansLeftOver: return "rANS stream: bytes left over after the last symbol";
    case kGpuRansFinalState: return "rANS stream: a lane's final state is not the encoder's start";
    case kGpuDestination: return "a position's block-table entry is outside the destination's blocks";
    case kGpuRansHandover: return "rANS stream: the fine stream starts from a state below 2^16";
    default: return "unknown GPU decode error";
  }
}

}  // namespace

Status ReportErrors(const DecodePlan& plan, const uint32_t* errors) {
  for (size_t j = 0; j < plan.jobs.size(); ++j) {
    if (errors[j] == kGpuOk) continue;
    const std::string where = "chunk " + std::to_string(plan.chunk_of[j]) + " " + codec::SegmentName(plan.segment_of[j]);
    const std::string text = where + ": " + ErrorText(errors[j]);
    return errors[j] == kGpuTooManyTables ? Status::ResourceExhausted(text)
           : errors[j] == kGpuDestination ? Status::InvalidArgument(text)
                                          : Status::CorruptData(text);
  }
  return Status::Ok();
}

std::vector<KernelGrid> DecodeGrids(const DecodePlan& plan) {
  const int segments = static_cast<int>(plan.jobs.size());
  if (segments == 0) return {};
  return {
      {DecodeKernel::kFrames, (segments + kFrameThreads - 1) / kFrameThreads, kFrameThreads},
      {DecodeKernel::kTables, segments * kMaxInChunkTables, kTableThreads},
      {DecodeKernel::kEntropy, (segments + kSegmentsPerEntropyBlock - 1) / kSegmentsPerEntropyBlock, kEntropyThreads},
      {DecodeKernel::kEscapes, segments, kEscapeThreads},
      {DecodeKernel::kReconstruct, static_cast<int>(plan.tile_first.back()), kReconstructThreads},
  };
}

}  // namespace kvstream::cuda
