// `kvstream bench transport`'s ucx_raw rows: our DataPlane against ucx_perftest (ucp_am_bw), the same
// message size, count and window of outstanding sends, each between two processes on this host.
#pragma once

#include <cstdint>

#include "kvstream/status.h"

namespace kvstream::bench {

// Moves `iters` messages of `size` bytes (after a warm-up of max(window, iters / 10)) from a DataPlane of
// this process to one in a forked child (as ucx_perftest does, so UCX can use the same shared-memory
// transports), `window` sends outstanding, each landing in a receive the child posted ahead (twice the
// window); returns Gbit/s over the measured messages. Each send's completion callback sends the next one
// (on the progress thread, as ucx_perftest's loop does in its one thread), so no harness thread wakes
// per message, and every receive lands in one buffer, as in ucx_perftest. Forks: call before this
// process starts threads of its own.
Result<double> DataPlaneThroughput(uint64_t size, int iters, int window);

// ucx_perftest -t ucp_am_bw with the same size, iterations, warm-up and window, server and client on
// loopback port `port`; returns its "overall" bandwidth in Gbit/s. `peer_errors`: endpoints with peer
// error handling (-e), as our DataPlane creates them; UCX 1.13's shared-memory transports have no peer
// failure handler, so with it both sides use tcp on loopback. Needs ucx_perftest (Debian ucx-utils) in
// PATH.
Result<double> PerftestThroughput(uint64_t size, int iters, int window, int port, bool peer_errors);

}  // namespace kvstream::bench
