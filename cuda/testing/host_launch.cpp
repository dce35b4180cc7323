// DecodeChunksOnHost (host_launch.h).
#include "cuda/testing/host_launch.h"

#include <optional>

#include "cuda/decode_plan.h"
#include "cuda/kernels/block_executor.h"
#include "cuda/kernels/entropy_kernel.h"
#include "cuda/kernels/frame_kernel.h"
#include "cuda/kernels/reconstruct_kernel.h"
#include "cuda/kernels/table_kernel.h"

namespace kvstream::cuda::testing {

Status DecodeChunksOnHost(const std::vector<GpuChunk>& chunks, const Profile* profile, const KvDestination& destination,
                          const DecodeLimits& limits) {
  if (destination.device != Device::kHost) return Status::InvalidArgument("destination: the CPU launcher writes host memory");
  KVSTREAM_ASSIGN_OR_RETURN(DecodePlan plan, PlanDecode(chunks, profile, destination, limits));
  std::vector<uint8_t> scratch(plan.scratch.bytes);
  AssignScratch(plan, scratch.data(), plan.data.data());
  std::optional<ProfileImage> image;
  ProfileTables tables;
  if (profile != nullptr) {
    KVSTREAM_ASSIGN_OR_RETURN(ProfileImage made, MakeProfileImage(*profile));
    image.emplace(std::move(made));
    tables = image->HostTables();
  }
  std::vector<SegmentFrame> frames(plan.jobs.size());
  std::vector<uint32_t> errors(plan.jobs.size(), kGpuOk);
  const DecodeArgs args = MakeDecodeArgs(plan, plan.jobs.data(), frames.data(), errors.data(), tables, plan.bases.data());
  const TileMap tiles{plan.tile_first.data()};
  for (const KernelGrid& grid : DecodeGrids(plan)) {
    for (int b = 0; b < grid.blocks; ++b) {
      HostBlock x(b, grid.threads);
      switch (grid.kernel) {
        case DecodeKernel::kFrames: FrameKernel(x, args); break;
        case DecodeKernel::kTables: {
          TableShared shared{};
          TableKernel(x, args, shared);
          break;
        }
        case DecodeKernel::kEntropy: {
          EntropyShared shared{};
          EntropyKernel(x, args, shared);
          break;
        }
        case DecodeKernel::kEscapes: EscapeScanKernel(x, args); break;
        case DecodeKernel::kReconstruct: {
          static thread_local ReconstructShared shared;  // 16 KiB: not on the stack
          ReconstructKernel(x, args, tiles, shared);
          break;
        }
      }
    }
  }
  return ReportErrors(plan, errors.data());
}

}  // namespace kvstream::cuda::testing
