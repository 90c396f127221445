// Device code only: a one-thread kernel that holds its stream until the host raises a flag
// in pinned host memory, or until a time limit passes. A timing queues the runs it measures
// behind it and then raises the flag, so that the GPU runs them back to back and the events
// around them time the GPU alone, not the host queueing them (NVIDIA nvbench's
// blocking_kernel). Included by include/et/backend/cuda/gpu_timing.hpp; nvcc only.
#pragma once

#include <cstdint>

namespace et::kernels {

/// The GPU's nanosecond clock.
__device__ __forceinline__ std::uint64_t global_timer() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

template <int = 0>  // a template, so that every translation unit may define it
__global__ void hold_until(const volatile int* flag, std::uint64_t limit_ns) {
  const std::uint64_t start = global_timer();
  while (*flag == 0 && global_timer() - start < limit_ns) __nanosleep(1000);
}

}  // namespace et::kernels
