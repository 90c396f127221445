// Freed host blocks of 256 KiB and more, kept for the next allocation of their size, as the
// CUDA pool keeps device blocks: a training step frees and allocates the same large blocks
// (activations, gradients) every time, and a block fresh from the system costs the kernel's
// zeroing of every page at its first touch. Profiled on the 2-core machine (2026-12-02), the
// LSTM of Table 7 spent 22% of its CPU step in the kernel's clear_page; FCN-S's gradients
// alone are 470 MB a step.
//
// Sizes are rounded up to whole huge pages (2 MiB; 64 KiB below 4 MiB) and a freed block
// waits for an allocation of exactly its rounded size, most recently freed first. The cache holds at most a quarter
// of the machine's memory: past that the oldest blocks go back to the system. It is handed
// back whole by et::empty_cache(et::cpu), and before an allocation the system refused is
// tried again. ASan sees a cached block as live: a use after free of one is not reported.
#pragma once

#include <cstddef>
#include <limits>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include <unistd.h>

namespace et::detail {

/// Blocks from twice this size on are aligned to, and advised as, transparent huge pages (a
/// fresh 256 MiB block then faults in 128 times instead of 65536), and are cached when freed.
inline constexpr std::size_t huge_page_bytes = std::size_t{2} << 20;

/// Blocks from this size on are cached (glibc's malloc hands blocks of this size and more
/// back to the system at their free, or maps them afresh: ResNet-56's 2 MiB activations
/// faulted in every step).
inline constexpr std::size_t cached_host_bytes = std::size_t{256} << 10;

/// The alignment of every host block below 4 MiB.
inline constexpr std::size_t host_alignment = 64;

inline bool is_cached_host_size(std::size_t bytes) { return bytes >= cached_host_bytes; }
inline bool is_huge_host_size(std::size_t bytes) { return bytes >= 2 * huge_page_bytes; }

/// The size a cached block has: bytes rounded up to whole huge pages, or below 4 MiB to
/// 64 KiB (SIZE_MAX, which no allocation gets, where that would overflow).
inline std::size_t cached_host_size(std::size_t bytes) {
  const std::size_t unit = is_huge_host_size(bytes) ? huge_page_bytes : std::size_t{64} << 10;
  if (bytes > std::numeric_limits<std::size_t>::max() - unit) return std::numeric_limits<std::size_t>::max();
  return (bytes + unit - 1) / unit * unit;
}

struct HostCache {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, void*>> blocks;  // oldest first
  std::size_t bytes = 0;
  std::size_t limit = static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE)) / 4;
};

inline HostCache& host_cache() {
  static HostCache* cache = new HostCache;  // never destroyed: tensors may be freed during static destruction
  return *cache;
}

/// The alignment of a host block of `size` bytes: huge pages from 4 MiB on, else 64 bytes.
inline std::size_t host_block_alignment(std::size_t size) {
  return is_huge_host_size(size) ? huge_page_bytes : host_alignment;
}

inline void free_cached_host_block(std::size_t size, void* p) {
  ::operator delete(p, std::align_val_t{host_block_alignment(size)});
}

/// A cached block of exactly `size` bytes (cached_host_size), or null.
inline void* take_cached_host_block(std::size_t size) {
  HostCache& cache = host_cache();
  std::lock_guard guard(cache.mutex);
  for (auto it = cache.blocks.rbegin(); it != cache.blocks.rend(); ++it) {
    if (it->first != size) continue;
    void* p = it->second;
    cache.blocks.erase(std::next(it).base());
    cache.bytes -= size;
    return p;
  }
  return nullptr;
}

/// Keeps a freed block of `size` bytes for reuse, making room by freeing the oldest.
inline void cache_host_block(std::size_t size, void* p) {
  HostCache& cache = host_cache();
  std::vector<std::pair<std::size_t, void*>> freed;
  {
    std::lock_guard guard(cache.mutex);
    if (size > cache.limit) {
      freed.emplace_back(size, p);
    } else {
      std::size_t drop = 0;
      while (cache.bytes + size > cache.limit) cache.bytes -= cache.blocks[drop++].first;
      for (std::size_t i = 0; i < drop; ++i) freed.push_back(cache.blocks[i]);
      cache.blocks.erase(cache.blocks.begin(), cache.blocks.begin() + static_cast<std::ptrdiff_t>(drop));
      cache.blocks.emplace_back(size, p);
      cache.bytes += size;
    }
  }
  for (const auto& [bytes, block] : freed) free_cached_host_block(bytes, block);  // outside the lock
}

/// Hands every cached block back to the system.
inline void release_host_cache() {
  HostCache& cache = host_cache();
  std::vector<std::pair<std::size_t, void*>> blocks;
  {
    std::lock_guard guard(cache.mutex);
    blocks.swap(cache.blocks);
    cache.bytes = 0;
  }
  for (const auto& [size, p] : blocks) free_cached_host_block(size, p);
}

/// Bytes the cache holds.
inline std::size_t host_cached_bytes() {
  HostCache& cache = host_cache();
  std::lock_guard guard(cache.mutex);
  return cache.bytes;
}

}  // namespace et::detail
