// The host's half of a GPU decode, compiled without CUDA so that the CPU launcher (cuda/testing/) and the
// device path share it: validating chunk headers (with the CPU decoder's messages) and the destination,
// laying out the segment jobs and the scratch they decode through, and a profile's tables in the form
// the kernels read (ProfileTables).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/kernels/decode_job.h"
#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"

namespace kvstream::cuda {

// A profile's data as flat arrays (DeviceProfile uploads them; ProfileTables says what each holds).
struct ProfileImage {
  int32_t layers = 0, channels = 0, levels = 0;
  std::vector<float> means, steps;
  std::vector<uint32_t> slots;
  std::vector<uint16_t> channel_table;
  int32_t head_dim = 0, rope_layout = 0;  // the transform section, when the profile has one
  std::vector<float> transform_means, transform_steps;
  std::vector<int16_t> bases;
  std::vector<uint32_t> transform_kept;
  std::vector<uint16_t> transform_table;
  std::vector<float> input_scales, bias, predictor_scales;  // the prediction section, when the profile has one
  std::vector<int16_t> predictor, residual_bases;
  std::vector<uint32_t> prediction_kept;
  std::vector<uint16_t> prediction_table;
  bool predictor_bytes = false;  // every predictor weight within int8

  // The tables over this image's own arrays (host memory).
  ProfileTables HostTables() const;
};
Result<ProfileImage> MakeProfileImage(const Profile& profile);

// Where a launch's scratch goes, as offsets within one buffer.
struct ScratchLayout {
  size_t symbols = 0, row_escapes = 0, channel_tables = 0, tables = 0, rings = 0, sums = 0;  // offsets
  size_t bytes = 0;                                                      // the buffer's size
};

struct DecodePlan {
  std::vector<SegmentJob> jobs;      // segment pointers into the chunks' memory; scratch and data pointers
                                     // relative until AssignScratch
  std::vector<uint32_t> data;        // read-only data the jobs point into: row maps and RoPE tables (f32 bits)
  std::vector<uint32_t> tile_first;  // reconstruction tiles: segment s's first, then the count
  std::vector<uint32_t> chunk_of;       // per job: its chunk
  std::vector<SegmentInfo> segment_of;  // per job: its entry of the chunk's index
  ScratchLayout scratch;
  // Destination: its joined bases and the address over them (block table in the destination's memory).
  std::vector<void*> bases;
  KvDestination destination;
};

// Validates every chunk's header (from its host copy) against the limits, the profile and the
// destination, and plans the decode. `chunks[i].bytes` may point to memory the host cannot read; only
// host_header is read.
Result<DecodePlan> PlanDecode(const std::vector<GpuChunk>& chunks, const Profile* profile,
                              const KvDestination& destination, const DecodeLimits& limits);

// Points the plan's scratch fields into a buffer of plan.scratch.bytes at `base`, and its data fields into
// a copy of plan.data at `data`.
void AssignScratch(DecodePlan& plan, uint8_t* base, const uint32_t* data);

// The arguments of a launch over the plan, with frames and errors at the given arrays (segments of
// each), the profile's tables and the destination's bases at `bases` (a copy of plan.bases in the memory
// the kernels read).
DecodeArgs MakeDecodeArgs(const DecodePlan& plan, SegmentJob* jobs, SegmentFrame* frames, uint32_t* errors,
                          const ProfileTables& profile, void* const* bases);

// The first failed segment's error, named as the CPU decoder names segments, or Ok.
Status ReportErrors(const DecodePlan& plan, const uint32_t* errors);

// The five launches of a decode, in order, and their grids: both launchers (the CUDA one and the CPU
// one) run exactly these.
enum class DecodeKernel { kFrames, kTables, kEntropy, kEscapes, kReconstruct };
struct KernelGrid {
  DecodeKernel kernel;
  int blocks;
  int threads;
};
std::vector<KernelGrid> DecodeGrids(const DecodePlan& plan);

}  // namespace kvstream::cuda
