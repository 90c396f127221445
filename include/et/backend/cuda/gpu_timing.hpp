// The GPU time of queued work without the host's time to queue it, for the algorithm
// searches that time candidates (cudnn_conv.hpp). Each batch of runs is queued behind
// kernels::hold_until, which keeps the stream waiting until the host raises a flag in pinned
// memory once the whole batch is queued: the events around the batch then see the runs back
// to back, as they execute in a program that keeps the GPU busy. Timed without the hold, a
// run is timed with the host's time to queue it inside the window (35-39 us of host time
// per conv2d call on the H200 machines, against 45 us of GPU time for a large convolution),
// and candidates rank by the host's noise. Host code; nvcc only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>

#include "et/kernels/hold.cuh"
#include "et/runtime/error.hpp"
#include "et/runtime/pinned.hpp"

namespace et::detail {

/// A flag in pinned host memory that a kernel on `stream` reads: a block of the caching
/// pinned allocator (runtime/pinned.hpp), page-locked once per process rather than per
/// timed plan. Under unified addressing (every 64-bit CUDA process) a kernel reads
/// page-locked memory through the host's own pointer.
/// Destroying the flag raises it and waits for the stream, so a hold_until still waiting
/// ends before the block goes back to the cache.
class HostFlag {
 public:
  explicit HostFlag(cudaStream_t stream)
      : stream_(stream), block_(allocate_pinned(sizeof(int))), flag_(static_cast<volatile int*>(block_.get())) {
    *flag_ = 0;
  }
  HostFlag(const HostFlag&) = delete;
  HostFlag& operator=(const HostFlag&) = delete;
  ~HostFlag() {
    raise();
    (void)cudaStreamSynchronize(stream_);
  }
  void lower() { *flag_ = 0; }
  void raise() { *flag_ = 1; }
  const volatile int* device() const { return flag_; }

 private:
  cudaStream_t stream_;
  std::shared_ptr<void> block_;
  volatile int* flag_;
};

/// Milliseconds of GPU time per call of `run` (which queues work on `stream` and returns
/// false when it failed): the least over `reps` batches of `runs` calls, each batch queued
/// behind a held stream. Negative if any call failed. A batch whose queueing outlasts the
/// hold's limit (a stalled host) is timed with the idle GPU in it, and loses to the others.
template <class Run>
float gpu_ms_per_run(cudaStream_t stream, int runs, int reps, Run&& run) {
  constexpr std::uint64_t hold_limit_ns = 100'000'000;
  HostFlag flag(stream);
  cudaEvent_t start{}, stop{};
  ET_CUDA_CHECK(cudaEventCreate(&start));
  ET_CUDA_CHECK(cudaEventCreate(&stop));
  float best = std::numeric_limits<float>::infinity();
  bool ran = true;
  for (int rep = 0; rep < reps && ran; ++rep) {
    flag.lower();
    kernels::hold_until<<<1, 1, 0, stream>>>(flag.device(), hold_limit_ns);
    ET_CUDA_CHECK(cudaGetLastError());
    ET_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < runs && ran; ++i) ran = run();
    ET_CUDA_CHECK(cudaEventRecord(stop, stream));
    flag.raise();
    ET_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    best = std::min(best, ms / static_cast<float>(runs));
  }
  ET_CUDA_CHECK(cudaEventDestroy(start));
  ET_CUDA_CHECK(cudaEventDestroy(stop));
  return ran ? best : -1.0f;
}

}  // namespace et::detail
