// Where every tensor's storage comes from, and what etensor holds.
//
//  - CUDA: etensor's own stream-ordered memory pool per device (cudaMemPoolCreate; the
//    device's default pool, which other libraries share, is left alone). Freed blocks stay
//    cached for reuse (release threshold: never); empty_cache() hands them back. The pool is
//    accessible to every peer GPU that can reach it, so copies and kernels between GPUs go
//    over NVLink/PCIe directly instead of being staged.
//  - A block is allocated on the current stream and freed on that same stream. When it was
//    also used on other streams (the library notes each use on another stream, see
//    note_stream_use), the free first waits for those streams' work queued so far: a block
//    is never reused while a kernel on another stream may still read or write it. This is
//    PyTorch's record_stream, done by the library.
//  - CPU: 64-byte-aligned operator new; blocks of 4 MiB and more on huge-page boundaries,
//    advised as transparent huge pages; blocks of 256 KiB and more cached when freed
//    (runtime/host_cache.hpp); empty_cache(et::cpu) hands them back.
//  - Statistics per device (memory_stats): bytes held by tensors, their peak, live blocks,
//    allocations made, and for CUDA the bytes the pool reserves from the driver.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "et/runtime/faults.hpp"
#include "et/runtime/host_cache.hpp"
#include "et/runtime/stream.hpp"
#include "et/runtime/version.hpp"

namespace et {

/// What etensor holds on one device. Bytes, except the two counts.
struct MemoryStats {
  std::size_t allocated = 0;          ///< bytes of live tensor storage (and scratch)
  std::size_t reserved = 0;           ///< bytes etensor holds from the driver or system (CUDA: its pool and graphs' memory; CPU: allocated + its cache of large blocks)
  std::size_t peak_allocated = 0;     ///< the most `allocated` has been since start or reset_peak_memory_stats
  std::size_t allocations = 0;        ///< live blocks
  std::size_t total_allocations = 0;  ///< blocks allocated since the process started
};

namespace detail {

/// The counters of one device; index 0 is the CPU, index 1 + i is cuda:i.
struct DeviceCounters {
  std::atomic<std::size_t> allocated{0}, peak{0}, live{0}, total{0};
  /// Bytes held from the system beyond the CUDA pool: CUDA graphs' capture arenas; for
  /// Pinned, every page-locked block, live or cached.
  std::atomic<std::size_t> extra_reserved{0};

  void add(std::size_t bytes) {
    const std::size_t now = allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak_now = peak.load(std::memory_order_relaxed);
    while (now > peak_now && !peak.compare_exchange_weak(peak_now, now, std::memory_order_relaxed)) {
    }
    live.fetch_add(1, std::memory_order_relaxed);
    total.fetch_add(1, std::memory_order_relaxed);
  }
  void remove(std::size_t bytes) {
    allocated.fetch_sub(bytes, std::memory_order_relaxed);
    live.fetch_sub(1, std::memory_order_relaxed);
  }
};

inline DeviceCounters& counters(int device) {
  static DeviceCounters all[1 + max_cuda_devices];
  if (device >= max_cuda_devices) throw_bad_device_index(device);
  return all[device + 1];
}

inline DeviceCounters& pinned_counters() {
  static DeviceCounters counters;
  return counters;
}

/// The counters of device D (Pinned memory has its own).
template <class D>
DeviceCounters& counters_of() {
  if constexpr (std::is_same_v<D, Pinned>) return pinned_counters();
  else return counters(D::index);
}

/// The deleter of a host block (allocate_host): a block of 256 KiB or more goes back to the
/// cache (runtime/host_cache.hpp).
struct HostBlock {
  std::size_t bytes, size, alignment;
  bool cached;
  VersionCounter version;
  void operator()(void* p) const {
    if (cached) cache_host_block(size, p);
    else ::operator delete(p, std::align_val_t{alignment});
    counters(-1).remove(bytes);
  }
};

inline std::shared_ptr<void> allocate_host(std::size_t bytes) {
  if (bytes == 0) return {};
  check_injected_fault(bytes, [] { return "cpu"; });
  const bool cached = is_cached_host_size(bytes);
  const std::size_t size = cached ? cached_host_size(bytes) : bytes;
  const std::size_t alignment = host_block_alignment(size);
  void* ptr = cached ? take_cached_host_block(size) : nullptr;
  if (!ptr) {
    ptr = ::operator new(size, std::align_val_t{alignment}, std::nothrow);
    if (!ptr && cached && host_cached_bytes() > 0) {  // hand the cache back and try once more
      release_host_cache();
      ptr = ::operator new(size, std::align_val_t{alignment}, std::nothrow);
    }
    if (ptr && alignment == huge_page_bytes) (void)madvise(ptr, size, MADV_HUGEPAGE);  // a hint: may be off
  }
  if (!ptr) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    throw OutOfMemory("cpu", bytes, static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
                      static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page, "the host allocator refused it");
  }
  counters(-1).add(bytes);
  return std::shared_ptr<void>(ptr, HostBlock{bytes, size, alignment, cached, {}});
}

#if defined(ET_HAS_CUDA_RUNTIME)
/// etensor's memory pool on `device`, created on first use.
inline cudaMemPool_t device_pool(int device) {
  static std::atomic<cudaMemPool_t> pools[max_cuda_devices] = {};
  static std::mutex mutex;
  return once_per_device(pools, mutex, device, [device] {
    cudaMemPool_t pool{};
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    ET_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep_everything = UINT64_MAX;  // never hand freed blocks back on synchronization
    ET_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    for (int peer = 0; peer < device_count(); ++peer) {
      int reachable = 0;
      if (peer == device || cudaDeviceCanAccessPeer(&reachable, peer, device) != cudaSuccess || !reachable) continue;
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = peer;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      ET_CUDA_CHECK(cudaMemPoolSetAccess(pool, &access, 1));
    }
    (void)cudaGetLastError();
    return pool;
  });
}

/// Bytes the pool of `device` holds from the driver now.
inline std::size_t pool_reserved(int device) {
  std::uint64_t bytes = 0;
  ET_CUDA_CHECK(cudaMemPoolGetAttribute(device_pool(device), cudaMemPoolAttrReservedMemCurrent, &bytes));
  return static_cast<std::size_t>(bytes);
}

struct CudaBlock;

/// Where a CUDA graph capture on this host thread takes its memory (runtime/graph.hpp):
/// blocks from cudaMalloc that belong to the graph, so its replays write the same
/// addresses, tensors that escape the capture keep theirs, and nothing allocated or freed
/// becomes a node of the graph. A block freed during the capture is not reused by it. Frees
/// of blocks from before the capture are held back until the capture ends.
struct CaptureArena {
  int device = 0;
  std::vector<void*> blocks;
  std::size_t bytes = 0;
  std::vector<std::pair<void*, CudaBlock*>> deferred;  ///< run by the capture when it ends

  explicit CaptureArena(int d) : device(d) {}
  CaptureArena(const CaptureArena&) = delete;
  CaptureArena& operator=(const CaptureArena&) = delete;
  ~CaptureArena();
};

/// The arena of the capture running on this thread, or null.
inline std::shared_ptr<CaptureArena>& capture_arena() {
  static thread_local std::shared_ptr<CaptureArena> arena;
  return arena;
}

/// A lock small enough to live in every block; copies start unlocked.
struct SpinLock {
  std::atomic_flag flag;
  SpinLock() = default;
  SpinLock(const SpinLock&) {}
  void lock() {
    while (flag.test_and_set(std::memory_order_acquire)) {
    }
  }
  void unlock() { flag.clear(std::memory_order_release); }
};

/// The deleter of a CUDA block: it knows the block's device, size, allocation stream and
/// the other streams of that device that used it (found with std::get_deleter).
struct CudaBlock {
  int device;
  std::size_t bytes;
  cudaStream_t stream;                ///< allocated on; freed on
  std::vector<cudaStream_t> used_on;  ///< other streams that used it
  SpinLock lock;
  VersionCounter version;

  void note(cudaStream_t other) {
    if (other == stream) return;
    std::lock_guard guard(lock);
    for (cudaStream_t s : used_on)
      if (s == other) return;
    used_on.push_back(other);
  }

  void operator()(void* p) {
    if (CaptureArena* arena = capture_arena().get(); arena && arena->device == device) {
      arena->deferred.emplace_back(p, new CudaBlock(*this));  // a free now would become a graph node
      return;
    }
    free(p);
  }

  void free(void* p) {
    // A destructor cannot throw; at process exit the runtime may already be gone.
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess) return (void)cudaGetLastError();
    if (previous != device) (void)cudaSetDevice(device);
    cudaError_t status = cudaSuccess;
    for (cudaStream_t other : used_on) {  // the free is ordered after their work so far
      cudaEvent_t done{};
      if (status == cudaSuccess) status = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
      if (status == cudaSuccess) status = cudaEventRecord(done, other);
      if (status == cudaSuccess) status = cudaStreamWaitEvent(stream, done, 0);
      if (done) (void)cudaEventDestroy(done);
    }
    if (status == cudaSuccess) status = cudaFreeAsync(p, stream);
    if (status != cudaSuccess && status != cudaErrorCudartUnloading)
      std::fprintf(stderr, "et: warning: freeing %s memory failed: %s\n", device_name_of(device).c_str(),
                   cudaGetErrorString(status));
    (void)cudaGetLastError();
    counters(device).remove(bytes);
    if (previous != device) (void)cudaSetDevice(previous);
  }
};

inline CaptureArena::~CaptureArena() {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  if (previous != device) (void)cudaSetDevice(device);
  for (void* block : blocks) (void)cudaFree(block);
  (void)cudaGetLastError();
  counters(device).extra_reserved.fetch_sub(bytes, std::memory_order_relaxed);
  if (previous != device) (void)cudaSetDevice(previous);
}

/// The deleter of an arena block: the memory stays with the arena (and so with the graph)
/// until both the graph and every tensor holding a block are gone.
struct ArenaBlock {
  std::shared_ptr<CaptureArena> arena;
  std::size_t bytes;
  VersionCounter version;
  void operator()(void*) { counters(arena->device).remove(bytes); }
};

/// Finishes a capture's memory: runs the frees held back while it ran.
inline void run_deferred_frees(CaptureArena& arena) {
  for (auto& [p, block] : arena.deferred) {
    block->free(p);
    delete block;
  }
  arena.deferred.clear();
}

/// Notes that `storage` is used on its device's current stream (a no-op until some
/// StreamGuard made another stream than the default current, and for CPU storage).
inline void note_stream_use(const std::shared_ptr<void>& storage) {
  if (!storage || !several_streams().load(std::memory_order_relaxed)) return;
  if (CudaBlock* block = std::get_deleter<CudaBlock>(storage)) block->note(current_stream_handle(block->device));
}


/// What etensor holds on `device` beyond its tensors: the pool's cached free blocks.
inline std::size_t pool_cached(int device) {
  const std::size_t held = counters(device).allocated.load(), reserved = pool_reserved(device);
  return reserved > held ? reserved - held : 0;
}

[[noreturn]] inline void throw_cuda_out_of_memory(int device, std::size_t bytes, std::size_t cached_before) {
  MemoryInfo info;
  ET_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  throw OutOfMemory(device_name_of(device).c_str(), bytes, info.free, info.total,
                    "etensor holds " + OutOfMemory::format_bytes(counters(device).allocated.load()) +
                        " in tensors; its cache of " + OutOfMemory::format_bytes(cached_before) +
                        " was released and the allocation retried once");
}

inline std::shared_ptr<void> allocate_cuda(int device, std::size_t bytes) {
  if (bytes == 0) return {};
  check_injected_fault(bytes, [device] { return device_name_of(device); });
  DeviceGuard guard(device);
  if (const std::shared_ptr<CaptureArena>& arena = capture_arena(); arena && arena->device == device) {
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw_cuda_out_of_memory(device, bytes, pool_cached(device));
    }
    ET_CUDA_CHECK_STATUS(status, "cudaMalloc(&ptr, bytes)");
    arena->blocks.push_back(ptr);
    arena->bytes += bytes;
    counters(device).extra_reserved.fetch_add(bytes, std::memory_order_relaxed);
    counters(device).add(bytes);
    return std::shared_ptr<void>(ptr, ArenaBlock{arena, bytes, {}});
  }
  const cudaMemPool_t pool = device_pool(device);
  const cudaStream_t stream = current_stream_handle(device);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocFromPoolAsync(&ptr, bytes, pool, stream);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    ET_CUDA_CHECK(cudaDeviceSynchronize());  // pending frees return to the pool only in stream order
    const std::size_t cached = pool_cached(device);
    ET_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    status = cudaMallocFromPoolAsync(&ptr, bytes, pool, stream);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      throw_cuda_out_of_memory(device, bytes, cached);
    }
  }
  ET_CUDA_CHECK_STATUS(status, "cudaMallocFromPoolAsync(&ptr, bytes, pool, stream)");
  counters(device).add(bytes);
  return std::shared_ptr<void>(ptr, CudaBlock{device, bytes, stream, {}, {}, {}});
}
#endif

/// True while this thread captures a CUDA graph on D (runtime/graph.hpp): nothing may wait
/// for the device then.
template <class D>
bool capturing_on() {
#if defined(ET_HAS_CUDA_RUNTIME)
  if constexpr (D::is_cuda) {
    const CaptureArena* arena = capture_arena().get();
    return arena && arena->device == D::index;
  }
#endif
  return false;
}

/// note_stream_use for each tensor's storage, on any device (host memory has no streams).
template <class... Tensors>
void note_stream_uses([[maybe_unused]] const Tensors&... tensors) {
#if defined(ET_HAS_CUDA_RUNTIME)
  if (several_streams().load(std::memory_order_relaxed)) (note_stream_use(tensors.storage()), ...);
#endif
}

}  // namespace detail

/// What etensor holds on `dev` now (see MemoryStats).
template <Device D>
MemoryStats memory_stats(D) {
  const detail::DeviceCounters& c = detail::counters_of<D>();
  MemoryStats stats{c.allocated.load(), 0, c.peak.load(), c.live.load(), c.total.load()};
  if constexpr (D::is_cuda) {
#if defined(ET_HAS_CUDA_RUNTIME)
    detail::DeviceGuard guard(D::index);
    stats.reserved = detail::pool_reserved(D::index) + c.extra_reserved.load();
#else
    detail::throw_missing_device(D::index);
#endif
  } else if constexpr (std::is_same_v<D, Pinned>) {
    stats.reserved = c.extra_reserved.load();
  } else {
    stats.reserved = stats.allocated + detail::host_cached_bytes();
  }
  return stats;
}

/// Starts peak_allocated again from what is allocated now.
template <Device D>
void reset_peak_memory_stats(D) {
  detail::DeviceCounters& c = detail::counters_of<D>();
  c.peak.store(c.allocated.load());
}

namespace detail {
inline void release_pinned_cache();  // pinned.hpp
}

/// Waits for the device, then hands every cached (freed, unused) block of etensor's pool
/// back to the driver; for Pinned, the cached page-locked blocks; on the CPU, the cached
/// large blocks. Blocks still held by tensors stay.
template <Device D>
void empty_cache(D) {
  if constexpr (std::is_same_v<D, Pinned>) {
    detail::release_pinned_cache();
  } else if constexpr (!D::is_cuda) {
    detail::release_host_cache();
  } else {
#if defined(ET_HAS_CUDA_RUNTIME)
    detail::DeviceGuard guard(D::index);
    ET_CUDA_CHECK(cudaDeviceSynchronize());
    ET_CUDA_CHECK(cudaMemPoolTrimTo(detail::device_pool(D::index), 0));
#else
    detail::throw_missing_device(D::index);
#endif
  }
}

}  // namespace et
