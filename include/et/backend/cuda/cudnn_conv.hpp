// Convolution through cuDNN's graph (backend) API, as PyTorch does: a one-operation graph
// (forward, backward data or backward filter), its engine configurations from cuDNN's
// heuristics (mode INSTANT, then the FALLBACK list), filtered like PyTorch's (no engine
// that down-converts inputs; for float, no tensor-core (TF32) engine unless allow_tf32)
// and without the engines known to fault (known_to_fault). The first time a configuration
// is seen (shapes, layout, data type, options, pointer alignments, allow_tf32) the first
// `timed_plan_limit` plans that build and run are timed on the GPU alone (gpu_timing.hpp:
// after a warm-up, the least of three batches of three runs) and the fastest is cached per
// (thread, device): PyTorch's cudnn.benchmark, which times up to 10 of the same list.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "et/backend/cuda/cudnn.hpp"
#include "et/backend/cuda/gpu_timing.hpp"
#include "et/backend/nn_shapes.hpp"

namespace et::detail::cudnn_backend {

/// Plans timed per new configuration (the rest of cuDNN's list is never built).
inline constexpr int timed_plan_limit = 16;

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

/// Engines that cuDNN proposes and finalizes for a graph but that fault when run, leaving
/// the CUDA context unusable (so a timed search cannot simply skip them). Engine 71, a
/// runtime-compiled forward kernel (cudnn_generated_fort_native_sm80_convFwd_*), makes
/// 4-byte stores at 2-byte-aligned output addresses for some grouped half and bfloat16
/// convolutions in nchw: "misaligned address", found by the random conv2d family on an H200
/// with cuDNN 9.14 (x [2,4,2,8], w [4,2,1,4], stride {3,2}, dilation {1,2}, groups 2; also
/// x [2,4,6,6], w [4,2,4,4], stride {3,3}, padding {0,1}, dilation {1,2}, groups 2). In a
/// sweep of 96 random nchw and 87 nhwc geometries it faulted only there, grouped and nchw;
/// it is left out for every grouped nchw forward convolution in half precision.
inline bool known_to_fault(cudnnBackendDescriptor_t config, Direction direction, cudnnDataType_t type,
                           const ConvGeometry& g) {
  const bool half_precision = type == CUDNN_DATA_HALF || type == CUDNN_DATA_BFLOAT16;
  return direction == Direction::forward && half_precision && g.groups > 1 && !g.nhwc() && engine_index(config) == 71;
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

/// The variant pack of one execution: the operands' addresses and the workspace.
inline Descriptor variant_pack(const Operands& operands, void* workspace) {
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
  return pack;
}

/// Times `plan` on the GPU alone (gpu_timing.hpp): one warm-up run, then the least of three
/// batches of three runs. Returns a negative time when the plan fails to run.
inline float time_plan(cudnnHandle_t handle, cudnnBackendDescriptor_t plan, const Operands& operands, void* workspace,
                       int device) {
  const Descriptor pack = variant_pack(operands, workspace);
  const auto run = [&] { return cudnnBackendExecute(handle, plan, pack.get()) == CUDNN_STATUS_SUCCESS; };
  const float ms = run() ? gpu_ms_per_run(current_stream_handle(device), 3, 3, run) : -1.0f;
  if (ms < 0) (void)cudaGetLastError();
  return ms;
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

/// The operation graph of one convolution: `parts` owns every descriptor it was built
/// from (they refer to each other by handle), the graph last.
inline CachedPlan convolution_graph(Context& context, Direction direction, cudnnDataType_t type,
                                    const ConvGeometry& g, const Operands& operands) {
  CachedPlan cached;
  auto keep = [&](Descriptor d) -> cudnnBackendDescriptor_t {
    cached.parts.push_back(std::move(d));
    return cached.parts.back().get();
  };
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
  // The operation of each direction and its attributes, in the order x, w, y (dx, dw, dy in
  // the backward directions), the convolution, alpha and beta.
  struct Operation {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static constexpr Operation operations[] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA},
  };
  const Operation& o = operations[static_cast<int>(direction)];
  cudnnBackendDescriptor_t op = keep(Descriptor(o.type));
  for (const auto& [name, operand] :
       {std::pair{o.x, &x}, std::pair{o.w, &w}, std::pair{o.y, &y}, std::pair{o.conv, &conv}})
    ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, operand));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, o.alpha, scale_type, 1, alpha));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(op, o.beta, scale_type, 1, beta));
  ET_CUDNN_CHECK(cudnnBackendFinalize(op));

  cudnnBackendDescriptor_t graph = keep(Descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &op));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &context.handle));
  ET_CUDNN_CHECK(cudnnBackendFinalize(graph));
  return cached;
}

/// The execution plan of an engine configuration, or nothing if its engine cannot run the graph.
inline std::optional<Descriptor> execution_plan(Context& context, cudnnBackendDescriptor_t config) {
  Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                          &context.handle));
  ET_CUDNN_CHECK(cudnnBackendSetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config));
  if (cudnnBackendFinalize(plan.get()) != CUDNN_STATUS_SUCCESS) return std::nullopt;
  return plan;
}

/// The workspace a finalized plan needs, in bytes.
inline std::int64_t plan_workspace(cudnnBackendDescriptor_t plan) {
  std::int64_t workspace = 0, count = 0;
  ET_CUDNN_CHECK(cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count,
                                          &workspace));
  return workspace;
}

/// Builds the graph of one convolution and finds its fastest plan on `operands` (which
/// it overwrites: the output role's tensor is written by every timed run).
inline CachedPlan search(Context& context, int device, Direction direction, cudnnDataType_t type,
                         const ConvGeometry& g, bool allow_tf32, const Operands& operands) {
  search_counter().fetch_add(1);
  CachedPlan cached = convolution_graph(context, direction, type, g, operands);
  std::vector<Descriptor> configs = engine_configs(cached.parts.back().get(), type, allow_tf32);
  struct Candidate {
    std::size_t config;
    Descriptor plan;
    std::int64_t workspace;
  };
  std::vector<Candidate> candidates;
  for (std::size_t i = 0; i < configs.size() && candidates.size() < std::size_t(timed_plan_limit); ++i) {
    if (known_to_fault(configs[i].get(), direction, type, g)) continue;
    std::optional<Descriptor> plan = execution_plan(context, configs[i].get());
    if (!plan) continue;
    const std::int64_t workspace = plan_workspace(plan->get());  // before the plan moves
    candidates.push_back({i, std::move(*plan), workspace});
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
  const Descriptor pack = variant_pack(operands, workspace.get());
  ET_CUDNN_CHECK(cudnnBackendExecute(ctx.handle, cached.parts.back().get(), pack.get()));
}

}  // namespace et::detail::cudnn_backend
