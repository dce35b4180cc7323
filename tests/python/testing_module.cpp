// kvstream_testing: the Python tests' seam into a Sender (stream/testing/fault_injection.h), built only in
// the build tree, never installed. Its Sender is kvstream.Sender, started with chunk sends that fail on
// purpose.
#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "bindings/src/stream.h"
#include "stream/testing/fault_injection.h"

namespace nb = nanobind;
using kvstream::python::PySender;

NB_MODULE(kvstream_testing, m) {
  nb::module_::import_("kvstream");  // registers kvstream.Sender, which the function below returns
  m.def(
      "sender_with_faults",
      [](const std::vector<int>& corrupt_chunks, const std::vector<int>& drop_chunks, int times) {
        // Each listed chunk's first `times` sends are corrupted (or dropped); later ones go through.
        auto sent = std::make_shared<std::vector<std::atomic<int>>>(4096);
        kvstream::testing::FaultHook hook = [=](const kvstream::ChunkRequest& request) {
          const int chunk = request.chunk;
          const bool corrupt = std::count(corrupt_chunks.begin(), corrupt_chunks.end(), chunk) > 0;
          const bool drop = std::count(drop_chunks.begin(), drop_chunks.end(), chunk) > 0;
          if ((!corrupt && !drop) || chunk < 0 || chunk >= static_cast<int>(sent->size())) return kvstream::testing::FaultAction::kNone;
          if ((*sent)[static_cast<size_t>(chunk)]++ >= times) return kvstream::testing::FaultAction::kNone;
          return corrupt ? kvstream::testing::FaultAction::kCorrupt : kvstream::testing::FaultAction::kDrop;
        };
        kvstream::SenderOptions options = kvstream::python::SenderOptionsOf(
            "127.0.0.1", 0, nullptr, nb::none(), "channel-uniform", nb::none(), 256, 0.0, nb::int_(2), uint64_t{64} << 20, 1, 16);
        return std::make_unique<PySender>(std::move(options), [hook](kvstream::SenderOptions o) {
          return kvstream::SenderTestPeer::StartWithFaults(std::move(o), hook);
        });
      },
      nb::arg("corrupt_chunks") = std::vector<int>{}, nb::arg("drop_chunks") = std::vector<int>{}, nb::arg("times") = 1,
      "A kvstream.Sender on 127.0.0.1 whose listed chunks' first `times` sends are corrupted or dropped.");
}
