// Device code only: et::matvec_pair's kernels (ops/matvec_pair.hpp), A x and A^T y from one
// pass over a row-major A of m rows and n columns (row stride lda). Included by
// include/et/backend/cuda/matvec_pair.hpp; nvcc only.
//
// A block of 8 warps takes a tile of 256 columns and a run of rows; each warp reads a row's
// 256 values (32 consecutive ones a load) and keeps its x values and its columns' partial
// A^T y in registers. A row's partial of A x (this tile's columns) is summed by shuffles and
// written to q_part[tile][row]; the columns' partials of A^T y (this run's rows), summed over
// the warps in shared memory, to s_part[run][column]. A second kernel adds up the partials
// in a fixed order: the result does not depend on timing (no atomics), and nothing need be
// zeroed first.
#pragma once

#include <cstdint>

namespace et::kernels {

inline constexpr int matvec_pair_columns = 256;  ///< columns a block takes (8 per lane)

template <class T, class C>
__global__ void __launch_bounds__(256)
    matvec_pair_partials(const T* __restrict__ a, std::int64_t lda, const T* __restrict__ x,
                         const T* __restrict__ y, std::int64_t m, std::int64_t n, std::int64_t rows_per_block,
                         C* __restrict__ q_part, C* __restrict__ s_part) {
  constexpr int per_lane = matvec_pair_columns / 32;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const std::int64_t j0 = std::int64_t{blockIdx.x} * matvec_pair_columns;
  const std::int64_t i_begin = std::int64_t{blockIdx.y} * rows_per_block;
  const std::int64_t i_end = i_begin + rows_per_block < m ? i_begin + rows_per_block : m;
  C xj[per_lane], sj[per_lane];
#pragma unroll
  for (int k = 0; k < per_lane; ++k) {
    const std::int64_t j = j0 + lane + 32 * k;
    xj[k] = j < n ? static_cast<C>(x[j]) : C(0);
    sj[k] = C(0);
  }
  for (std::int64_t i = i_begin + warp; i < i_end; i += 8) {
    const T* row = a + i * lda;
    const C yi = static_cast<C>(y[i]);
    C qi = C(0);
#pragma unroll
    for (int k = 0; k < per_lane; ++k) {
      const std::int64_t j = j0 + lane + 32 * k;
      const C v = j < n ? static_cast<C>(row[j]) : C(0);
      qi += v * xj[k];
      sj[k] += v * yi;
    }
    for (int d = 16; d > 0; d /= 2) qi += __shfl_xor_sync(0xffffffffu, qi, d);
    if (lane == 0) q_part[std::int64_t{blockIdx.x} * m + i] = qi;
  }
  __shared__ C columns[8][matvec_pair_columns];
#pragma unroll
  for (int k = 0; k < per_lane; ++k) columns[warp][lane + 32 * k] = sj[k];
  __syncthreads();
  const std::int64_t j = j0 + threadIdx.x;
  if (j < n) {
    C total = C(0);
#pragma unroll
    for (int w = 0; w < 8; ++w) total += columns[w][threadIdx.x];
    s_part[std::int64_t{blockIdx.y} * n + j] = total;
  }
}

/// ax[i] = the sum of q_part[0..tiles)[i]; aty[j] = the sum of s_part[0..runs)[j], in order.
template <class T, class C>
__global__ void __launch_bounds__(256)
    matvec_pair_finish(const C* __restrict__ q_part, const C* __restrict__ s_part, T* __restrict__ ax,
                       T* __restrict__ aty, std::int64_t m, std::int64_t n, std::int64_t tiles, std::int64_t runs) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t t = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; t < m + n; t += stride) {
    C total = C(0);
    if (t < m) {
      for (std::int64_t k = 0; k < tiles; ++k) total += q_part[k * m + t];
      ax[t] = static_cast<T>(total);
    } else {
      const std::int64_t j = t - m;
      for (std::int64_t k = 0; k < runs; ++k) total += s_part[k * n + j];
      aty[j] = static_cast<T>(total);
    }
  }
}

}  // namespace et::kernels
