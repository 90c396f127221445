// bench/hpc.cu's hand-written CUDA kernels: the limits etensor's stencils are set beside.
// Each case is a functor computing one output element at (i, j) or (i, j, k) of the
// interior from raw pointers and pitches; two launch shapes run any of them:
//
//   grid   a 2-D (3-D: 2-D over the last two axes, a loop over the first) grid of 32 x 8
//          threads, one element a thread: the shape of PolyBench/GPU's and RAJAPerf's
//          straightforward kernels;
//   rows   the shape of etensor's rows launch: a warp takes a run of 32 * U consecutive
//          elements of one row (lane l the ones at l, l + 32, ...), a block's eight warps
//          eight consecutive rows, all loads issued before the stores.
#pragma once

#include <cstdint>

namespace hpc {

inline constexpr int warps_per_block = 8;

/// A functor's elements over the interior [lo, hi) of each axis, `grid` shape (2-D).
template <class F>
__global__ void __launch_bounds__(256) grid2d(F f, int lo0, int hi0, int lo1, int hi1) {
  const int j = lo1 + static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int i = lo0 + static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (i < hi0 && j < hi1) f.store(i, j, f(i, j));
}

/// 3-D: blockIdx.z walks the first axis.
template <class F>
__global__ void __launch_bounds__(256) grid3d(F f, int lo0, int hi0, int lo1, int hi1, int lo2, int hi2) {
  const int k = lo2 + static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int j = lo1 + static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  for (int i = lo0 + static_cast<int>(blockIdx.z); i < hi0; i += static_cast<int>(gridDim.z))
    if (j < hi1 && k < hi2) f.store(i, j, k, f(i, j, k));
}

/// `rows` shape, 2-D: rows [lo0, hi0) of columns [lo1, hi1).
template <int U, class F>
__global__ void __launch_bounds__(256) rows2d(F f, int lo0, int hi0, int lo1, int hi1) {
  const int runs = (hi1 - lo1 + 32 * U - 1) / (32 * U);
  const int i = lo0 + static_cast<int>(blockIdx.x) / runs * warps_per_block + static_cast<int>(threadIdx.x) / 32;
  const int j0 = lo1 + static_cast<int>(blockIdx.x) % runs * 32 * U + static_cast<int>(threadIdx.x) % 32;
  if (i >= hi0) return;
  float v[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (j0 + 32 * u < hi1) v[u] = f(i, j0 + 32 * u);
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (j0 + 32 * u < hi1) f.store(i, j0 + 32 * u, v[u]);
}

/// `rows` shape, 3-D: the rows of every plane [lo0, hi0) x [lo1, hi1), flattened.
template <int U, class F>
__global__ void __launch_bounds__(256) rows3d(F f, int lo0, int hi0, int lo1, int hi1, int lo2, int hi2) {
  const int runs = (hi2 - lo2 + 32 * U - 1) / (32 * U);
  const int rows1 = hi1 - lo1;
  const int row = static_cast<int>(blockIdx.x) / runs * warps_per_block + static_cast<int>(threadIdx.x) / 32;
  const int i = lo0 + row / rows1, j = lo1 + row % rows1;
  const int k0 = lo2 + static_cast<int>(blockIdx.x) % runs * 32 * U + static_cast<int>(threadIdx.x) % 32;
  if (i >= hi0) return;
  float v[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (k0 + 32 * u < hi2) v[u] = f(i, j, k0 + 32 * u);
#pragma unroll
  for (int u = 0; u < U; ++u)
    if (k0 + 32 * u < hi2) f.store(i, j, k0 + 32 * u, v[u]);
}

template <class F>
void launch_grid2d(F f, int lo0, int hi0, int lo1, int hi1, cudaStream_t s) {
  const dim3 block(32, 8), grid((hi1 - lo1 + 31) / 32, (hi0 - lo0 + 7) / 8);
  grid2d<<<grid, block, 0, s>>>(f, lo0, hi0, lo1, hi1);
}
template <class F>
void launch_grid3d(F f, int lo0, int hi0, int lo1, int hi1, int lo2, int hi2, cudaStream_t s) {
  const dim3 block(32, 8), grid((hi2 - lo2 + 31) / 32, (hi1 - lo1 + 7) / 8, std::min(hi0 - lo0, 65535));
  grid3d<<<grid, block, 0, s>>>(f, lo0, hi0, lo1, hi1, lo2, hi2);
}
template <int U, class F>
void launch_rows2d(F f, int lo0, int hi0, int lo1, int hi1, cudaStream_t s) {
  const int runs = (hi1 - lo1 + 32 * U - 1) / (32 * U);
  const int blocks = (hi0 - lo0 + warps_per_block - 1) / warps_per_block * runs;
  rows2d<U><<<blocks, 256, 0, s>>>(f, lo0, hi0, lo1, hi1);
}
template <int U, class F>
void launch_rows3d(F f, int lo0, int hi0, int lo1, int hi1, int lo2, int hi2, cudaStream_t s) {
  const int runs = (hi2 - lo2 + 32 * U - 1) / (32 * U);
  const long rows = static_cast<long>(hi0 - lo0) * (hi1 - lo1);
  const int blocks = static_cast<int>((rows + warps_per_block - 1) / warps_per_block * runs);
  rows3d<U><<<blocks, 256, 0, s>>>(f, lo0, hi0, lo1, hi1, lo2, hi2);
}

// ---- The cases' element functions ----------------------------------------------------

/// jacobi-2d's sweep: b = 0.2 (a + its four neighbours).
struct Jacobi2d {
  const float* __restrict__ a;
  float* __restrict__ b;
  int n;
  __device__ float operator()(int i, int j) const {
    const float* p = a + static_cast<std::int64_t>(i) * n + j;
    return 0.2f * (p[0] + p[-1] + p[1] + p[n] + p[-n]);
  }
  __device__ void store(int i, int j, float v) const { b[static_cast<std::int64_t>(i) * n + j] = v; }
};

/// The 3x3 convolution of PolyBench's 2DCONV (its coefficients).
struct Conv2d9 {
  const float* __restrict__ a;
  float* __restrict__ b;
  int n;
  __device__ float operator()(int i, int j) const {
    const float* p = a + static_cast<std::int64_t>(i) * n + j;
    return 0.2f * p[-n - 1] + 0.5f * p[-1] - 0.8f * p[n - 1] - 0.3f * p[-n] + 0.6f * p[0] - 0.9f * p[n] +
           0.4f * p[-n + 1] + 0.7f * p[1] + 0.1f * p[n + 1];
  }
  __device__ void store(int i, int j, float v) const { b[static_cast<std::int64_t>(i) * n + j] = v; }
};

/// The 15-term 3-D convolution of PolyBench's 3DCONV (its coefficients and terms).
struct Conv3d15 {
  const float* __restrict__ a;
  float* __restrict__ b;
  int n;
  __device__ float operator()(int i, int j, int k) const {
    const std::int64_t pj = n, pi = static_cast<std::int64_t>(n) * n;
    const float* p = a + i * pi + j * pj + k;
    const auto at = [&](int di, int dj, int dk) { return p[di * pi + dj * pj + dk]; };
    return 2.0f * at(-1, -1, -1) + 4.0f * at(1, -1, -1) + 5.0f * at(-1, -1, -1) + 7.0f * at(1, -1, -1) -
           8.0f * at(-1, -1, -1) + 10.0f * at(1, -1, -1) - 3.0f * at(0, -1, 0) + 6.0f * at(0, 0, 0) -
           9.0f * at(0, 1, 0) + 2.0f * at(-1, -1, 1) + 4.0f * at(1, -1, 1) + 5.0f * at(-1, 0, 1) +
           7.0f * at(1, 0, 1) - 8.0f * at(-1, 1, 1) + 10.0f * at(1, 1, 1);
  }
  __device__ void store(int i, int j, int k, float v) const {
    b[(static_cast<std::int64_t>(i) * n + j) * n + k] = v;
  }
};

/// heat-3d's sweep (RAJAPerf's HEAT_3D): b = a + 0.125 (second differences along each axis).
struct Heat3d {
  const float* __restrict__ a;
  float* __restrict__ b;
  int n;
  __device__ float operator()(int i, int j, int k) const {
    const std::int64_t pj = n, pi = static_cast<std::int64_t>(n) * n;
    const float* p = a + i * pi + j * pj + k;
    return 0.125f * (p[pi] - 2.0f * p[0] + p[-pi]) + 0.125f * (p[pj] - 2.0f * p[0] + p[-pj]) +
           0.125f * (p[1] - 2.0f * p[0] + p[-1]) + p[0];
  }
  __device__ void store(int i, int j, int k, float v) const {
    b[(static_cast<std::int64_t>(i) * n + j) * n + k] = v;
  }
};

/// fdtd-2d's three updates, in place (each reads only elements it does not write).
struct FdtdEy {  // ey[i][j] -= 0.5 (hz[i][j] - hz[i-1][j]), i >= 1
  float* __restrict__ ey;
  const float* __restrict__ hz;
  int n;
  __device__ float operator()(int i, int j) const {
    const std::int64_t at = static_cast<std::int64_t>(i) * n + j;
    return ey[at] - 0.5f * (hz[at] - hz[at - n]);
  }
  __device__ void store(int i, int j, float v) const { ey[static_cast<std::int64_t>(i) * n + j] = v; }
};
struct FdtdEx {  // ex[i][j] -= 0.5 (hz[i][j] - hz[i][j-1]), j >= 1
  float* __restrict__ ex;
  const float* __restrict__ hz;
  int n;
  __device__ float operator()(int i, int j) const {
    const std::int64_t at = static_cast<std::int64_t>(i) * n + j;
    return ex[at] - 0.5f * (hz[at] - hz[at - 1]);
  }
  __device__ void store(int i, int j, float v) const { ex[static_cast<std::int64_t>(i) * n + j] = v; }
};
struct FdtdHz {  // hz[i][j] -= 0.7 (ex[i][j+1] - ex[i][j] + ey[i+1][j] - ey[i][j]), i, j < n - 1
  float* __restrict__ hz;
  const float* __restrict__ ex;
  const float* __restrict__ ey;
  int n;
  __device__ float operator()(int i, int j) const {
    const std::int64_t at = static_cast<std::int64_t>(i) * n + j;
    return hz[at] - 0.7f * (ex[at + 1] - ex[at] + ey[at + n] - ey[at]);
  }
  __device__ void store(int i, int j, float v) const { hz[static_cast<std::int64_t>(i) * n + j] = v; }
};

}  // namespace hpc
