// Writing decoded rows into the caller's views: one rounding to the view's dtype, streaming stores for
// fp32 rows. Shared by every segment decoder.
#pragma once

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kvstream/status.h"
#include "kvstream/tensor.h"

namespace kvstream::codec {

// Writes one [token] row of floats into a view, rounding once to its dtype. Dense fp32 rows go out with
// streaming stores where the CPU has them, so the task that writes them must run WithFencedStores.
void StoreRow(const TensorView& v, int64_t layer, int64_t token, const float* row);

// Streaming stores are weakly ordered: a task fences its own before RunParallel's synchronisation hands
// the rows to the caller.
template <typename Task>
auto WithFencedStores(Task task) {
  return [task](size_t i) -> Status {
    Status status = task(i);
#if defined(__SSE2__)
    _mm_sfence();
#endif
    return status;
  };
}

}  // namespace kvstream::codec
