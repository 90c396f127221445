// et::matvec_pair on a CUDA device (ops/matvec_pair.hpp calls it through the backend tag,
// backend/backend.hpp): the launcher of kernels/et/kernels/matvec_pair.cuh, A read once for
// A x and A^T y (BiCG's two products). Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/matvec_pair.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>

#include "et/backend/cuda/launch.hpp"
#include "et/kernels/matvec_pair.cuh"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/memory.hpp"
#include "et/types.hpp"

namespace et::detail::cuda_backend {

/// ax = A x and aty = A^T y for a row-major A (m x n, row stride lda >= n; m, n > 0). The
/// rows are cut into runs so that about eight blocks a multiprocessor are in flight; the
/// partials (n/256 + the runs) * (m + n) values of the compute type, a few percent of A's
/// bytes, come from the caching allocator.
template <int I, class T>
void matvec_pair(Backend<I>, const T* a, std::int64_t lda, const T* x, const T* y, T* ax, T* aty, std::int64_t m,
                 std::int64_t n) {
  using C = compute_t<T>;
  const CudaCall call(I, "matvec_pair");
  constexpr int threads = 256;
  const std::int64_t tiles = (n + kernels::matvec_pair_columns - 1) / kernels::matvec_pair_columns;
  const std::int64_t wanted = std::int64_t{device_properties(I).multiprocessors} * 8;
  const std::int64_t runs_wanted = std::clamp<std::int64_t>((wanted + tiles - 1) / tiles, 1, (m + 7) / 8);
  const std::int64_t rows_per_block = ((m + runs_wanted - 1) / runs_wanted + 7) / 8 * 8;
  const std::int64_t runs = (m + rows_per_block - 1) / rows_per_block;  // at most 65535 (wanted is)
  const auto scratch = allocate_on<Cuda<I>>(static_cast<std::size_t>(tiles * m + runs * n) * sizeof(C));
  C* q_part = static_cast<C*>(scratch.get());
  C* s_part = q_part + tiles * m;
  launch<&kernels::matvec_pair_partials<T, C>>(call, dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(runs)),
                                              threads, 0, a, lda, x, y, m, n, rows_per_block, q_part, s_part);
  const std::int64_t finish_blocks =
      std::min<std::int64_t>((m + n + threads - 1) / threads, std::int64_t{device_properties(I).multiprocessors} * 16);
  launch<&kernels::matvec_pair_finish<T, C>>(call, static_cast<unsigned>(finish_blocks), threads, 0, q_part, s_part,
                                            ax, aty, m, n, tiles, runs);
}

}  // namespace et::detail::cuda_backend
