// The exceptions etensor throws, and the checked-call macro for the CUDA runtime.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "et/config.hpp"

namespace et {

/// Every etensor failure is an et::Error; its message starts with "et:".
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Shapes that do not fit: broadcasting, assignment, element counts, axes.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// A failed CUDA runtime call: carries the call, CUDA's message and file:line.
class CudaError : public Error {
 public:
  CudaError(const std::string& message, int code) : Error(message), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

/// An allocation that failed even after the caching allocator released its cache.
/// The process can go on: nothing is left half-allocated.
class OutOfMemory : public Error {
 public:
  /// `held`: what etensor itself holds and caches on the device, when it knows.
  OutOfMemory(const std::string& device, std::size_t requested, std::size_t free, std::size_t total,
              const std::string& held = "cached blocks were released and the allocation retried once")
      : Error("et: out of memory on " + device + ": tried to allocate " + format_bytes(requested) + "; " +
              format_bytes(free) + " free of " + format_bytes(total) + " total (" + held + ")"),
        requested_(requested),
        free_(free),
        total_(total) {}
  std::size_t requested_bytes() const noexcept { return requested_; }
  std::size_t free_bytes() const noexcept { return free_; }
  std::size_t total_bytes() const noexcept { return total_; }

  static std::string format_bytes(std::size_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 6) {
      value /= 1024.0;
      ++unit;
    }
    char text[64];
    std::snprintf(text, sizeof text, "%.2f %s (%zu bytes)", value, units[unit], bytes);
    return text;
  }

 private:
  std::size_t requested_, free_, total_;
};

}  // namespace et

#if defined(ET_HAS_CUDA_RUNTIME)
namespace et::detail {
[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  throw CudaError(std::string("et: CUDA call ") + call + " failed: " + cudaGetErrorString(status) + " (" +
                      cudaGetErrorName(status) + ") at " + file + ":" + std::to_string(line),
                  static_cast<int>(status));
}
}  // namespace et::detail

/// Checks a CUDA runtime call; on failure throws et::CudaError naming the call.
#define ET_CUDA_CHECK(call) ET_CUDA_CHECK_STATUS((call), #call)
/// The same for the status of a call made earlier (inspected first), named by `call_text`.
#define ET_CUDA_CHECK_STATUS(status, call_text)                                        \
  do {                                                                                 \
    const cudaError_t et_status_ = (status);                                           \
    if (et_status_ != cudaSuccess) {                                                   \
      (void)cudaGetLastError(); /* clear a non-sticky error so the process goes on */ \
      ::et::detail::throw_cuda_error(et_status_, call_text, __FILE__, __LINE__);       \
    }                                                                                  \
  } while (0)
#endif
