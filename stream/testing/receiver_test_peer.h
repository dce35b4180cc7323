// stream/testing/receiver_test_peer.h — the tests' seam into a Receiver: device fetches on the host.
//
// Not part of the public API (include/): the stream suites fetch through the device pipeline on machines
// without a GPU by giving the Receiver the host PipelineDevice (cuda/testing/), which runs the GPU
// kernels' code through the CPU launcher. Host-memory KvDestinations then take the device path too.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cuda/pipeline_device.h"
#include "kvstream/status.h"
#include "kvstream/stream.h"

namespace kvstream {

// A friend of Receiver (kvstream/stream.h).
struct ReceiverTestPeer {
  using MakeDevice = std::function<Result<std::unique_ptr<cuda::PipelineDevice>>()>;
  // Receiver::Connect, with device fetches on devices `make_device` makes, for every KvDestination.
  static Result<std::unique_ptr<Receiver>> ConnectWithDevice(const std::string& host, int port, ReceiverOptions options,
                                                             MakeDevice make_device);
};

}  // namespace kvstream
