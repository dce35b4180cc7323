// The CPU launcher of the GPU decoder's kernels, for tests on machines without a GPU: the same plan and
// the same kernel code (cuda/kernels/), each launch run block by block with HostBlock, every phase for
// every thread of a block before the next phase. Serial and slow: for a few chunks per test case.
#pragma once

#include <vector>

#include "kvstream/codec.h"
#include "kvstream/cuda.h"
#include "kvstream/kv_destination.h"

namespace kvstream::cuda::testing {

// As GpuDecoder::Decode then Finish, with the chunks (GpuChunk::bytes) and the destination in host memory.
Status DecodeChunksOnHost(const std::vector<GpuChunk>& chunks, const Profile* profile, const KvDestination& destination,
                          const DecodeLimits& limits = {});

}  // namespace kvstream::cuda::testing
