// Convolution and pooling on a CUDA device through cuDNN 9 (host code: the calls only
// queue work on the device's stream). Included by ops/nn.hpp when etensor found cuDNN
// (ET_WITH_CUDNN).
//
//  - Handles: one cuDNN handle per (thread, device), bound on each call to the device's
//    current stream; a cuDNN handle and its execution plans must not be used by two threads at
//    once. A thread's handles return to a pool when it exits; handles and plans are never
//    destroyed (destroying them at process exit would race the CUDA runtime's teardown).
//  - Convolutions use the graph (backend) API, as PyTorch does: a one-operation graph
//    (forward, backward data or backward filter), its engine configurations from cuDNN's
//    heuristics (mode INSTANT, then the FALLBACK list), filtered like PyTorch's (no
//    engine that down-converts inputs; for float, no tensor-core (TF32) engine unless
//    allow_tf32). The first time a configuration is seen (shapes, layout, data type,
//    options, pointer alignments, allow_tf32) the first `timed_plan_limit` plans that
//    build and run are timed (median of 3 after a warm-up) and the fastest is cached per
//    (thread, device): PyTorch's cudnn.benchmark, which times up to 10 of the same list.
//  - Pooling uses the legacy API (cudnnPoolingForward/Backward: 4-d descriptors with
//    strides, so nchw and nhwc alike), which needs no search.
//  - Workspace comes from etensor's caching allocator, in stream order.
//  - Every cuDNN call is checked: a failure throws et::CudnnError naming the call, cuDNN's
//    status string and its last error message, and file:line.
#pragma once

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "et/half.hpp"
#include "et/ops/nn_shapes.hpp"
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

/// Plans timed per new configuration (the rest of cuDNN's list is never built).
inline constexpr int timed_plan_limit = 16;

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

// ---- convolution graphs and the algorithm search ----------------------------------

enum class Direction { forward, backward_data, backward_filter };

inline const char* direction_name(Direction direction) {
  switch (direction) {
    case Direction::forward: return "forward";
    case Direction::backward_data: return "backward data";
    default: return "backward filter";
  }
}

/// The convolution's three tensors by role (x: input or its gradient, w: weight or its
/// gradient, y: output or its gradient), whichever of them is written.
struct Operands {
  void* x;
  void* w;
  void* y;
};

inline constexpr std::int64_t uid_x = 'x', uid_w = 'w', uid_y = 'y';

/// The largest power of two up to 16 that divides the address (PyTorch's alignment rule).
inline std::int64_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::int64_t alignment = 1;
  while (alignment < 16 && address % static_cast<std::uintptr_t>(alignment * 2) == 0) alignment *= 2;
  return alignment;
}

/// A tensor descriptor: logical extents in NCHW order, strides from the layout (packed).
inline Descriptor tensor_descriptor(std::int64_t uid, cudnnDataType_t type, const std::array<std::int64_t, 4>& nchw,
                                    Layout layout, std::int64_t alignment) {
  const auto [n, c, h, w] = nchw;
  const std::array<std::int64_t, 4> strides =
      layout == Layout::nhwc ? std::array<std::int64_t, 4>{h * w * c, 1, w * c, c}
                             : std::array<std::int64_t, 4>{c * h * w, h * w, w, 1};
  Descriptor d(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, nchw.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(d.get(), CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  ET_CUDNN_CHECK(cudnnBackendFinalize(d.get()));
  return d;
}

/// The numerical notes of an engine configuration's engine (empty if cuDNN gives none).
inline std::vector<cudnnBackendNumericalNote_t> numerical_notes(cudnnBackendDescriptor_t config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_handle = engine.get();
  std::int64_t count = 0;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine_handle) != CUDNN_STATUS_SUCCESS)
    return {};
  std::array<cudnnBackendNumericalNote_t, 32> notes{};
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               static_cast<std::int64_t>(notes.size()), &count, notes.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  return std::vector<cudnnBackendNumericalNote_t>(
      notes.begin(), notes.begin() + std::clamp<std::int64_t>(count, 0, std::int64_t(notes.size())));
}

/// The global index of an engine configuration's engine, or -1.
inline std::int64_t engine_index(cudnnBackendDescriptor_t config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t engine_handle = engine.get();
  std::int64_t count = 0, index = -1;
  if (cudnnBackendGetAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count,
                               &engine_handle) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &count, &index) !=
          CUDNN_STATUS_SUCCESS)
    return -1;
  return index;
}

/// PyTorch's filter: engines that down-convert inputs never; for float data, tensor-core
/// (TF32) engines only when allowed.
inline bool acceptable(cudnnBackendDescriptor_t config, cudnnDataType_t type, bool allow_tf32) {
  for (const cudnnBackendNumericalNote_t note : numerical_notes(config)) {
    if (note == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) return false;
    if (note == CUDNN_NUMERICAL_NOTE_TENSOR_CORE && type == CUDNN_DATA_FLOAT && !allow_tf32) return false;
  }
  return true;
}

/// The engine configurations cuDNN's heuristics propose for a graph, in order (mode
/// INSTANT, then FALLBACK), filtered.
inline std::vector<Descriptor> engine_configs(cudnnBackendDescriptor_t graph, cudnnDataType_t type, bool allow_tf32) {
  std::vector<Descriptor> accepted;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_INSTANT, CUDNN_HEUR_MODE_FALLBACK}) {
    Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
    // A mode that proposes nothing (or fails to) leaves the others: no engine at all is
    // reported after the search.
    std::int64_t count = 0;
    if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS ||
        cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                 &count, nullptr) != CUDNN_STATUS_SUCCESS)
      continue;
    std::vector<Descriptor> configs;
    std::vector<cudnnBackendDescriptor_t> handles;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      handles.push_back(configs.back().get());
    }
    std::int64_t returned = 0;
    if (cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                 &returned, handles.data()) != CUDNN_STATUS_SUCCESS)
      continue;
    for (std::int64_t i = 0; i < std::min(returned, count); ++i)
      if (acceptable(configs[static_cast<std::size_t>(i)].get(), type, allow_tf32))
        accepted.push_back(std::move(configs[static_cast<std::size_t>(i)]));
  }
  return accepted;
}

/// Runs a plan once on the handle's stream.
inline cudnnStatus_t execute(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, const Operands& operands,
                             void* workspace) {
  std::array<std::int64_t, 3> uids{uid_x, uid_w, uid_y};
  std::array<void*, 3> pointers{operands.x, operands.w, operands.y};
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3,
                                          uids.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                                          pointers.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(pack.get(), CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                          &workspace));
  ET_CUDNN_CHECK(cudnnBackendFinalize(pack.get()));
  return cudnnBackendExecute(handle, plan, pack.get());
}

/// Times `plan`: one warm-up run, then the median of three. Returns a negative time when
/// the plan fails to run.
inline float time_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, const Operands& operands, void* workspace,
                       int device) {
  if (execute(handle, plan, operands, workspace) != CUDNN_STATUS_SUCCESS) {
    (void)cudaGetLastError();
    return -1;
  }
  const cudaStream_t stream = current_stream_handle(device);
  cudaEvent_t start{}, stop{};
  ET_CUDA_CHECK(cudaEventCreate(&start));
  ET_CUDA_CHECK(cudaEventCreate(&stop));
  std::array<float, 3> times{};
  bool ran = true;
  for (float& time : times) {
    ET_CUDA_CHECK(cudaEventRecord(start, stream));
    ran = ran && execute(handle, plan, operands, workspace) == CUDNN_STATUS_SUCCESS;
    ET_CUDA_CHECK(cudaEventRecord(stop, stream));
    ET_CUDA_CHECK(cudaEventSynchronize(stop));
    ET_CUDA_CHECK(cudaEventElapsedTime(&time, start, stop));
  }
  ET_CUDA_CHECK(cudaEventDestroy(start));
  ET_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(times.begin(), times.end());
  return ran ? times[1] : -1.0f;
}

/// The configuration's cache key.
inline std::string plan_key(Direction direction, cudnnDataType_t type, const ConvGeometry& g, bool allow_tf32,
                            const Operands& operands) {
  std::string key;
  for (const std::int64_t value :
       {std::int64_t(direction), std::int64_t(type), std::int64_t(g.layout), g.n, g.c, g.h, g.w, g.k, g.r, g.s, g.groups,
        g.stride[0], g.stride[1], g.padding[0], g.padding[1], g.dilation[0], g.dilation[1],
        std::int64_t(allow_tf32 && type == CUDNN_DATA_FLOAT), alignment_of(operands.x), alignment_of(operands.w),
        alignment_of(operands.y)})
    key += std::to_string(value) + ',';
  return key;
}

/// Builds the graph of one convolution and finds its fastest plan on `operands` (which
/// it overwrites: the output role's tensor is written by every timed run).
inline CachedPlan search(Context& context, int device, Direction direction, cudnnDataType_t type,
                         const ConvGeometry& g, bool allow_tf32, const Operands& operands) {
  search_counter().fetch_add(1);
  CachedPlan cached;
  auto keep = [&](Descriptor d) -> cudnnBackendDescriptor_t {
    cached.parts.push_back(std::move(d));
    return cached.parts.back().get();
  };
  // Descriptors refer to each other by handle; `parts` owns every one the plan was built from.
  cudnnBackendDescriptor_t x = keep(tensor_descriptor(uid_x, type, {g.n, g.c, g.h, g.w}, g.layout, alignment_of(operands.x)));
  cudnnBackendDescriptor_t w =
      keep(tensor_descriptor(uid_w, type, {g.k, g.c_per_group(), g.r, g.s}, g.layout, alignment_of(operands.w)));
  cudnnBackendDescriptor_t y = keep(tensor_descriptor(uid_y, type, {g.n, g.k, g.p, g.q}, g.layout, alignment_of(operands.y)));

  // Half and bfloat16 accumulate in float (tensor cores), as PyTorch's convolutions do.
  const cudnnDataType_t compute = type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const std::int64_t spatial_dims = 2;
  Descriptor convolution(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  cudnnBackendDescriptor_t conv = convolution.get();
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial_dims));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, g.dilation.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, g.stride.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, g.padding.data()));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, g.padding.data()));
  ET_CUDNN_CHECK(cudnnBackendFinalize(conv));
  keep(std::move(convolution));

  // Scaling factors: double when the computation is in double, float otherwise (as
  // cudnn-frontend sets them). A float alpha on a double graph is read as garbage bits.
  const double alpha_d = 1.0, beta_d = 0.0;
  const float alpha_f = 1.0f, beta_f = 0.0f;
  const bool double_scale = compute == CUDNN_DATA_DOUBLE;
  const cudnnBackendAttributeType_t scale_type = double_scale ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* alpha = double_scale ? static_cast<const void*>(&alpha_d) : static_cast<const void*>(&alpha_f);
  const void* beta = double_scale ? static_cast<const void*>(&beta_d) : static_cast<const void*>(&beta_f);
  cudnnBackendDescriptor_t op = nullptr;
  if (direction == Direction::forward) {
    op = keep(Descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, scale_type, 1, alpha));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, scale_type, 1, beta));
  } else if (direction == Direction::backward_data) {
    op = keep(Descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, scale_type, 1, alpha));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, scale_type, 1, beta));
  } else {
    op = keep(Descriptor(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, scale_type, 1, alpha));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, scale_type, 1, beta));
  }
  ET_CUDNN_CHECK(cudnnBackendFinalize(op));

  cudnnBackendDescriptor_t graph = keep(Descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &context.handle));
  ET_CUDNN_CHECK(cudnnBackendFinalize(graph));

  std::vector<Descriptor> configs = engine_configs(graph, type, allow_tf32);
  struct Candidate {
    std::size_t config;
    Descriptor plan;
    std::int64_t workspace;
  };
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < configs.size() && candidates.size() < std::size_t(timed_plan_limit); ++i) {
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    cudnnBackendDescriptor_t config = configs[i].get();
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                            &context.handle));
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config));
    if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) continue;  // this engine cannot run this graph
    std::int64_t workspace = 0, count = 0;
    ET_CUDNN_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &count, &workspace));
    candidates.push_back({i, std::move(plan), workspace});
  }

  // One workspace for all timings: the largest any candidate needs; candidates whose
  // workspace does not fit in memory are dropped, largest first.
  std::shared_ptr<void> workspace;
  while (!candidates.empty()) {
    const std::int64_t largest =
        std::max_element(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
          return a.workspace < b.workspace;
        })->workspace;
    try {
      workspace = allocate_bytes(device, static_cast<std::size_t>(largest));
      break;
    } catch (const OutOfMemory&) {
      std::erase_if(candidates, [&](const Candidate& c) { return c.workspace == largest; });
    }
  }

  std::size_t best = candidates.size();
  float best_ms = 0;
  int timed = 0;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const float ms = time_plan(context.handle, candidates[i].plan.get(), operands, workspace.get(), device);
    if (ms < 0) continue;
    ++timed;
    if (best == candidates.size() || ms < best_ms) {
      best = i;
      best_ms = ms;
    }
  }
  if (best == candidates.size()) {
    const std::string why = last_error_message();
    throw Error(std::string("et: cuDNN has no engine that runs this convolution (") + direction_name(direction) +
                ", input " + format_shape(g.input_shape()) + ", weight " + format_shape(g.weight_shape()) + " (" +
                layout_name(g.layout) + "), stride " + format_shape(g.stride) + ", padding " + format_shape(g.padding) +
                ", dilation " + format_shape(g.dilation) + ", groups " + std::to_string(g.groups) + "): " +
                std::to_string(configs.size()) + " engine configuration(s) proposed, " +
                std::to_string(candidates.size()) + " built, none ran" + (why.empty() ? "" : "; cuDNN says: " + why));
  }
  Candidate& chosen = candidates[best];
  cached.report = {std::int64_t(configs.size()), timed, engine_index(configs[chosen.config].get()), best_ms,
                   chosen.workspace};
  cached.workspace = chosen.workspace;
  cached.parts.push_back(std::move(configs[chosen.config]));
  cached.parts.push_back(std::move(chosen.plan));
  return cached;
}

/// Runs one convolution (direction picks which operand is written) with the cached plan
/// for its configuration, searching first if the configuration is new on this thread and
/// device. All three tensors are packed in g.layout.
inline void convolution(int device, Direction direction, cudnnDataType_t type, const ConvGeometry& g, bool allow_tf32,
                        const Operands& operands) {
  const TraceRange range(direction == Direction::forward         ? "conv2d"
                         : direction == Direction::backward_data ? "conv2d backward data"
                                                                 : "conv2d backward filter");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const std::string key = plan_key(direction, type, g, allow_tf32, operands);
  auto found = ctx.plans.find(key);
  if (found == ctx.plans.end()) {
    found = ctx.plans.emplace(key, search(ctx, device, direction, type, g, allow_tf32, operands)).first;
    last_search() = found->second.report;
  }
  const CachedPlan& cached = found->second;
  const auto workspace = allocate_bytes(device, static_cast<std::size_t>(cached.workspace));
  ET_CUDNN_CHECK(execute(ctx.handle, cached.parts.back().get(), operands, workspace.get()));
}

// ---- pooling (legacy API) ------------------------------------------------------------

inline int to_int(std::int64_t value, const char* what) {
  if (value > INT_MAX)
    throw Error(std::string("et: ") + what + " is too large for cuDNN's pooling (which takes 32-bit extents): " +
                std::to_string(value));
  return static_cast<int>(value);
}

/// A legacy 4-d tensor descriptor: extents N, C, H, W with the layout's packed strides.
class TensorDescriptor {
 public:
  TensorDescriptor(cudnnDataType_t type, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, Layout layout) {
    to_int(n * c * h * w, "a pooling tensor's element count");
    ET_CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    const bool nhwc = layout == Layout::nhwc;
    const cudnnStatus_t status = cudnnSetTensor4dDescriptorEx(
        desc_, type, int(n), int(c), int(h), int(w), int(c * h * w), nhwc ? 1 : int(h * w), nhwc ? int(w * c) : int(w),
        nhwc ? int(c) : 1);
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroyTensorDescriptor(desc_);
      throw_cudnn_error(status, "cudnnSetTensor4dDescriptorEx", __FILE__, __LINE__);
    }
  }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  ~TensorDescriptor() { (void)cudnnDestroyTensorDescriptor(desc_); }
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class PoolingDescriptor {
 public:
  PoolingDescriptor(const PoolGeometry& g, bool max) {
    ET_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&desc_));
    const cudnnPoolingMode_t mode = max                   ? CUDNN_POOLING_MAX
                                    : g.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    // NaN propagates through max pooling, as in PyTorch.
    const cudnnStatus_t status = cudnnSetPooling2dDescriptor(
        desc_, mode, CUDNN_PROPAGATE_NAN, to_int(g.kernel[0], "kernel"), to_int(g.kernel[1], "kernel"),
        to_int(g.padding[0], "padding"), to_int(g.padding[1], "padding"), to_int(g.stride[0], "stride"),
        to_int(g.stride[1], "stride"));
    if (status != CUDNN_STATUS_SUCCESS) {
      (void)cudnnDestroyPoolingDescriptor(desc_);
      throw_cudnn_error(status, "cudnnSetPooling2dDescriptor", __FILE__, __LINE__);
    }
  }
  PoolingDescriptor(const PoolingDescriptor&) = delete;
  PoolingDescriptor& operator=(const PoolingDescriptor&) = delete;
  ~PoolingDescriptor() { (void)cudnnDestroyPoolingDescriptor(desc_); }
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

/// Legacy scaling factors: double for double data, float otherwise.
struct Scale {
  explicit Scale(cudnnDataType_t type, double value) : as_double(value), as_float(float(value)), is_double(type == CUDNN_DATA_DOUBLE) {}
  const void* get() const { return is_double ? static_cast<const void*>(&as_double) : static_cast<const void*>(&as_float); }
  double as_double;
  float as_float;
  bool is_double;
};

/// y = max_pool2d(x) or avg_pool2d(x); both packed in g.layout.
inline void pooling_forward(int device, cudnnDataType_t type, const PoolGeometry& g, bool max, const void* x, void* y) {
  const TraceRange range(max ? "max_pool2d" : "avg_pool2d");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const TensorDescriptor x_desc(type, g.n, g.c, g.h, g.w, g.layout), y_desc(type, g.n, g.c, g.p, g.q, g.layout);
  const PoolingDescriptor pooling(g, max);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnPoolingForward(ctx.handle, pooling.get(), one.get(), x_desc.get(), x, zero.get(), y_desc.get(), y));
}

/// dx from dy. Max pooling reads x and y = max_pool2d(x); average pooling reads neither,
/// but cuDNN's call takes them: `y` and `x` may then be any buffers of their shapes.
inline void pooling_backward(int device, cudnnDataType_t type, const PoolGeometry& g, bool max, const void* y,
                             const void* dy, const void* x, void* dx) {
  const TraceRange range(max ? "max_pool2d backward" : "avg_pool2d backward");
  DeviceGuard guard(device);
  Context& ctx = context(device);
  const TensorDescriptor x_desc(type, g.n, g.c, g.h, g.w, g.layout), y_desc(type, g.n, g.c, g.p, g.q, g.layout);
  const PoolingDescriptor pooling(g, max);
  const Scale one(type, 1.0), zero(type, 0.0);
  ET_CUDNN_CHECK(cudnnPoolingBackward(ctx.handle, pooling.get(), one.get(), y_desc.get(), y, y_desc.get(), dy,
                                      x_desc.get(), x, zero.get(), x_desc.get(), dx));
}

}  // namespace et::detail::cudnn_backend
