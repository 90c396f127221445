// Streams and events: where etensor's work is queued, and how to order and time it.
//
// THE one place that decides the stream is detail::current_stream_handle(device): every
// kernel launch, library call (cuBLASLt, cuDNN), copy and allocation asks it (through
// CudaCall where a call needs the device made current too). It answers the stream a
// StreamGuard made current on this host thread, else the device's default stream: one
// stream per device, created on first use and shared by all host threads (as PyTorch's
// default stream is).
//
// The default stream is a real stream, not the legacy null stream: it can be captured into
// a CUDA graph, and streams made by Stream::create() (non-blocking) run beside it. It is
// created blocking, i.e. ordered with the legacy stream 0 both ways, so that a user's own
// kernel launched on stream 0 after an etensor assignment sees its result (as with
// PyTorch, whose default stream is stream 0). Code that wants no such ordering runs
// etensor under a StreamGuard of a created stream.
//
// Stream and Event of the host (Cpu, Pinned) exist so that device-generic code (timing,
// ordering) compiles for every device: host work is synchronous, so they only keep time.
#pragma once

#include <atomic>
#include <ctime>
#include <memory>
#include <mutex>
#include <vector>

#include "et/runtime/device_runtime.hpp"

#if defined(ET_HAS_CUDA_RUNTIME) && !defined(ET_NO_NVTX)
// NVTX v3 defines about a hundred functions (weak) in every file that includes it; compiled
// at -O3 they cost 0.65 s of host compile time per file, at -O0 0.1 s. They run once (the
// tool's set-up) or forward a pointer, so unoptimized they lose nothing that shows.
#if defined(__GNUC__) && !defined(__clang__)
#if defined(__NVCC__)  // nvcc's front end passes the pragmas on to GCC but warns that it does not know them
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1675
#endif
#pragma GCC push_options
#pragma GCC optimize("O0")
#include <nvtx3/nvToolsExt.h>
#pragma GCC pop_options
#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif
#else
#include <nvtx3/nvToolsExt.h>
#endif
#endif

namespace et {

namespace detail {

#if defined(ET_HAS_CUDA_RUNTIME)
/// Becomes true the first time a stream other than a device's default one is made current
/// (StreamGuard): until then every block is allocated, used and freed on one stream per
/// device, and the allocator skips its bookkeeping of cross-stream uses.
inline std::atomic<bool>& several_streams() {
  static std::atomic<bool> flag{false};
  return flag;
}

/// slots[device], made by create() on the first call for that device (from whichever
/// thread asks first; later calls cost one atomic load). Checks the device index.
template <class T, class Create>
T once_per_device(std::atomic<T> (&slots)[max_cuda_devices], std::mutex& mutex, int device, Create&& create) {
  check_device_index(device);
  T value = slots[device].load(std::memory_order_acquire);
  if (value) return value;
  std::lock_guard lock(mutex);
  value = slots[device].load(std::memory_order_relaxed);
  if (!value) {
    value = create();
    slots[device].store(value, std::memory_order_release);
  }
  return value;
}

/// True when the work a query (`call`) asked about has finished (cudaErrorNotReady: not
/// yet); other errors throw et::CudaError.
inline bool finished(cudaError_t status, const char* call) {
  if (status == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  ET_CUDA_CHECK_STATUS(status, call);
  return true;
}

/// The device's default stream (see the file comment), created on first use.
inline cudaStream_t default_stream(int device) {
  static std::atomic<cudaStream_t> streams[max_cuda_devices] = {};
  static std::mutex mutex;
  return once_per_device(streams, mutex, device, [device] {
    DeviceGuard guard(device);
    cudaStream_t stream = nullptr;
    ET_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamDefault));  // ordered with stream 0
    return stream;
  });
}

/// This host thread's current stream per device; null means the device's default stream.
inline cudaStream_t* thread_streams() {
  static thread_local cudaStream_t streams[max_cuda_devices] = {};
  return streams;
}

/// The stream etensor queues `device`'s work on now, on this thread.
inline cudaStream_t current_stream_handle(int device) {
  if (static_cast<unsigned>(device) >= static_cast<unsigned>(max_cuda_devices)) throw_bad_device_index(device);
  const cudaStream_t chosen = thread_streams()[device];
  return chosen ? chosen : default_stream(device);
}

/// Names a scope of etensor's work in Nsight timelines: an NVTX range, in the domain
/// "etensor", around the host work of one operation (its launches and library calls, which
/// Nsight ties to the kernels they start). NVTX v3 is header-only: without a tool attached
/// a range costs a few nanoseconds; -DET_NO_NVTX removes them. `what` must outlive the scope.
class TraceRange {
 public:
  explicit TraceRange([[maybe_unused]] const char* what) noexcept {
#if !defined(ET_NO_NVTX)
    nvtxEventAttributes_t attributes{};
    attributes.version = NVTX_VERSION;
    attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attributes.message.ascii = what;
    nvtxDomainRangePushEx(domain(), &attributes);
#endif
  }
  ~TraceRange() {
#if !defined(ET_NO_NVTX)
    nvtxDomainRangePop(domain());
#endif
  }
  TraceRange(const TraceRange&) = delete;
  TraceRange& operator=(const TraceRange&) = delete;

 private:
#if !defined(ET_NO_NVTX)
  static nvtxDomainHandle_t domain() noexcept {
    static const nvtxDomainHandle_t handle = nvtxDomainCreateA("etensor");
    return handle;
  }
#endif
};

/// The device and the stream of one CUDA call, decided in one place: the device made
/// current for the call's scope, and that device's current stream; `what` names the call
/// in Nsight timelines (TraceRange).
class CudaCall {
 public:
  CudaCall(int device, const char* what)
      : range_(what), guard_(device), device_(device), stream_(current_stream_handle(device)) {}
  cudaStream_t stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }

 private:
  TraceRange range_;
  DeviceGuard guard_;
  int device_;
  cudaStream_t stream_;
};

/// Streams made by Stream::create() are never destroyed: the allocator may still order a
/// free after work queued on them. When the last handle goes, the stream returns here and
/// the next create() on that device takes it again.
struct StreamPool {
  std::mutex mutex;
  std::vector<cudaStream_t> idle[2][max_cuda_devices];  ///< by priority (StreamPriority), then device
};
inline StreamPool& stream_pool() {
  static StreamPool* pool = new StreamPool;  // never destroyed: handles may outlive static destruction
  return *pool;
}
#endif

/// A point on the host clock, in milliseconds (Event<Cpu>).
inline double host_clock_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) * 1e-6;
}

}  // namespace detail

template <Device D>
class Event;

/// Milliseconds between two recorded events of one device: device time for a GPU (waits
/// for `end`), host time for Cpu and Pinned. API.md spells it et::elapsed_ms(e0, e1).
template <Device D>
float elapsed_ms(const Event<D>& start, const Event<D>& end);

/// How a stream's kernels are scheduled against other streams' on a GPU: `high` for work
/// that others wait for, such as a gradient all-reduce running beside the backward (its
/// blocks then start ahead of queued compute blocks: CUDA's stream priorities).
enum class StreamPriority { normal, high };

/// A queue of work on device D. Copies are handles to the same stream.
template <Device D>
class Stream;

/// The host's "stream" (Cpu, Pinned): work there is synchronous, so there is one, and
/// waiting is free.
template <Device D>
  requires(!D::is_cuda)
class Stream<D> {
 public:
  static Stream create(StreamPriority = StreamPriority::normal) { return {}; }
  void synchronize() const {}
  void wait(const Event<D>&) const {}
  bool query() const { return true; }
  D device() const { return {}; }
  friend bool operator==(const Stream&, const Stream&) = default;
};

#if defined(ET_HAS_CUDA_RUNTIME)
template <int I>
class Stream<Cuda<I>> {
 public:
  /// A new stream on device I (non-blocking: it never waits for the legacy stream 0), of
  /// the device's normal or greatest priority. Nor does it wait for the device's default
  /// stream: tensors made there (a model's parameters, say) are ready for work queued on
  /// this stream only after it waits on an Event recorded behind them, as in PyTorch:
  ///   et::Event<et::Cuda<0>> made;  made.record();  s.wait(made);
  static Stream create(StreamPriority priority = StreamPriority::normal) {
    detail::check_device_index(I);
    auto& pool = detail::stream_pool();
    const auto level = static_cast<std::size_t>(priority == StreamPriority::high);
    cudaStream_t stream = nullptr;
    {
      std::lock_guard lock(pool.mutex);
      if (!pool.idle[level][I].empty()) {
        stream = pool.idle[level][I].back();
        pool.idle[level][I].pop_back();
      }
    }
    if (!stream) {
      detail::DeviceGuard guard(I);
      int least = 0, greatest = 0;
      ET_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      ET_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, level ? greatest : least));
    }
    return Stream(stream, std::shared_ptr<void>(stream, [level](void* s) {
                    auto& idle = detail::stream_pool();
                    std::lock_guard lock(idle.mutex);
                    idle.idle[level][I].push_back(static_cast<cudaStream_t>(s));
                  }));
  }

  /// Adopts a stream owned by other code (which must keep it alive while etensor uses it,
  /// and until tensors used on it are freed). 0 means the legacy default stream.
  static Stream wrap(cudaStream_t stream) { return Stream(stream ? stream : cudaStreamLegacy, {}); }

  /// Waits on the host until all work queued on this stream has finished.
  void synchronize() const { ET_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  /// Work queued on this stream from now on starts after `event` (no host wait).
  void wait(const Event<Cuda<I>>& event) const;

  /// True when all work queued so far has finished.
  bool query() const { return detail::finished(cudaStreamQuery(stream_), "cudaStreamQuery(stream)"); }

  cudaStream_t native() const noexcept { return stream_; }
  Cuda<I> device() const noexcept { return {}; }
  friend bool operator==(const Stream& a, const Stream& b) noexcept { return a.stream_ == b.stream_; }

 private:
  template <Device>
  friend class StreamGuard;
  template <Device E>
  friend Stream<E> current_stream(E);

  Stream(cudaStream_t stream, std::shared_ptr<void> owner) : stream_(stream), owner_(std::move(owner)) {}

  cudaStream_t stream_;
  std::shared_ptr<void> owner_;  ///< returns a created stream to the pool; empty for wrapped ones
};
#endif

/// Makes `stream` its device's current stream on this host thread for a scope: every
/// etensor operation on that device in the scope (kernels, cuBLASLt, cuDNN, copies,
/// allocations) is queued on it. Guards nest; the previous stream comes back at the end.
template <Device D>
class StreamGuard {
 public:
  explicit StreamGuard([[maybe_unused]] const Stream<D>& stream) {
    if constexpr (D::is_cuda) {
#if defined(ET_HAS_CUDA_RUNTIME)
      detail::check_device_index(D::index);
      keep_ = stream.owner_;
      cudaStream_t& slot = detail::thread_streams()[D::index];
      previous_ = slot;
      slot = stream.native();
      if (stream.native() != detail::default_stream(D::index))
        detail::several_streams().store(true, std::memory_order_relaxed);
#endif
    }
  }
  ~StreamGuard() {
#if defined(ET_HAS_CUDA_RUNTIME)
    if constexpr (D::is_cuda) detail::thread_streams()[D::index] = previous_;
#endif
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
#if defined(ET_HAS_CUDA_RUNTIME)
  std::shared_ptr<void> keep_;  ///< keeps a created stream out of the pool while it is current
  cudaStream_t previous_ = nullptr;
#endif
};

/// The stream etensor's work on `dev` is queued on now, on this thread.
template <Device D>
Stream<D> current_stream(D) {
  if constexpr (D::is_cuda) {
#if defined(ET_HAS_CUDA_RUNTIME)
    return Stream<D>(detail::current_stream_handle(D::index), {});
#endif
  } else {
    return {};
  }
}

/// A point in host time (Cpu, Pinned): elapsed_ms measures the host's wall clock.
template <Device D>
  requires(!D::is_cuda)
class Event<D> {
 public:
  void record() { ms_ = detail::host_clock_ms(); }
  void record(const Stream<D>&) { record(); }
  void synchronize() const {}
  bool query() const { return true; }
  template <Device E>
  friend float elapsed_ms(const Event<E>& start, const Event<E>& end);

 private:
  double ms_ = 0;
};

#if defined(ET_HAS_CUDA_RUNTIME)
/// A marker in a stream of device I: record it, wait for it (host or another stream),
/// and time the work between two of them with elapsed_ms.
template <int I>
class Event<Cuda<I>> {
 public:
  Event() {
    detail::DeviceGuard guard(I);
    ET_CUDA_CHECK(cudaEventCreate(&event_));
  }
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);
  }
  Event(Event&& other) noexcept : event_(other.event_), recorded_(other.recorded_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept {
    std::swap(event_, other.event_);
    std::swap(recorded_, other.recorded_);
    return *this;
  }

  /// Marks the current end of `stream` (default: the device's current stream).
  void record(const Stream<Cuda<I>>& stream) {
    detail::DeviceGuard guard(I);
    ET_CUDA_CHECK(cudaEventRecord(event_, stream.native()));
    recorded_ = true;
  }
  void record() { record(current_stream(cuda<I>)); }

  /// Waits on the host until the recorded work has finished.
  void synchronize() const {
    require_recorded("synchronize()");
    ET_CUDA_CHECK(cudaEventSynchronize(event_));
  }
  /// True when the recorded work has finished.
  bool query() const {
    require_recorded("query()");
    return detail::finished(cudaEventQuery(event_), "cudaEventQuery(event)");
  }
  cudaEvent_t native() const noexcept { return event_; }

  template <Device E>
  friend float elapsed_ms(const Event<E>& start, const Event<E>& end);

 private:
  void require_recorded(const char* what) const {
    if (!recorded_) throw Error(std::string("et: Event::") + what + " on an event that was never recorded");
  }
  cudaEvent_t event_ = nullptr;
  bool recorded_ = false;
};

template <int I>
void Stream<Cuda<I>>::wait(const Event<Cuda<I>>& event) const {
  ET_CUDA_CHECK(cudaStreamWaitEvent(stream_, event.native(), 0));
}
#endif

template <Device D>
float elapsed_ms(const Event<D>& start, const Event<D>& end) {
  if constexpr (D::is_cuda) {
#if defined(ET_HAS_CUDA_RUNTIME)
    start.require_recorded("elapsed_ms()");
    end.require_recorded("elapsed_ms()");
    float ms = 0;
    ET_CUDA_CHECK(cudaEventSynchronize(end.event_));
    ET_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
    return ms;
#endif
  } else {
    return static_cast<float>(end.ms_ - start.ms_);
  }
}

}  // namespace et
