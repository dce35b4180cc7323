// Runs a codec call's independent segments on the caller's pool, on std::threads of its own, or inline.
#pragma once

#include <cstddef>
#include <functional>

#include "kvstream/codec.h"
#include "kvstream/status.h"

namespace kvstream::codec {

// Calls task(i) for i in [0, count): through `parallel_for` when set, else on min(threads, count)
// threads (the calling thread among them). Returns the failed Status of the lowest index, so the error
// reported does not depend on scheduling.
Status RunParallel(size_t count, int threads, const ParallelFor& parallel_for,
                   const std::function<Status(size_t)>& task);

}  // namespace kvstream::codec
