// The counters of kernels that finish a reduction in the block that ends last
// (cross_entropy's forward, kernels/et/kernels/softmax.cuh): a word of device memory that
// is 0 when the kernel starts, counts the blocks done, and is set back to 0 by the last.
//
// The 0 is kept rather than written before each launch (a memset is one more operation on
// the stream, every call): one word per device and stream, so that the kernels sharing a
// word are ordered by their stream. Inside a CUDA graph capture (runtime/graph.hpp) a
// kernel gets a word of the graph's own memory instead, zeroed by a memset node at each
// replay: a graph may replay on another stream, beside eager work on the one it was
// captured on. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/block_counter.hpp serves kernels: compile this file with nvcc"
#endif

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "et/runtime/allocator.hpp"

namespace et::detail::cuda_backend {

/// A word that is 0 when the next kernel queued on `call`'s stream starts, for it to count
/// on and leave at 0.
inline unsigned* block_counter(const CudaCall& call) {
  const int device = call.device();
  if (const std::shared_ptr<CaptureArena>& arena = capture_arena(); arena && arena->device == device) {
    const std::shared_ptr<void> word = allocate_cuda(device, sizeof(unsigned));  // the arena's: lives with the graph
    ET_CUDA_CHECK(cudaMemsetAsync(word.get(), 0, sizeof(unsigned), call.stream()));
    return static_cast<unsigned*>(word.get());
  }
  struct Words {
    std::mutex mutex;
    std::vector<std::pair<cudaStream_t, unsigned*>> of[max_cuda_devices];
  };
  static Words* words = new Words;  // never freed, as streams are never destroyed (stream.hpp)
  std::lock_guard lock(words->mutex);
  for (const auto& [stream, word] : words->of[device])
    if (stream == call.stream()) return word;
  void* word = nullptr;
  ET_CUDA_CHECK(cudaMalloc(&word, sizeof(unsigned)));
  ET_CUDA_CHECK(cudaMemsetAsync(word, 0, sizeof(unsigned), call.stream()));  // before the stream's first use
  words->of[device].emplace_back(call.stream(), static_cast<unsigned*>(word));
  return static_cast<unsigned*>(word);
}

}  // namespace et::detail::cuda_backend
