// A PipelineDevice on the host, for tests on machines without a GPU: "device" memory is host memory, and
// the stream is a worker thread running the enqueued copies, decodes (through the CPU launcher, i.e. the
// GPU kernels' own code) and event records in order. A test seam, not a product path: it is as slow as
// the CPU launcher.
#pragma once

#include <memory>

#include "cuda/pipeline_device.h"

namespace kvstream::cuda::testing {

struct HostPipelineDeviceOptions {
  DecodeLimits limits;
  // Every stream operation first sleeps this long: a slow device, for backpressure tests.
  int delay_ms = 0;
};

std::unique_ptr<PipelineDevice> MakeHostPipelineDevice(std::shared_ptr<const Profile> profile,
                                                       const HostPipelineDeviceOptions& options = {});

}  // namespace kvstream::cuda::testing
