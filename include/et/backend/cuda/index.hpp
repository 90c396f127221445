// scatter_add on a CUDA device (ops/index.hpp): the launcher of kernels/et/kernels/index.cuh.
// Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/index.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>

#include "et/backend/cuda/elementwise.hpp"
#include "et/kernels/index.cuh"

namespace et::detail::cuda_backend {

template <int I, class T, int R>
void scatter_add_into(Backend<I>, T* out, const std::int64_t* index, const T* src, const ScatterGeometry<R>& g) {
  const CudaCall call(I, "scatter_add");
  constexpr int threads = 256;
  const std::int64_t wanted = (g.count + threads - 1) / threads;
  const int blocks = static_cast<int>(std::min<std::int64_t>(wanted, std::int64_t{device_properties(I).multiprocessors} * 32));
  launch<&kernels::scatter_add<T, R>>(call, blocks, threads, 0, out, index, src, g);
}

}  // namespace et::detail::cuda_backend
