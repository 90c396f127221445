// cuDNN 9 on a CUDA device (host code: the calls only queue work on the device's stream):
// errors, descriptors and handles, shared by convolution (cudnn_conv.hpp) and pooling
// (cudnn_pooling.hpp). Included by backend/cuda/nn.hpp when etensor found cuDNN
// (ET_WITH_CUDNN).
//
//  - Handles: one cuDNN handle per (thread, device), bound on each call to the device's
//    current stream; a cuDNN handle and its execution plans must not be used by two threads at
//    once. A thread's handles return to a pool when it exits; handles and plans are never
//    destroyed (destroying them at process exit would race the CUDA runtime's teardown).
//  - Workspace comes from etensor's caching allocator, in stream order.
//  - Every cuDNN call is checked: a failure throws et::CudnnError naming the call, cuDNN's
//    status string and its last error message, and file:line.
#pragma once

#include <cudnn.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "et/half.hpp"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/error.hpp"
#include "et/runtime/memory.hpp"

namespace et {

/// A failed cuDNN call: carries the call, cuDNN's status and message, and file:line.
class CudnnError : public Error {
 public:
  CudnnError(const std::string& message, int status) : Error(message), status_(status) {}
  /// The cudnnStatus_t value.
  int status() const noexcept { return status_; }

 private:
  int status_;
};

namespace detail::cudnn_backend {

/// cuDNN's message for the last failure on this thread (empty when it has none).
inline std::string last_error_message() {
  char message[1024] = {};
  cudnnGetLastErrorString(message, sizeof message);
  return message;
}

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  const std::string detail = last_error_message();
  throw CudnnError(std::string("et: cuDNN call ") + call + " failed: " + cudnnGetErrorString(status) + " (" +
                       std::to_string(static_cast<int>(status)) + ")" + (detail.empty() ? "" : "; cuDNN says: " + detail) +
                       " at " + file + ":" + std::to_string(line),
                   static_cast<int>(status));
}

}  // namespace detail::cudnn_backend
}  // namespace et

/// Checks a cuDNN call; on failure throws et::CudnnError naming the call.
#define ET_CUDNN_CHECK(call)                                                                 \
  do {                                                                                       \
    const cudnnStatus_t et_cudnn_status_ = (call);                                           \
    if (et_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                            \
      ::et::detail::cudnn_backend::throw_cudnn_error(et_cudnn_status_, #call, __FILE__, __LINE__); \
  } while (0)

namespace et::detail::cudnn_backend {

/// The cuDNN data type of an element type.
template <class T>
constexpr cudnnDataType_t data_type() {
  if constexpr (std::is_same_v<T, double>) return CUDNN_DATA_DOUBLE;
  else if constexpr (std::is_same_v<T, half>) return CUDNN_DATA_HALF;
  else if constexpr (std::is_same_v<T, bfloat16>) return CUDNN_DATA_BFLOAT16;
  else return CUDNN_DATA_FLOAT;
}

// ---- descriptors, cached plans, handles ------------------------------------------

/// Owns one backend descriptor.
class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) { ET_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &desc_)); }
  Descriptor(Descriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(desc_, other.desc_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (desc_) (void)cudnnBackendDestroyDescriptor(desc_);
  }
  cudnnBackendDescriptor_t get() const { return desc_; }

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

/// What a search found, for logs and benchmarks.
struct SearchReport {
  std::int64_t configurations = 0;  ///< engine configurations left after filtering
  int timed = 0;                    ///< plans that built and ran
  std::int64_t engine = -1;         ///< the chosen engine's global index
  float milliseconds = 0;           ///< its median time
  std::int64_t workspace = 0;       ///< its workspace, bytes
};

/// A finalized execution plan with everything it was built from.
struct CachedPlan {
  std::vector<Descriptor> parts;  ///< tensors, convolution, operation, graph, engine config, plan (last)
  std::int64_t workspace = 0;
  SearchReport report;
};

/// One thread's cuDNN state on one device.
struct Context {
  cudnnHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;  ///< the stream the handle is bound to now
  std::unordered_map<std::string, CachedPlan> plans;
};

/// Counts every algorithm search (cache misses), on every thread and device.
inline std::atomic<std::int64_t>& search_counter() {
  static std::atomic<std::int64_t> count{0};
  return count;
}

/// The number of convolution algorithm searches so far (each configuration is searched
/// once per thread and device; later calls reuse the cached plan).
inline std::int64_t algorithm_searches() { return search_counter().load(); }

/// What the calling thread's last search found.
inline SearchReport& last_search() {
  thread_local SearchReport report;
  return report;
}

/// Contexts released by exited threads, per device, for reuse. Never destroyed.
struct ContextPool {
  std::mutex mutex;
  std::vector<std::vector<Context*>> free;
};

inline ContextPool& context_pool() {
  static ContextPool* pool = new ContextPool;  // intentionally leaked: see the file comment
  return *pool;
}

inline Context* acquire_context(int device) {
  ContextPool& pool = context_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (pool.free.size() > static_cast<std::size_t>(device) && !pool.free[static_cast<std::size_t>(device)].empty()) {
      Context* context = pool.free[static_cast<std::size_t>(device)].back();
      pool.free[static_cast<std::size_t>(device)].pop_back();
      return context;
    }
  }
  const std::size_t runtime = cudnnGetVersion();
  if (runtime / 10000 != CUDNN_MAJOR)
    throw Error("et: etensor was built with cuDNN " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) +
                " but the process loaded cuDNN " + std::to_string(runtime / 10000) + "." +
                std::to_string(runtime / 100 % 100) + "; install cuDNN " + std::to_string(CUDNN_MAJOR));
  DeviceGuard guard(device);
  auto context = std::make_unique<Context>();
  ET_CUDNN_CHECK(cudnnCreate(&context->handle));
  return context.release();
}

inline void release_context(int device, Context* context) {
  ContextPool& pool = context_pool();
  std::lock_guard lock(pool.mutex);
  if (pool.free.size() <= static_cast<std::size_t>(device)) pool.free.resize(static_cast<std::size_t>(device) + 1);
  pool.free[static_cast<std::size_t>(device)].push_back(context);
}

/// The calling thread's context on `device` (created on first use), its handle bound to
/// the device's current stream.
inline Context& context(int device) {
  struct Lease {
    std::vector<Context*> by_device;
    ~Lease() {
      for (std::size_t d = 0; d < by_device.size(); ++d)
        if (by_device[d]) release_context(static_cast<int>(d), by_device[d]);
    }
  };
  thread_local Lease lease;
  if (lease.by_device.size() <= static_cast<std::size_t>(device))
    lease.by_device.resize(static_cast<std::size_t>(device) + 1, nullptr);
  Context*& slot = lease.by_device[static_cast<std::size_t>(device)];
  if (!slot) slot = acquire_context(device);
  const cudaStream_t stream = current_stream_handle(device);
  if (slot->stream != stream) {
    ET_CUDNN_CHECK(cudnnSetStream(slot->handle, stream));
    slot->stream = stream;
  }
  return *slot;
}

}  // namespace et::detail::cudnn_backend
