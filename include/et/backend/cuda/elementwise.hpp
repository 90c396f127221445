// How an elementwise assignment runs on a CUDA device: exactly one kernel launch on the
// device's stream, whatever the size of the expression tree. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/elementwise.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "et/expr/evaluator.hpp"
#include "et/kernels/elementwise.cuh"
#include "et/runtime/device_runtime.hpp"

namespace et::detail::cuda_backend {

inline constexpr int block_threads = 256;

/// Elements per 16-byte access of the output type.
template <class T>
inline constexpr int vector_width = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

inline bool aligned_for(const void* p, std::size_t group_bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % std::min<std::size_t>(group_bytes, 16) == 0;
}

/// True when every tensor operand can be read V elements at a time (16-byte aligned, or
/// V*sizeof aligned for narrower groups).
template <int V, class E>
bool leaves_aligned(const E& expr) {
  bool ok = true;
  for_each_leaf(expr, [&](const auto& leaf) {
    using Leaf = std::remove_cvref_t<decltype(leaf)>;
    if constexpr (is_tensor_v<Leaf>) ok = ok && aligned_for(leaf.data(), sizeof(typename Leaf::value_type) * V);
  });
  return ok;
}

/// True when the output and every tensor operand can be accessed V elements at a time.
template <int V, class T, int R, class D, class E>
bool vector_aligned(const Tensor<T, R, D>& dst, const E& expr) {
  return aligned_for(dst.data(), sizeof(T) * V) && leaves_aligned<V>(expr);
}

template <int I, class T, int R, class E>
void run_elementwise(const Tensor<T, R, Cuda<I>>& dst, const E& expr) {
  const ElementwisePlan plan = plan_elementwise(dst, expr);
  DeviceGuard guard(I);
  const cudaStream_t stream = default_stream(I);
  constexpr int V = vector_width<T>;
  const bool vectorized = plan.linear && vector_aligned<V>(dst, expr);
  const std::int64_t n = dst.numel();
  const std::int64_t per_thread = vectorized ? V : plan.linear ? 1 : kernels::strided_unroll;
  const std::int64_t work = (n + per_thread - 1) / per_thread;
  // One thread per unit of work (a vector, an element, or strided_unroll elements; as
  // many blocks as it takes, up to the grid limit): plenty of resident blocks hide memory
  // latency behind other blocks' arithmetic.
  const int blocks = static_cast<int>(std::clamp<std::int64_t>((work + block_threads - 1) / block_threads, 1,
                                                               std::numeric_limits<std::int32_t>::max()));
  // Thread indices reach one block past the work: keep that margin below 2^31 too.
  constexpr std::int64_t margin = std::int64_t{block_threads} * 16;
  with_index_type(plan.max_index + margin <= std::numeric_limits<std::int32_t>::max(), [&](auto index_tag) {
    using Index = decltype(index_tag);
    const auto reader = make_reader<R, Index>(expr, dst.shape());
    const auto writer = make_writer<Index>(dst);
    if (plan.linear) {
      kernels::elementwise_linear<V><<<blocks, block_threads, 0, stream>>>(writer, reader, static_cast<Index>(n),
                                                                            vectorized);
    } else {
      kernels::elementwise_strided<<<blocks, block_threads, 0, stream>>>(writer, reader, to_coord<Index>(dst.shape()),
                                                                        static_cast<Index>(n));
    }
  });
  ET_CUDA_CHECK(cudaGetLastError());
}

}  // namespace et::detail::cuda_backend
