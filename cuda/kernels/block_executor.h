// How a kernel's code runs: one body per kernel, written as phases between barriers over an executor,
// so that the same code runs as a CUDA block (DeviceBlock: each thread runs its own share of every phase)
// and, in tests on machines without a GPU, on the CPU (HostBlock: a phase runs for every thread of the
// block before the next one starts, which is what a barrier guarantees).
//
// A body is a function template over the executor X:
//   x.block(), x.threads()            the block index and the block's size (a multiple of 32)
//   x.Each([&](int t) { ... })        a phase: runs for every thread t of the block
//   x.Sync()                          a barrier between phases (__syncthreads)
//   x.Ballot(pred, use)               a warp vote: use(t, mask) gets the 32-bit mask of pred(t') over the
//                                     lanes t' of t's warp (bit = lane)
//   x.Mma<AU, BU>(operands)           a warp's tensor-core product (warp_mma.h): operands(t, a, b, d) points
//                                     lane t's A and B fragments and its accumulators d += A x B
//   X::Local<T>                       a per-thread variable kept across phases: v[t]
// Control flow outside Each must be the same for every thread of the block (a loop's count, a branch's
// condition), as a barrier or a full-warp vote requires on the GPU.
#pragma once

#include <cstdint>
#include <vector>

#include "common/half.h"
#include "cuda/kernels/warp_mma.h"

namespace kvstream::cuda {

inline constexpr int kWarpSize = 32;

KVSTREAM_HD int PopCount(uint32_t v) {
#if defined(__CUDA_ARCH__)
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

// The CPU launcher's block: phases run thread by thread, in thread order.
class HostBlock {
 public:
  HostBlock(int block, int threads) : block_(block), threads_(threads) {}
  int block() const { return block_; }
  int threads() const { return threads_; }

  template <typename F>
  void Each(F&& phase) {
    for (int t = 0; t < threads_; ++t) phase(t);
  }
  void Sync() {}
  template <typename Pred, typename Use>
  void Ballot(Pred&& pred, Use&& use) {
    for (int w = 0; w < threads_; w += kWarpSize) {
      uint32_t mask = 0;
      for (int lane = 0; lane < kWarpSize; ++lane) mask |= (pred(w + lane) ? 1u : 0u) << lane;
      for (int lane = 0; lane < kWarpSize; ++lane) use(w + lane, mask);
    }
  }

  // The product of each warp's 32 lanes' fragments, exactly, as the tensor cores compute it.
  template <bool kAUnsigned, bool kBUnsigned, typename Operands>
  void Mma(Operands&& operands) {
    for (int w = 0; w < threads_; w += kWarpSize) {
      const uint32_t* a[kWarpSize];
      const uint32_t* b[kWarpSize];
      int32_t* d[kWarpSize];
      for (int lane = 0; lane < kWarpSize; ++lane) operands(w + lane, a[lane], b[lane], d[lane]);
      MmaEmulate<kAUnsigned, kBUnsigned>(a, b, d);
    }
  }

  template <typename T>
  class Local {
   public:
    explicit Local(const HostBlock& x) : values_(static_cast<size_t>(x.threads())) {}
    T& operator[](int t) { return values_[static_cast<size_t>(t)]; }

   private:
    std::vector<T> values_;
  };

 private:
  int block_;
  int threads_;
};

#if defined(__CUDACC__)
// The GPU's block: this thread's share of each phase.
class DeviceBlock {
 public:
  __device__ int block() const { return static_cast<int>(blockIdx.x); }
  __device__ int threads() const { return static_cast<int>(blockDim.x); }

  template <typename F>
  __device__ void Each(F&& phase) {
    phase(static_cast<int>(threadIdx.x));
  }
  __device__ void Sync() { __syncthreads(); }
  template <typename Pred, typename Use>
  __device__ void Ballot(Pred&& pred, Use&& use) {
    const int t = static_cast<int>(threadIdx.x);
    use(t, __ballot_sync(0xffffffffu, pred(t)));
  }

  template <bool kAUnsigned, bool kBUnsigned, typename Operands>
  __device__ void Mma(Operands&& operands) {
    const uint32_t* a;
    const uint32_t* b;
    int32_t* d;
    operands(static_cast<int>(threadIdx.x), a, b, d);
    MmaDevice<kAUnsigned, kBUnsigned>(a, b, d);
  }

  template <typename T>
  class Local {
   public:
    __device__ explicit Local(const DeviceBlock&) {}
    __device__ T& operator[](int) { return value_; }

   private:
    T value_;
  };
};
#endif

}  // namespace kvstream::cuda
