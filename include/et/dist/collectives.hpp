// Collectives over a process group (dist/process_group.hpp) on typed, contiguous CUDA
// tensors, queued on the device's current stream as any etensor operation is:
//
//   et::dist::all_reduce(t, pg);                      // sum (or ReduceOp::avg, max, min, prod)
//   et::dist::broadcast(t, 0, pg);                    // rank 0's values everywhere
//   et::dist::all_gather(out, t, pg);                 // out: every rank's t along axis 0
//   et::dist::reduce_scatter(out, t, pg);             // out: this rank's part of the sum, axis 0
//   et::dist::barrier(pg);                            // the host waits for every rank
//
// With InitOptions::check_shapes (the default), every rank's element type and shape are
// compared first and a mismatch throws et::ShapeError on every rank, naming both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "et/dist/process_group.hpp"
#include "et/tensor.hpp"

namespace et::dist {

enum class ReduceOp { sum, avg, max, min, prod };

namespace detail {

template <class T>
constexpr ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, et::half>) return ncclFloat16;
  else if constexpr (std::is_same_v<T, et::bfloat16>) return ncclBfloat16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ncclInt64;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return ncclUint8;
  else if constexpr (std::is_same_v<T, std::int8_t>) return ncclInt8;
  else static_assert(sizeof(T) == 0, "et: NCCL has no reduction for this element type (bool, int16)");
}

inline const char* nccl_type_name(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclFloat16: return "float16";
    case ncclBfloat16: return "bfloat16";
    case ncclInt32: return "int32";
    case ncclInt64: return "int64";
    case ncclUint8: return "uint8";
    case ncclInt8: return "int8";
    default: return "?";
  }
}

inline ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::avg: return ncclAvg;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::prod: return ncclProd;
  }
  throw Error("et: dist: unknown ReduceOp");
}

/// Throws unless t is on the group's GPU, defined and contiguous.
template <class T, int R, int I>
void check_operand(const char* what, const char* name, const Tensor<T, R, Cuda<I>>& t, const ProcessGroup& pg) {
  if (I != pg.device())
    throw Error(std::string("et: dist::") + what + ": the " + name + " is on Cuda<" + std::to_string(I) +
                ">, but this process's GPU is Cuda<" + std::to_string(pg.device()) + ">");
  if (!t.defined()) throw Error(std::string("et: dist::") + what + ": the " + name + " is an undefined tensor");
  if (!t.is_contiguous())
    throw Error(std::string("et: dist::") + what + ": the " + name + " must be contiguous, but it has shape " +
                format_shape(t.shape()) + " and strides " + format_shape(t.strides()) + "; pass t.contiguous()");
}

/// Checks both operands, then that `whole` is size() tensors of `part`'s shape stacked
/// along axis 0 (all_gather's output, reduce_scatter's input).
template <class T, int R, int I>
void check_stacked(const char* what, const char* whole_name, const Tensor<T, R, Cuda<I>>& whole,
                   const char* part_name, const Tensor<T, R, Cuda<I>>& part, const ProcessGroup& pg) {
  check_operand(what, whole_name, whole, pg);
  check_operand(what, part_name, part, pg);
  auto want = part.shape();
  want[0] *= pg.size();
  if (whole.shape() != want)
    throw ShapeError(std::string("et: dist::") + what + ": the " + whole_name + " has shape " +
                     format_shape(whole.shape()) + "; " + std::to_string(pg.size()) + " ranks' " + part_name +
                     "s of shape " + format_shape(part.shape()) + " need " + format_shape(want));
}

/// With check_shapes: every rank's `mine` (element type, shapes, arguments) compared with
/// rank 0's; et::ShapeError on every rank when one differs.
inline void agree(const char* what, const std::string& mine, const ProcessGroup& pg) {
  if (!pg.options().check_shapes || pg.size() == 1) return;
  const std::vector<std::string> all = pg.exchange(mine);  // throws if the communicator was aborted
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw ShapeError(std::string("et: dist::") + what + ": rank " + std::to_string(r) + " passes " + all[r] +
                       ", rank 0 passes " + all[0] + " (every rank must pass the same element type and shapes)");
}

template <class T, int R, class D>
std::string describe(const Tensor<T, R, D>& t) {
  return std::string(nccl_type_name(nccl_type<T>())) + " " + format_shape(t.shape());
}

/// Queues `call(comm, stream)` on the device's current stream and watches it.
template <class Call>
void run_collective(const char* what, const ProcessGroup& pg, Call&& call) {
  const ncclComm_t comm = pg.native();
  const et::detail::CudaCall on(pg.device(), what);
  pg.host_wait(what, [&] { call(comm, on.stream()); });
  pg.watch(what, on.stream());
}

}  // namespace detail

/// t <- op over every rank's t, in place.
template <class T, int R, int I>
void all_reduce(Tensor<T, R, Cuda<I>>& t, const ProcessGroup& pg, ReduceOp op = ReduceOp::sum) {
  detail::check_operand("all_reduce", "tensor", t, pg);
  detail::agree("all_reduce", detail::describe(t) + " op " + std::to_string(int(op)), pg);
  if (t.numel() == 0) return;
  detail::run_collective("all_reduce", pg, [&](ncclComm_t comm, cudaStream_t stream) {
    ET_NCCL_CHECK(ncclAllReduce(t.data(), t.data(), std::size_t(t.numel()), detail::nccl_type<T>(),
                                detail::nccl_op(op), comm, stream));
  });
}

/// t <- rank `root`'s t, on every rank.
template <class T, int R, int I>
void broadcast(Tensor<T, R, Cuda<I>>& t, int root, const ProcessGroup& pg) {
  if (root < 0 || root >= pg.size())
    throw Error("et: dist::broadcast: root " + std::to_string(root) + " is not a rank of a group of " +
                std::to_string(pg.size()));
  detail::check_operand("broadcast", "tensor", t, pg);
  detail::agree("broadcast", detail::describe(t) + " root " + std::to_string(root), pg);
  if (t.numel() == 0) return;
  detail::run_collective("broadcast", pg, [&](ncclComm_t comm, cudaStream_t stream) {
    ET_NCCL_CHECK(
        ncclBroadcast(t.data(), t.data(), std::size_t(t.numel()), detail::nccl_type<T>(), root, comm, stream));
  });
}

/// out = every rank's t, rank after rank along axis 0: out.size(0) = size() * t.size(0),
/// the other axes t's.
template <class T, int R, int I>
void all_gather(Tensor<T, R, Cuda<I>>& out, const Tensor<T, R, Cuda<I>>& t, const ProcessGroup& pg) {
  static_assert(R >= 1, "et: dist::all_gather gathers along axis 0: give it tensors of rank 1 or more");
  detail::check_stacked("all_gather", "output", out, "input", t, pg);
  detail::agree("all_gather", detail::describe(t), pg);
  if (t.numel() == 0) return;
  detail::run_collective("all_gather", pg, [&](ncclComm_t comm, cudaStream_t stream) {
    ET_NCCL_CHECK(ncclAllGather(t.data(), out.data(), std::size_t(t.numel()), detail::nccl_type<T>(), comm, stream));
  });
}

/// out = this rank's part, along axis 0, of op over every rank's t: t.size(0) = size() *
/// out.size(0), the other axes out's.
template <class T, int R, int I>
void reduce_scatter(Tensor<T, R, Cuda<I>>& out, const Tensor<T, R, Cuda<I>>& t, const ProcessGroup& pg,
                    ReduceOp op = ReduceOp::sum) {
  static_assert(R >= 1, "et: dist::reduce_scatter splits along axis 0: give it tensors of rank 1 or more");
  detail::check_stacked("reduce_scatter", "input", t, "output", out, pg);
  detail::agree("reduce_scatter", detail::describe(t) + " op " + std::to_string(int(op)), pg);
  if (out.numel() == 0) return;
  detail::run_collective("reduce_scatter", pg, [&](ncclComm_t comm, cudaStream_t stream) {
    ET_NCCL_CHECK(ncclReduceScatter(t.data(), out.data(), std::size_t(out.numel()), detail::nccl_type<T>(),
                                    detail::nccl_op(op), comm, stream));
  });
}

/// Returns on the host once every rank has reached its barrier (and this GPU's work queued
/// before it, on the current stream, is done).
inline void barrier(const ProcessGroup& pg) {
  const et::detail::CudaCall on(pg.device(), "barrier");
  void* one = nullptr;
  ET_CUDA_CHECK(cudaMallocAsync(&one, sizeof(float), on.stream()));
  ET_CUDA_CHECK(cudaMemsetAsync(one, 0, sizeof(float), on.stream()));
  detail::run_collective("barrier", pg, [&](ncclComm_t comm, cudaStream_t stream) {
    ET_NCCL_CHECK(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm, stream));
  });
  ET_CUDA_CHECK(cudaFreeAsync(one, on.stream()));
  ET_CUDA_CHECK(cudaStreamSynchronize(on.stream()));
  (void)pg.native();  // an abort while waiting ended the all-reduce: say so
}

}  // namespace et::dist
