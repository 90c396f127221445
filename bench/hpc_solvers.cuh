// bench/hpc.cu's hand-written CUDA for the solvers and matrix-vector cases: the limits
// etensor's statements are set beside.
//
//   CG on the 2-D Poisson problem (matrix-free 5-point Laplacian on an n x n interior with a
//   zero halo), three fused kernels an iteration, as a careful CUDA code writes them:
//     cg_stencil_dot   Ap = A p on the interior, pAp += p . Ap        (block sums, atomicAdd)
//     cg_update_dot    alpha = rr / pAp; x += alpha p; r -= alpha Ap; rr_next += r . r
//     cg_direction     p = r + (rr_next / rr) p
//   The scalars live on the device; each kernel zeroes the accumulator the next one but one
//   adds into, so nothing waits for the host. rr and rr_next alternate between iterations.
//
//   bicg: s = A^T r and q = A p reading A once (a warp a row at a time: q's row sums by
//   shuffles, s's column sums in registers, then shared memory, then atomicAdd).
#pragma once

#include <cstdint>

namespace hpc {

/// A block's float sum, valid in thread 0 (256 threads).
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warps[8];
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < 8 ? warps[threadIdx.x] : 0.0f;
  if (threadIdx.x < 32)
    for (int d = 4; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  __syncthreads();
  return v;
}

/// Interior element e (row-major over the n x n interior) of a (n + 2) x (n + 2) array.
__device__ __forceinline__ std::int64_t interior(std::int64_t e, int n) {
  return (e / n + 1) * (n + 2) + e % n + 1;
}

__global__ void __launch_bounds__(256)
    cg_stencil_dot(const float* __restrict__ p, float* __restrict__ ap, float* pap, float* zero_next, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *zero_next = 0.0f;
  const std::int64_t count = static_cast<std::int64_t>(n) * n, pitch = n + 2;
  float dot = 0.0f;
  for (std::int64_t e = blockIdx.x * 256ll + threadIdx.x; e < count; e += gridDim.x * 256ll) {
    const std::int64_t at = interior(e, n);
    const float v = 4.0f * p[at] - p[at - 1] - p[at + 1] - p[at - pitch] - p[at + pitch];
    ap[at] = v;
    dot += p[at] * v;
  }
  dot = block_sum(dot);
  if (threadIdx.x == 0) atomicAdd(pap, dot);
}

__global__ void __launch_bounds__(256)
    cg_update_dot(float* __restrict__ x, float* __restrict__ r, const float* __restrict__ p, const float* __restrict__ ap,
                  const float* rr, const float* pap, float* rr_next, std::int64_t total) {
  const float alpha = *rr / *pap;
  float dot = 0.0f;
  for (std::int64_t i = blockIdx.x * 256ll + threadIdx.x; i < total; i += gridDim.x * 256ll) {
    x[i] += alpha * p[i];
    const float v = r[i] - alpha * ap[i];
    r[i] = v;
    dot += v * v;
  }
  dot = block_sum(dot);
  if (threadIdx.x == 0) atomicAdd(rr_next, dot);
}

__global__ void __launch_bounds__(256)
    cg_direction(float* __restrict__ p, const float* __restrict__ r, const float* rr, const float* rr_next, float* pap,
                 std::int64_t total) {
  const float beta = *rr_next / *rr;
  for (std::int64_t i = blockIdx.x * 256ll + threadIdx.x; i < total; i += gridDim.x * 256ll) p[i] = r[i] + beta * p[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) *pap = 0.0f;  // cg_update_dot read it; the next stencil adds into it
}

/// bicg's two products in one pass over A (n x n, row-major): 8 warps a block, each warp
/// `rows_per_warp` consecutive rows of 256 columns.
inline constexpr int bicg_rows_per_warp = 4;
__global__ void __launch_bounds__(256) bicg(const float* __restrict__ a, const float* __restrict__ r,
                                            const float* __restrict__ p, float* s, float* q, int n) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int j0 = blockIdx.x * 256, i0 = (blockIdx.y * 8 + warp) * bicg_rows_per_warp;
  float pj[8], sj[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const int j = j0 + lane + 32 * k;
    pj[k] = j < n ? p[j] : 0.0f;
    sj[k] = 0.0f;
  }
  for (int i = i0; i < i0 + bicg_rows_per_warp && i < n; ++i) {
    const float ri = r[i];
    float qi = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int j = j0 + lane + 32 * k;
      const float v = j < n ? a[static_cast<std::int64_t>(i) * n + j] : 0.0f;
      qi += v * pj[k];
      sj[k] += v * ri;
    }
    for (int d = 16; d > 0; d /= 2) qi += __shfl_down_sync(0xffffffffu, qi, d);
    if (lane == 0) atomicAdd(&q[i], qi);
  }
  __shared__ float columns[8][256];
#pragma unroll
  for (int k = 0; k < 8; ++k) columns[warp][lane + 32 * k] = sj[k];
  __syncthreads();
  const int j = j0 + static_cast<int>(threadIdx.x);
  if (j < n) {
    float total = 0.0f;
    for (int w = 0; w < 8; ++w) total += columns[w][threadIdx.x];
    atomicAdd(&s[j], total);
  }
}

}  // namespace hpc
