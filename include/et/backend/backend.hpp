// The one place that decides which code computes on a device. Each kind of device has a
// backend tag, and every operation reaches its device through the tag alone:
//
//   run_elementwise(backend<D>, dst, expr);        // expr/assign.hpp
//   reduce_into(backend<D>, Op{}, expr, out);      // ops/reduce.hpp
//   gemm(backend<D>, problem, mode, epilogue, bias) // ops/linalg.hpp
//   conv_forward(backend<D>, geometry, ...);       // ops/nn.hpp
//
// The call is unqualified, so argument-dependent lookup picks the overload in the tag's
// namespace:
//
//   cpu_backend  (Cpu, Pinned)  OpenMP loops, Eigen GEMMs, im2col convolution: backend/cpu/
//   cuda_backend (Cuda<I>)      etensor's kernels, cuBLASLt, cuDNN:            backend/cuda/
//
// In a file that nvcc does not compile (or without cuDNN, for convolution and pooling),
// backend/cuda/unavailable.hpp and backend/cuda/nn.hpp give the CUDA overloads bodies that
// stop compilation with an et: message instead. Operations hold no `#if` and no device
// test of their own; a new kind of device is one tag here and its overloads.
//
// The stream a backend queues on is decided in one place as well: runtime/stream.hpp.
#pragma once

#include "et/device.hpp"

namespace et::detail {

namespace cpu_backend {
struct Backend {
  /// GEMMs with a fused bias or activation epilogue (cuBLASLt): no, Eigen has none.
  static constexpr bool fuses_gemm_epilogues = false;
  /// GEMMs on half and bfloat16 operands: no, ops/linalg.hpp multiplies in float.
  static constexpr bool gemm_takes_16bit = false;
};
}  // namespace cpu_backend

namespace cuda_backend {
template <int I>
struct Backend {
  static constexpr bool fuses_gemm_epilogues = true;
  static constexpr bool gemm_takes_16bit = true;
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
