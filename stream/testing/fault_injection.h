// stream/testing/fault_injection.h — the tests' seam into a Sender: chunk sends that fail on purpose.
//
// Not part of the public API (include/): the fault suites (tests/stream/faults_test.cpp, later the Python
// tests) start their senders through it to corrupt or drop chosen payloads and watch the receiver cope.
#pragma once

#include <functional>
#include <memory>

#include "kvstream/status.h"
#include "kvstream/stream.h"
#include "kvstream/transport.h"

namespace kvstream {
namespace testing {

// What the sender does with the payload of a chunk request it is about to send.
enum class FaultAction {
  kNone,
  kCorrupt,  // flip one byte after the CRC is stamped: the receiver must notice and re-request
  kDrop,     // never send: the receiver's chunk timeout must fire
};
// Called on the sender's threads, one call at a time, for every chunk send.
using FaultHook = std::function<FaultAction(const ChunkRequest&)>;

}  // namespace testing

// A friend of Sender (kvstream/stream.h).
struct SenderTestPeer {
  // Sender::Start, with every chunk send passed through `hook` first.
  static Result<std::unique_ptr<Sender>> StartWithFaults(SenderOptions options, testing::FaultHook hook);
};

}  // namespace kvstream
