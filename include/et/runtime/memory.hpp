// Allocation by device and raw copies between any two devices, on the current streams
// (runtime/stream.hpp). The allocators themselves are in runtime/allocator.hpp and
// runtime/pinned.hpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "et/runtime/pinned.hpp"

namespace et::detail {

#if defined(ET_HAS_CUDA_RUNTIME)
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
  if (status != cudaErrorPeerAccessAlreadyEnabled) ET_CUDA_CHECK_STATUS(status, "cudaDeviceEnablePeerAccess(peer, 0)");
  (void)cudaGetLastError();
}
#endif

/// The version counter of the data in `storage` (runtime/version.hpp), kept by its
/// deleter; null for empty storage and for storage made outside etensor's allocators and
/// from_blob (a shared_ptr a user handed to Tensor's storage constructor).
inline VersionCounter* storage_version(const std::shared_ptr<void>& storage) noexcept {
  if (!storage) return nullptr;
  if (auto* block = std::get_deleter<HostBlock>(storage)) return &block->version;
#if defined(ET_HAS_CUDA_RUNTIME)
  if (auto* block = std::get_deleter<CudaBlock>(storage)) return &block->version;
  if (auto* block = std::get_deleter<ArenaBlock>(storage)) return &block->version;
#endif
  if (auto* block = std::get_deleter<PinnedBlock>(storage)) return &block->version;
  if (auto* block = std::get_deleter<ForeignBlock>(storage)) return &block->version;
  return nullptr;
}

/// Allocates `bytes` on device `device` (-1: the CPU).
inline std::shared_ptr<void> allocate_bytes(int device, std::size_t bytes) {
  if (device < 0) return allocate_host(bytes);
#if defined(ET_HAS_CUDA_RUNTIME)
  return allocate_cuda(device, bytes);
#else
  throw_missing_device(device);
#endif
}

/// Allocates `bytes` for a tensor on device D.
template <class D>
std::shared_ptr<void> allocate_on(std::size_t bytes) {
  if constexpr (std::is_same_v<D, Pinned>) return allocate_pinned(bytes);
  else return allocate_bytes(D::index, bytes);
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
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, current_stream_handle(dst_device)));
  } else if (dst_device < 0) {
    DeviceGuard guard(src_device);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, current_stream_handle(src_device)));
    ET_CUDA_CHECK(cudaStreamSynchronize(current_stream_handle(src_device)));
  } else if (src_device == dst_device) {
    DeviceGuard guard(dst_device);
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, current_stream_handle(dst_device)));
  } else {
    enable_peer_access(dst_device, src_device);
    // The copy runs on the destination's stream after the source's pending work, and the
    // source's stream waits for the copy, so the source's memory is not reused under it.
    cudaEvent_t source_ready{}, copied{};
    {
      DeviceGuard guard(src_device);
      ET_CUDA_CHECK(cudaEventCreateWithFlags(&source_ready, cudaEventDisableTiming));
      ET_CUDA_CHECK(cudaEventRecord(source_ready, current_stream_handle(src_device)));
    }
    {
      DeviceGuard guard(dst_device);
      ET_CUDA_CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
      ET_CUDA_CHECK(cudaStreamWaitEvent(current_stream_handle(dst_device), source_ready, 0));
      ET_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, current_stream_handle(dst_device)));
      ET_CUDA_CHECK(cudaEventRecord(copied, current_stream_handle(dst_device)));
    }
    {
      DeviceGuard guard(src_device);
      ET_CUDA_CHECK(cudaStreamWaitEvent(current_stream_handle(src_device), copied, 0));
      ET_CUDA_CHECK(cudaEventDestroy(source_ready));
      ET_CUDA_CHECK(cudaEventDestroy(copied));
    }
  }
#else
  throw_missing_device(dst_device < 0 ? src_device : dst_device);
#endif
}

/// Copies `bytes` from `src` on device From (in storage block `src_block`) to `dst` on device
/// To (in `dst_block`). Blocking copies behave as copy_bytes. Between Pinned memory and a
/// GPU the copy is queued on the GPU's current stream and the pinned block records it
/// (pinned.hpp): a non-blocking copy returns at once, and the first host access to the
/// pinned side waits for it; a blocking one into pinned memory waits before returning.
template <class To, class From>
void copy_between(const std::shared_ptr<void>& dst_block, void* dst, const std::shared_ptr<void>& src_block,
                  const void* src, std::size_t bytes, bool blocking) {
  if (bytes == 0) return;
#if defined(ET_HAS_CUDA_RUNTIME)
  if constexpr (std::is_same_v<From, Pinned> && To::is_cuda) {
    const CudaCall call(To::index, "copy");
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, call.stream()));
    add_pending_copy(src_block, call.stream());  // host writes to the source wait for the copy
    return;
  } else if constexpr (From::is_cuda && std::is_same_v<To, Pinned>) {
    const CudaCall call(From::index, "copy");
    ET_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, call.stream()));
    if (blocking) ET_CUDA_CHECK(cudaStreamSynchronize(call.stream()));
    else add_pending_copy(dst_block, call.stream());
    return;
  }
#endif
  (void)dst_block, (void)src_block, (void)blocking;
  copy_bytes(To::index, dst, From::index, src, bytes);
}

}  // namespace et::detail
