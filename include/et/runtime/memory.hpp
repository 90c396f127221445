// Allocation and raw copies. Every tensor's storage comes from here:
//  - CUDA: the device's stream-ordered memory pool (cudaMallocAsync) with an unlimited
//    release threshold, so freed blocks stay cached for reuse. On failure the cache is
//    released (after the device drains) and the allocation retried once; a second
//    failure throws et::OutOfMemory with requested, free and total bytes.
//  - CPU: 64-byte-aligned operator new (glibc's allocator caches freed blocks itself).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include <unistd.h>

#include "et/runtime/device_runtime.hpp"

namespace et::detail {

inline constexpr std::size_t host_alignment = 64;

inline std::shared_ptr<void> allocate_host(std::size_t bytes) {
  if (bytes == 0) return {};
  void* ptr = ::operator new(bytes, std::align_val_t{host_alignment}, std::nothrow);
  if (!ptr) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    throw OutOfMemory("cpu", bytes, static_cast<std::size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
                      static_cast<std::size_t>(sysconf(_SC_PHYS_PAGES)) * page);
  }
  return std::shared_ptr<void>(ptr, [](void* p) { ::operator delete(p, std::align_val_t{host_alignment}); });
}

#if defined(ET_HAS_CUDA_RUNTIME)
inline cudaMemPool_t caching_pool(int device) {
  static std::mutex mutex;
  static std::vector<char> configured(static_cast<std::size_t>(device_count()), 0);
  cudaMemPool_t pool{};
  ET_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::lock_guard lock(mutex);
  if (!configured[static_cast<std::size_t>(device)]) {
    std::uint64_t keep_everything = UINT64_MAX;  // never hand freed blocks back on synchronization
    ET_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything));
    configured[static_cast<std::size_t>(device)] = 1;
  }
  return pool;
}

inline std::shared_ptr<void> allocate_cuda(int device, std::size_t bytes) {
  if (bytes == 0) return {};
  DeviceGuard guard(device);
  const cudaMemPool_t pool = caching_pool(device);
  const cudaStream_t stream = default_stream(device);
  void* ptr = nullptr;
  cudaError_t status = cudaMallocAsync(&ptr, bytes, stream);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    ET_CUDA_CHECK(cudaDeviceSynchronize());  // pending frees return to the pool only in stream order
    ET_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    status = cudaMallocAsync(&ptr, bytes, stream);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      MemoryInfo info;
      ET_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
      throw OutOfMemory(device_name_of(device).c_str(), bytes, info.free, info.total);
    }
  }
  ET_CUDA_CHECK(status);
  return std::shared_ptr<void>(ptr, [device](void* p) {
    // A destructor cannot throw; at process exit the runtime may already be gone.
    int previous = 0;
    if (cudaGetDevice(&previous) != cudaSuccess) return (void)cudaGetLastError();
    if (previous != device) (void)cudaSetDevice(device);
    const cudaError_t freed = cudaFreeAsync(p, default_stream(device));
    if (freed != cudaSuccess && freed != cudaErrorCudartUnloading)
      std::fprintf(stderr, "et: warning: freeing %s memory failed: %s\n", device_name_of(device).c_str(),
                   cudaGetErrorString(freed));
    (void)cudaGetLastError();
    if (previous != device) (void)cudaSetDevice(previous);
  });
}

inline void enable_peer_access(int device, int peer) {
  static std::mutex mutex;
  static std::vector<char> tried;
  const auto count = static_cast<std::size_t>(device_count());
  std::lock_guard lock(mutex);
  tried.resize(count * count, 0);
  char& done = tried[static_cast<std::size_t>(device) * count + static_cast<std::size_t>(peer)];
  if (done) return;
  done = 1;
  int possible = 0;
  ET_CUDA_CHECK(cudaDeviceCanAccessPeer(&possible, device, peer));
  if (!possible) return;  // cudaMemcpyPeerAsync then stages through the host
  DeviceGuard guard(device);
  const cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);
  if (status != cudaErrorPeerAccessAlreadyEnabled) ET_CUDA_CHECK(status);
  (void)cudaGetLastError();
}
#endif

/// Allocates `bytes` on device `device` (-1: the CPU).
inline std::shared_ptr<void> allocate_bytes(int device, std::size_t bytes) {
  if (device < 0) return allocate_host(bytes);
#if defined(ET_HAS_CUDA_RUNTIME)
  return allocate_cuda(device, bytes);
#else
  throw_missing_device(device);
#endif
}

/// Copies raw bytes between any two devices (-1: the CPU), in the order of the work
/// already queued on both. When it returns, host destinations hold the data and host
/// sources may be freed; device destinations are ready in their device's stream order.
inline void copy_bytes(int dst_device, void* dst, int src_device, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device >= 0) check_device_index(dst_device);
  if (src_device >= 0) check_device_index(src_device);
  if (dst_device < 0 && src_device < 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
#if defined(ET_HAS_CUDA_RUNTIME)
  if (src_device < 0) {  // pageable host -> device: returns once the source has been staged
    DeviceGuard guard(dst_device);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, default_stream(dst_device)));
  } else if (dst_device < 0) {
    DeviceGuard guard(src_device);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, default_stream(src_device)));
    ET_CUDA_CHECK(cudaStreamSynchronize(default_stream(src_device)));
  } else if (src_device == dst_device) {
    DeviceGuard guard(dst_device);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, default_stream(dst_device)));
  } else {
    enable_peer_access(dst_device, src_device);
    // The copy runs on the destination's stream after the source's pending work, and the
    // source's stream waits for the copy, so the source's memory is not reused under it.
    cudaEvent_t source_ready{}, copied{};
    {
      DeviceGuard guard(src_device);
      ET_CUDA_CHECK(cudaEventCreateWithFlags(&source_ready, cudaEventDisableTiming));
      ET_CUDA_CHECK(cudaEventRecord(source_ready, default_stream(src_device)));
    }
    {
      DeviceGuard guard(dst_device);
      ET_CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
      ET_CUDA_CHECK(cudaStreamWaitEvent(default_stream(dst_device), source_ready, 0));
      ET_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, default_stream(dst_device)));
      ET_CUDA_CHECK(cudaEventRecord(copied, default_stream(dst_device)));
    }
    {
      DeviceGuard guard(src_device);
      ET_CUDA_CHECK(cudaStreamWaitEvent(default_stream(src_device), copied, 0));
      ET_CUDA_CHECK(cudaEventDestroy(source_ready));
      ET_CUDA_CHECK(cudaEventDestroy(copied));
    }
  }
#else
  throw_missing_device(dst_device < 0 ? src_device : dst_device);
#endif
}

}  // namespace et::detail
