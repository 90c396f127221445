// The one place that decides which code computes on a device. Each kind of device has a
// backend tag, and every operation reaches its device through the tag alone: the call is
// unqualified, so argument-dependent lookup picks the overload in the tag's namespace.
//
//   cpu_backend  (Cpu, Pinned)  OpenMP loops, Eigen GEMMs, im2col convolution: backend/cpu/
//   cuda_backend (Cuda<I>)      etensor's kernels, cuBLASLt, cuDNN:            backend/cuda/
//
// The verbs: what a backend is asked, each the first argument `backend<D>`, and who asks.
// A new kind of device is one tag here and an overload of each verb.
//
//   run_elementwise(b, dst, expr)                 dst = expr, one pass       exec/assign.hpp
//   run_statement(b, space, elements,             several outputs and full   ops/statement.hpp
//     reductions, finals)                           reductions, one pass
//   run_gradient(b, program, shape, linear)       a fused backward's pass    derivatives/fused.hpp
//   reduce_into(b, op, expr, out)                 a reduction of all        ops/reduce.hpp
//   reduce_axis_into(b, op, expr, problem, out)   a reduction over one axis  ops/reduce.hpp
//   softmax_rows_into(b, kind, in, out, ...)      softmax / log-softmax /    ops/softmax.hpp
//                                                 logsumexp along rows
//   cross_entropy_into(b, x, labels, ...)         the fused loss and grad    nn/loss.hpp
//   gemm(b, problem, mode, epilogue, buffers)     C = act(A B + bias)        ops/linalg.hpp
//   conv_forward / conv_backward_data /           convolution (cuDNN,        ops/nn.hpp
//     conv_backward_filter(b, geometry, ...)        im2col + GEMM)
//   pool_forward / max_pool_backward /            max and average pooling    ops/nn.hpp
//     avg_pool_backward(b, geometry, ...)
//   batch_norm_forward / batch_norm_backward      batch normalization and    ops/batch_norm.hpp
//     (b, geometry, ...)                            its ReLU and residual
//   scatter_add_into(b, out, index, src, g)       index_add / scatter_add    ops/index.hpp
//   cumsum_rows(b, in, out, rows, length)         inclusive scans            ops/scan.hpp
//   sort_rows(b, in, indices, rows, length, desc) sort / topk's order        ops/scan.hpp
//   run_multi_tensor(b, list, update)             one optimizer step over    optim/optimizer.hpp
//                                                 many tensors
//   matvec_pair(b, a, lda, x, y, ax, aty, m, n)   A x and A^T y, A read once ops/matvec_pair.hpp
//   layer_norm_forward / layer_norm_backward      layer normalization (and   ops/layer_norm.hpp
//     (b, geometry, buffers)                        its residual form)
//
// What the verbs take (problems, geometries, reduction and softmax kinds, math modes,
// tensor lists) is described beside this file: backend/{gemm_problem, reduce_ops,
// softmax_ops, index_ops, nn_shapes, math_mode, tensor_list}.hpp (docs/layers.txt: the
// layer below the kernels and the backends themselves).
//
// In a file that nvcc does not compile (or without cuDNN, for convolution and pooling),
// backend/cuda/unavailable.hpp and backend/cuda/nn.hpp give the CUDA overloads bodies that
// stop compilation with an et: message instead. Operations hold no `#if` and no device
// test of their own.
//
// The stream a backend queues on is decided in one place as well: runtime/stream.hpp.
#pragma once

#include <cstdint>

#include "et/device.hpp"

namespace et::detail {

namespace cpu_backend {
struct Backend {
  /// GEMMs with a fused bias or activation epilogue (cuBLASLt): no, Eigen has none.
  static constexpr bool fuses_gemm_epilogues = false;
  /// GEMMs on half and bfloat16 operands: no, ops/linalg.hpp multiplies in float.
  static constexpr bool gemm_takes_16bit = false;
  /// matvec_pair's one pass runs at any width (a row is one vectorized loop).
  static constexpr std::int64_t matvec_pair_min_columns = 0;
};
}  // namespace cpu_backend

namespace cuda_backend {
template <int I>
struct Backend {
  static constexpr bool fuses_gemm_epilogues = true;
  static constexpr bool gemm_takes_16bit = true;
  /// Narrower matrices take two cuBLAS products: matvec_pair's kernel reads a row a warp.
  static constexpr std::int64_t matvec_pair_min_columns = 128;
};
}  // namespace cuda_backend

template <class D>
struct backend_of;
template <>
struct backend_of<Cpu> {
  using type = cpu_backend::Backend;
};
template <>
struct backend_of<Pinned> {  // host memory: computes like Cpu
  using type = cpu_backend::Backend;
};
template <int I>
struct backend_of<Cuda<I>> {
  using type = cuda_backend::Backend<I>;
};

template <class D>
using backend_t = typename backend_of<D>::type;

/// The backend tag of device D, the first argument of every backend call.
template <class D>
inline constexpr backend_t<D> backend{};

}  // namespace et::detail
