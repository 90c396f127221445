// Run-time device queries: how many GPUs, their properties, synchronization,
// and the guard that selects a device for a call (streams: runtime/stream.hpp).
// Plain C++ translation units can use all of this (it only calls cudart).
#pragma once

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "et/config.hpp"
#include "et/device.hpp"
#include "et/runtime/error.hpp"

namespace et {

/// What a device is, for logs and for sizing work.
struct DeviceProperties {
  std::string name;             ///< e.g. "NVIDIA H100 80GB HBM3", or "cpu"
  std::size_t total_memory = 0; ///< bytes of device memory (host RAM for the CPU)
  int multiprocessors = 0;      ///< SMs (logical cores for the CPU)
  int compute_major = 0, compute_minor = 0;
  std::size_t l2_cache_bytes = 0;
};

/// Free and total bytes on a device, as the driver reports them now.
struct MemoryInfo {
  std::size_t free = 0, total = 0;
};

/// Number of CUDA devices this process can use (respects CUDA_VISIBLE_DEVICES);
/// 0 when there is no GPU, no driver, or etensor was built without CUDA.
inline int device_count() {
#if defined(ET_HAS_CUDA_RUNTIME)
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device is an answer, not a failure
      return 0;
    }
    return n;
  }();
  return count;
#else
  return 0;
#endif
}

/// True when at least one CUDA device can be used.
inline bool cuda_available() { return device_count() > 0; }

namespace detail {

/// Throws et::Error: CUDA device `index` does not exist in this process.
[[noreturn]] inline void throw_missing_device(int index) {
#if defined(ET_HAS_CUDA_RUNTIME)
  const int count = device_count();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  throw Error("et: cuda:" + std::to_string(index) + " was requested but this process sees " + std::to_string(count) +
              " CUDA device(s)" + (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")" : std::string()));
#else
  throw Error("et: cuda:" + std::to_string(index) +
              " was requested but etensor was built without CUDA (no CUDA toolkit was found)");
#endif
}

/// The per-device tables (streams, pools, statistics) have this many slots.
inline constexpr int max_cuda_devices = 64;

/// Throws et::Error for a CUDA device index etensor cannot use: one this process does not
/// have, or one past etensor's per-device tables.
[[noreturn]] inline void throw_bad_device_index(int index) {
  if (index < 0 || index >= device_count()) throw_missing_device(index);
  throw Error("et: etensor supports CUDA devices 0 to 63");
}

/// Throws et::Error unless CUDA device `index` exists in this process and has a slot in
/// etensor's per-device tables.
inline void check_device_index(int index) {
  if (index < 0 || index >= device_count() || index >= max_cuda_devices) throw_bad_device_index(index);
}

#if defined(ET_HAS_CUDA_RUNTIME)
/// Makes `index` the current CUDA device for a scope, restoring the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    check_device_index(index);
    ET_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) ET_CUDA_CHECK(cudaSetDevice(index));
    else previous_ = -1;
  }
  ~DeviceGuard() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};
#endif

inline std::vector<DeviceProperties>& property_cache() {
  static std::vector<DeviceProperties> cache(static_cast<std::size_t>(device_count()));
  return cache;
}

}  // namespace detail

/// Properties of CUDA device `index`; cached after the first query. Throws et::Error
/// if the device does not exist.
inline const DeviceProperties& device_properties(int index) {
#if defined(ET_HAS_CUDA_RUNTIME)
  detail::check_device_index(index);
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  DeviceProperties& cached = detail::property_cache()[static_cast<std::size_t>(index)];
  if (cached.name.empty()) {
    cudaDeviceProp prop{};
    ET_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    cached = DeviceProperties{prop.name, prop.totalGlobalMem, prop.multiProcessorCount, prop.major, prop.minor,
                              static_cast<std::size_t>(prop.l2CacheSize)};
  }
  return cached;
#else
  detail::throw_missing_device(index);
#endif
}

template <int I>
const DeviceProperties& device_properties(Cuda<I>) {
  return device_properties(I);
}

/// Free and total memory of CUDA device I.
template <int I>
MemoryInfo memory_info(Cuda<I>) {
#if defined(ET_HAS_CUDA_RUNTIME)
  detail::DeviceGuard guard(I);
  MemoryInfo info;
  ET_CUDA_CHECK(cudaMemGetInfo(&info.free, &info.total));
  return info;
#else
  detail::throw_missing_device(I);
#endif
}

/// Waits until all work etensor queued on the device has finished (no-op on the CPU,
/// whose evaluation is synchronous). Asynchronous kernel failures surface here.
inline void synchronize(Cpu) {}

template <int I>
void synchronize(Cuda<I>) {
#if defined(ET_HAS_CUDA_RUNTIME)
  detail::DeviceGuard guard(I);
  ET_CUDA_CHECK(cudaDeviceSynchronize());
#else
  detail::throw_missing_device(I);
#endif
}

}  // namespace et
