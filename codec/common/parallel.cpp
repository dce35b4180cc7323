// RunParallel: segment-level parallelism without global state (see parallel.h).
#include "codec/common/parallel.h"

#include <atomic>
#include <thread>
#include <vector>

namespace kvstream::codec {

Status RunParallel(size_t count, int threads, const ParallelFor& parallel_for,
                   const std::function<Status(size_t)>& task) {
  std::vector<Status> statuses(count);
  const auto run_one = [&](size_t i) { statuses[i] = task(i); };
  if (parallel_for) {
    parallel_for(count, run_one);
  } else if (threads <= 1 || count <= 1) {
    for (size_t i = 0; i < count; ++i) run_one(i);
  } else {
    std::atomic<size_t> next{0};
    const auto worker = [&] {
      for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) run_one(i);
    };
    const size_t n = std::min(count, static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    pool.reserve(n - 1);
    for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
    worker();
    for (auto& th : pool) th.join();
  }
  for (auto& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace kvstream::codec
