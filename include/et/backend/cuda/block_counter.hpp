// The counters of kernels that finish a reduction in the block that ends last
// (cross_entropy's forward, kernels/et/kernels/softmax.cuh; the multi-tensor norms;
// batch_norm's statistics, one a channel): words of device memory that are 0 when the
// kernel starts, count the blocks done, and are set back to 0 by the last.
//
// The 0 is kept rather than written before each launch (a memset is one more operation on
// the stream, every call): one array of words per device and stream, so that the kernels
// sharing a word are ordered by their stream. Inside a CUDA graph capture
// (runtime/graph.hpp) a kernel gets words of the graph's own memory instead, zeroed by a
// memset node at each replay: a graph may replay on another stream, beside eager work on
// the one it was captured on. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/block_counter.hpp serves kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "et/runtime/allocator.hpp"

namespace et::detail::cuda_backend {

/// `count` words that are 0 when the next kernel queued on `call`'s stream starts, for it to
/// count on and leave at 0: one a group of blocks that finish a result together (a channel
/// of batch_norm's statistics), so that the groups' last blocks do not queue on one word.
inline unsigned* block_counters(const CudaCall& call, std::size_t count) {
  const int device = call.device();
  const std::size_t bytes = sizeof(unsigned) * count;
  if (const std::shared_ptr<CaptureArena>& arena = capture_arena(); arena && arena->device == device) {
    const std::shared_ptr<void> words = allocate_cuda(device, bytes);  // the arena's: lives with the graph
    ET_CUDA_CHECK(cudaMemsetAsync(words.get(), 0, bytes, call.stream()));
    return static_cast<unsigned*>(words.get());
  }
  struct Words {
    cudaStream_t stream;
    unsigned* words;
    std::size_t count;
  };
  struct Streams {
    std::mutex mutex;
    std::vector<Words> of[max_cuda_devices];
  };
  static Streams* streams = new Streams;  // never freed, as streams are never destroyed (stream.hpp)
  std::lock_guard lock(streams->mutex);
  Words* found = nullptr;
  for (Words& w : streams->of[device])
    if (w.stream == call.stream()) found = &w;
  if (found && found->count >= count) return found->words;
  // A new stream, or more words than it had: a larger zeroed array. The old one is not
  // freed (a few words): kernels queued before may still count on it.
  const std::size_t grown = std::max<std::size_t>(count, found ? 2 * found->count : 1);
  void* words = nullptr;
  ET_CUDA_CHECK(cudaMalloc(&words, sizeof(unsigned) * grown));
  ET_CUDA_CHECK(cudaMemsetAsync(words, 0, sizeof(unsigned) * grown, call.stream()));  // before the stream's next use
  if (found) *found = {call.stream(), static_cast<unsigned*>(words), grown};
  else streams->of[device].push_back({call.stream(), static_cast<unsigned*>(words), grown});
  return static_cast<unsigned*>(words);
}

/// One such word.
inline unsigned* block_counter(const CudaCall& call) { return block_counters(call, 1); }

}  // namespace et::detail::cuda_backend
