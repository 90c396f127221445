// Pinned (page-locked) host memory, et::Pinned's storage, and the rule that makes its
// non-blocking copies safe: every copy between a pinned block and a GPU that may still be
// running when the call returns leaves an event in the block, and the first host access
// to the block (Tensor::data(), so every read, write, CPU expression, to_vector and item)
// waits for those events. PyTorch's pitfall, reading a non_blocking copy's destination
// before the copy has landed, cannot happen; nor can overwriting a source still being read.
//
// Blocks come from cudaHostAlloc (portable: every GPU sees them) in power-of-two sizes, and
// a freed block is cached for the next allocation of its size once its pending copies have
// finished (page-locking costs about a millisecond per 100 MB); empty_cache(et::pinned)
// hands the cache back. A process with no GPU has nothing to pin for: its "pinned" blocks
// are ordinary aligned host memory.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "et/runtime/allocator.hpp"

namespace et::detail {

/// Freed page-locked blocks by size, for reuse.
struct PinnedCache {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, void*>> blocks;
};
inline PinnedCache& pinned_cache() {
  static PinnedCache* cache = new PinnedCache;  // never destroyed: blocks may be freed during static destruction
  return *cache;
}

inline std::size_t pinned_block_size(std::size_t bytes) {
  std::size_t size = 4096;
  while (size < bytes) size *= 2;
  return size;
}

/// The deleter of a pinned block, and the events of copies that may still use it.
struct PinnedBlock {
  std::size_t bytes;
  bool page_locked;  ///< false: no GPU in this process, plain host memory
  VersionCounter version;
#if defined(ET_HAS_CUDA_RUNTIME)
  std::vector<std::pair<cudaStream_t, cudaEvent_t>> pending;  ///< the latest copy per stream
  std::atomic<bool> has_pending{false};
  SpinLock lock;

  PinnedBlock(std::size_t b, bool locked) : bytes(b), page_locked(locked) {}
  PinnedBlock(const PinnedBlock& other) : bytes(other.bytes), page_locked(other.page_locked) {}

  /// Marks the end of the work queued on `stream` so far as touching this block.
  void add_pending(cudaStream_t stream) {
    std::lock_guard guard(lock);
    for (auto& [on, event] : pending)
      if (on == stream) {  // a later point of the same stream covers the earlier one
        ET_CUDA_CHECK(cudaEventRecord(event, stream));
        return;
      }
    cudaEvent_t event{};
    ET_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    ET_CUDA_CHECK(cudaEventRecord(event, stream));
    pending.emplace_back(stream, event);
    has_pending.store(true, std::memory_order_release);
  }

  /// Waits for every pending copy (does not throw: a failure is printed).
  void wait() noexcept {
    if (!has_pending.load(std::memory_order_acquire)) return;
    std::lock_guard guard(lock);
    for (auto& [stream, event] : pending) {
      const cudaError_t status = cudaEventSynchronize(event);
      if (status != cudaSuccess && status != cudaErrorCudartUnloading)
        std::fprintf(stderr, "et: warning: waiting for a copy into pinned memory failed: %s\n",
                     cudaGetErrorString(status));
      (void)cudaEventDestroy(event);
    }
    (void)cudaGetLastError();
    pending.clear();
    has_pending.store(false, std::memory_order_release);
  }
#else
  PinnedBlock(std::size_t b, bool locked) : bytes(b), page_locked(locked) {}
  void wait() noexcept {}
#endif

  void operator()(void* p) noexcept {
    wait();
    if (page_locked) {  // back to the cache: its copies are done
      PinnedCache& cache = pinned_cache();
      std::lock_guard guard(cache.mutex);
      cache.blocks.emplace_back(pinned_block_size(bytes), p);
    } else {
      ::operator delete(p, std::align_val_t{host_alignment});
      pinned_counters().extra_reserved.fetch_sub(bytes, std::memory_order_relaxed);
    }
    pinned_counters().remove(bytes);
  }
};

/// Hands every cached page-locked block back to the system.
inline void release_pinned_cache() {
  PinnedCache& cache = pinned_cache();
  std::lock_guard guard(cache.mutex);
  for (auto& [size, p] : cache.blocks) {
#if defined(ET_HAS_CUDA_RUNTIME)
    (void)cudaFreeHost(p);
    (void)cudaGetLastError();
#endif
    pinned_counters().extra_reserved.fetch_sub(size, std::memory_order_relaxed);
  }
  cache.blocks.clear();
}

inline std::shared_ptr<void> allocate_pinned(std::size_t bytes) {
  if (bytes == 0) return {};
  check_injected_fault(bytes, [] { return "cpu:pinned"; });
  void* ptr = nullptr;
  bool page_locked = false;
#if defined(ET_HAS_CUDA_RUNTIME)
  if (device_count() > 0) {
    const std::size_t size = pinned_block_size(bytes);
    {
      PinnedCache& cache = pinned_cache();
      std::lock_guard guard(cache.mutex);
      for (auto it = cache.blocks.begin(); it != cache.blocks.end(); ++it)
        if (it->first == size) {
          ptr = it->second;
          cache.blocks.erase(it);
          break;
        }
    }
    if (ptr) {
      pinned_counters().add(bytes);
      return std::shared_ptr<void>(ptr, PinnedBlock(bytes, true));
    }
    cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {  // hand the cache back and try once more
      (void)cudaGetLastError();
      release_pinned_cache();
      status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    }
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      throw OutOfMemory("cpu:pinned", bytes, static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
                        static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page,
                        "the operating system refused to page-lock that much");
    }
    ET_CUDA_CHECK_STATUS(status, "cudaHostAlloc(&ptr, size, cudaHostAllocPortable)");
    page_locked = true;
    pinned_counters().extra_reserved.fetch_add(size, std::memory_order_relaxed);
  }
#endif
  if (!page_locked) {
    ptr = ::operator new(bytes, std::align_val_t{host_alignment}, std::nothrow);
    if (!ptr) throw OutOfMemory("cpu:pinned", bytes, 0, 0, "host allocation failed");
    pinned_counters().extra_reserved.fetch_add(bytes, std::memory_order_relaxed);
  }
  pinned_counters().add(bytes);
  return std::shared_ptr<void>(ptr, PinnedBlock(bytes, page_locked));
}

/// Waits until no copy started without blocking still uses `storage` (a no-op unless it
/// is a pinned block with pending copies).
inline void wait_host_access(const std::shared_ptr<void>& storage) noexcept {
  if (PinnedBlock* block = std::get_deleter<PinnedBlock>(storage)) block->wait();
}

#if defined(ET_HAS_CUDA_RUNTIME)
/// Records that the work queued on `stream` so far uses the pinned block `storage`.
inline void add_pending_copy(const std::shared_ptr<void>& storage, cudaStream_t stream) {
  if (PinnedBlock* block = std::get_deleter<PinnedBlock>(storage); block && block->page_locked)
    block->add_pending(stream);
}
#endif

}  // namespace et::detail
