// Test helper (not part of etensor): counts the kernels the GPU ran between start and
// stop, as CUPTI's activity records report them, with when each ran. The count comes from
// the driver, not from any bookkeeping of etensor's, so "one kernel per fused expression" is
// checked from the outside (bench/table7.cu also reads it: where a training step's time goes).
//
// Usage:
//   test::LaunchCounter counter;        // starts counting (synchronizes the device first)
//   z = a * b + c;
//   const test::Launches seen = counter.stop();   // synchronizes, flushes, stops
//   CHECK(seen.kernels() == 1);
//
// CUPTI's activity callbacks are process-wide C functions without a user pointer, so the
// records land in one global collector; one counter may run at a time.
//
// test::WaitCounter (CUPTI's callback API) lists the runtime and driver calls that make the
// host wait for the device or copy (every *Synchronize* and *Memcpy* call) between its start
// and stop(): what "nothing in a step waits for the host" is checked by.
#pragma once

#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace test {

/// Throws std::runtime_error naming the CUPTI call, CUPTI's message and file:line.
inline void check_cupti(CUptiResult result, const char* call, const char* file, int line) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  throw std::runtime_error(std::string("CUPTI call ") + call + " failed: " + text + " at " + file + ":" +
                           std::to_string(line));
}

/// The same for the CUDA runtime calls the counter makes itself.
inline void check_cuda(cudaError_t result, const char* call, const char* file, int line) {
  if (result == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA call ") + call + " failed: " + cudaGetErrorString(result) + " at " +
                           file + ":" + std::to_string(line));
}

#define TEST_CUPTI_CHECK(call) ::test::check_cupti((call), #call, __FILE__, __LINE__)
#define TEST_CUDA_CHECK(call) ::test::check_cuda((call), #call, __FILE__, __LINE__)

/// What ran on the GPU between a counter's start and stop.
struct Launches {
  std::vector<std::string> kernel_names;  ///< mangled names, in completion order
  std::size_t memsets = 0;                ///< cudaMemset* operations (not kernels)
  std::size_t memcpys = 0;                ///< copies (not kernels)
  /// Per kernel: the id of the CUDA graph it ran in (0: launched on its own) and the
  /// correlation id of the API call that launched it (one cudaGraphLaunch for a whole replay).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> kernel_origins;
  /// Per kernel: when it started and ended on the GPU (nanoseconds, the GPU's clock).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> kernel_spans;
  std::size_t kernels() const { return kernel_names.size(); }
  /// Graph launches whose kernels ran: distinct launching calls among the kernels of graphs.
  std::size_t graph_launches() const {
    std::vector<std::uint32_t> calls;
    for (const auto& [graph, call] : kernel_origins)
      if (graph != 0 && std::find(calls.begin(), calls.end(), call) == calls.end()) calls.push_back(call);
    return calls.size();
  }
  /// Kernels launched on their own, not by a graph.
  std::size_t kernels_outside_graphs() const {
    return static_cast<std::size_t>(
        std::count_if(kernel_origins.begin(), kernel_origins.end(), [](const auto& o) { return o.first == 0; }));
  }
};

namespace cupti_detail {

// CUPTI requires activity buffers aligned to 8 bytes.
inline constexpr std::size_t buffer_alignment = 8;
inline constexpr std::size_t buffer_bytes = std::size_t{4} << 20;

struct Collector {
  std::mutex mutex;
  bool collecting = false;
  Launches launches;
  std::size_t dropped_records = 0;
  std::string error;  // first failure inside a callback (callbacks cannot throw)
};

// Never destroyed: CUPTI may hand back buffers while the process exits.
inline Collector& collector() {
  static Collector* const instance = new Collector;
  return *instance;
}

inline void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(buffer_alignment, buffer_bytes));
  *size = *buffer ? buffer_bytes : 0;
  *max_records = 0;  // as many as fit
}

inline void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream_id, std::uint8_t* buffer,
                                      std::size_t /*size*/, std::size_t valid_size) {
  Collector& state = collector();
  {
    std::lock_guard lock(state.mutex);
    CUpti_Activity* record = nullptr;
    for (;;) {
      const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of this buffer
      if (status != CUPTI_SUCCESS) {
        const char* text = nullptr;
        if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
        if (state.error.empty()) state.error = std::string("cuptiActivityGetNextRecord failed: ") + text;
        break;
      }
      if (!state.collecting) continue;  // left over from before start(): not ours to count
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          state.launches.kernel_names.emplace_back(kernel->name ? kernel->name : "<unnamed kernel>");
          state.launches.kernel_origins.emplace_back(kernel->graphId, kernel->correlationId);
          state.launches.kernel_spans.emplace_back(kernel->start, kernel->end);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: ++state.launches.memsets; break;
        case CUPTI_ACTIVITY_KIND_MEMCPY: ++state.launches.memcpys; break;
        default: break;
      }
    }
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped) == CUPTI_SUCCESS)
      state.dropped_records += dropped;
  }
  std::free(buffer);
}

inline void register_callbacks_once() {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    try {
      TEST_CUPTI_CHECK(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    } catch (const std::exception& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw std::runtime_error(failure);
}

inline constexpr CUpti_ActivityKind counted_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                       CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY};

}  // namespace cupti_detail

/// Counts the kernels (and memsets, copies) that complete on the current CUDA device
/// between construction and stop(). RAII: a counter that is not stopped stops itself.
class LaunchCounter {
 public:
  LaunchCounter() {
    cupti_detail::register_callbacks_once();
    cupti_detail::Collector& state = cupti_detail::collector();
    {
      std::lock_guard lock(state.mutex);
      if (state.collecting) throw std::logic_error("test::LaunchCounter: only one counter may run at a time");
    }
    // Work queued before the counter must not be counted: drain it and hand back its records.
    try {
      TEST_CUDA_CHECK(cudaDeviceSynchronize());
      for (const CUpti_ActivityKind kind : cupti_detail::counted_kinds) TEST_CUPTI_CHECK(cuptiActivityEnable(kind));
      TEST_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    } catch (...) {
      for (const CUpti_ActivityKind kind : cupti_detail::counted_kinds) (void)cuptiActivityDisable(kind);
      throw;
    }
    running_ = true;
    std::lock_guard lock(state.mutex);
    state.launches = Launches{};
    state.dropped_records = 0;
    state.error.clear();
    state.collecting = true;
  }

  LaunchCounter(const LaunchCounter&) = delete;
  LaunchCounter& operator=(const LaunchCounter&) = delete;

  ~LaunchCounter() {
    if (!running_) return;
    try {
      (void)stop();
    } catch (...) {  // a destructor cannot report; stop() called explicitly does
    }
  }

  /// Waits for the device, collects every record, stops counting and returns what ran.
  /// Throws std::runtime_error if CUPTI failed or dropped records (the count would be wrong).
  Launches stop() {
    if (!running_) throw std::logic_error("test::LaunchCounter::stop() called twice");
    running_ = false;
    cupti_detail::Collector& state = cupti_detail::collector();
    auto finish = [&] {
      std::lock_guard lock(state.mutex);
      state.collecting = false;
    };
    try {
      TEST_CUDA_CHECK(cudaDeviceSynchronize());  // every record is complete once its work is
      TEST_CUPTI_CHECK(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    } catch (...) {
      finish();
      for (const CUpti_ActivityKind kind : cupti_detail::counted_kinds) (void)cuptiActivityDisable(kind);
      throw;
    }
    finish();
    for (const CUpti_ActivityKind kind : cupti_detail::counted_kinds) TEST_CUPTI_CHECK(cuptiActivityDisable(kind));
    std::lock_guard lock(state.mutex);
    if (!state.error.empty()) throw std::runtime_error("test::LaunchCounter: " + state.error);
    if (state.dropped_records != 0)
      throw std::runtime_error("test::LaunchCounter: CUPTI dropped " + std::to_string(state.dropped_records) +
                               " activity records; the count would be wrong");
    return state.launches;
  }

 private:
  bool running_ = false;
};

/// The CUDA runtime and driver calls made between construction and stop() that wait for the
/// device or copy memory: every function whose name holds "Synchronize" or "Memcpy". One
/// counter may run at a time (CUPTI takes one subscriber).
class WaitCounter {
 public:
  WaitCounter() {
    TEST_CUPTI_CHECK(cuptiSubscribe(&subscriber_, reinterpret_cast<CUpti_CallbackFunc>(&WaitCounter::seen), this));
    try {
      TEST_CUPTI_CHECK(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API));
      TEST_CUPTI_CHECK(cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API));
    } catch (...) {
      (void)cuptiUnsubscribe(subscriber_);
      throw;
    }
    running_ = true;
  }
  WaitCounter(const WaitCounter&) = delete;
  WaitCounter& operator=(const WaitCounter&) = delete;
  ~WaitCounter() {
    if (running_) (void)cuptiUnsubscribe(subscriber_);
  }

  /// Stops counting; the names of the waiting calls seen, in order.
  std::vector<std::string> stop() {
    if (!running_) throw std::logic_error("test::WaitCounter::stop() called twice");
    running_ = false;
    TEST_CUPTI_CHECK(cuptiUnsubscribe(subscriber_));
    std::lock_guard lock(mutex_);
    return calls_;
  }

 private:
  static void CUPTIAPI seen(void* self, CUpti_CallbackDomain, CUpti_CallbackId, const CUpti_CallbackData* data) {
    if (data == nullptr || data->callbackSite != CUPTI_API_ENTER || data->functionName == nullptr) return;
    const std::string name = data->functionName;
    if (name.find("Synchronize") == std::string::npos && name.find("Memcpy") == std::string::npos) return;
    auto* counter = static_cast<WaitCounter*>(self);
    std::lock_guard lock(counter->mutex_);
    counter->calls_.push_back(name);
  }

  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool running_ = false;
  std::mutex mutex_;
  std::vector<std::string> calls_;
};

}  // namespace test
