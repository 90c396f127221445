// Device code only: layer normalization's kernels (ops/layer_norm.hpp), over rows of `cols`
// packed values, with the contract backend/nn_shapes.hpp states. Included by
// include/et/backend/cuda/layer_norm.hpp; nvcc only.
//
//   forward    a warp a row: the row's sum (and, in the residual form, h = x + residual
//              written on the way), its squared deviations from the mean (a second pass,
//              read back from the cache: no cancellation), then y. V values a lane a load.
//   backward   a warp a row: mean(w dy) and mean(w dy xhat), then dx; each warp adds dy xhat
//              and dy into its own accumulators of the columns (shared memory, or global
//              scratch for rows too wide for it), which the block adds up in warp order
//              into its partial; layer_norm_columns adds the blocks' partials in block
//              order. No atomics: the same bits every run.
#pragma once

#include <cstdint>

#include "et/backend/nn_shapes.hpp"
#include "et/expr/readers.hpp"

namespace et::kernels {

template <class C>
__device__ __forceinline__ C warp_all_sum(C v) {
  for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

template <int V, class T>
__device__ __forceinline__ detail::Vec<T, V> load_values(const T* at) {
  return *reinterpret_cast<const detail::Vec<T, V>*>(at);
}

template <int V, class T>
__device__ __forceinline__ void store_values(T* at, const detail::Vec<T, V>& v) {
  *reinterpret_cast<detail::Vec<T, V>*>(at) = v;
}

inline constexpr int layer_norm_rows_per_block = 8;  ///< forward: a warp a row, 256 threads

template <class T, class P, class C, int V>
__global__ void __launch_bounds__(256)
    layer_norm_forward(detail::LayerNormGeometry g, detail::LayerNormForward<T, P, C> b) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t r = std::int64_t{blockIdx.x} * layer_norm_rows_per_block + threadIdx.x / 32;
  if (r >= g.rows) return;
  const std::int64_t base = r * g.cols;
  C sum = C(0);
  for (std::int64_t j = std::int64_t{lane} * V; j < g.cols; j += 32 * V) {
    auto v = load_values<V>(b.x + base + j);
    if (b.residual) {
      const auto res = load_values<V>(b.residual + base + j);
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = static_cast<T>(static_cast<C>(v.v[k]) + static_cast<C>(res.v[k]));
      store_values<V>(b.h + base + j, v);  // read back below by this lane alone
    }
#pragma unroll
    for (int k = 0; k < V; ++k) sum += static_cast<C>(v.v[k]);
  }
  const T* in = (b.residual ? b.h : b.x) + base;
  const C mean = warp_all_sum(sum) / static_cast<C>(g.cols);
  C squares = C(0);
  for (std::int64_t j = std::int64_t{lane} * V; j < g.cols; j += 32 * V) {
    const auto v = load_values<V>(in + j);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const C d = static_cast<C>(v.v[k]) - mean;
      squares += d * d;
    }
  }
  const C rstd = ::rsqrt(warp_all_sum(squares) / static_cast<C>(g.cols) + static_cast<C>(g.eps));
  for (std::int64_t j = std::int64_t{lane} * V; j < g.cols; j += 32 * V) {
    const auto v = load_values<V>(in + j);
    detail::Vec<T, V> y;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      C out = (static_cast<C>(v.v[k]) - mean) * rstd;
      if (b.weight) out *= static_cast<C>(b.weight[j + k]);
      if (b.bias) out += static_cast<C>(b.bias[j + k]);
      y.v[k] = static_cast<T>(out);
    }
    store_values<V>(b.y + base + j, y);
  }
  if (lane == 0 && b.mean) b.mean[r] = mean, b.rstd[r] = rstd;
}

inline constexpr int layer_norm_backward_warps = 4;

/// The accumulators' length for a row of cols values: whole chunks of 32 V columns.
template <int V>
__host__ __device__ constexpr std::int64_t layer_norm_padded(std::int64_t cols) {
  return (cols + 32 * V - 1) / (32 * V) * (32 * V);
}

/// Where column j's accumulator lies: within each chunk of 32 V columns, value k of lane l
/// (column l V + k) at k * 32 + l, so that a warp's 32 lanes touch 32 banks at once.
template <int V>
__device__ __forceinline__ std::int64_t layer_norm_slot(std::int64_t j) {
  const std::int64_t within = j % (32 * V);
  return j - within + (within % V) * 32 + within / V;
}

/// acc: this block's accumulators, [warps][2][padded] (dy xhat, then dy; padded =
/// layer_norm_padded<V>(cols), in slot order), in dynamic shared memory or, where `scratch`
/// is not null, at scratch + block * warps * 2 * padded. partial: [blocks][2][cols].
template <class T, class P, class C, int V>
__global__ void __launch_bounds__(32 * layer_norm_backward_warps)
    layer_norm_backward(detail::LayerNormGeometry g, detail::LayerNormBackward<T, P, C> b, C* scratch, C* partial) {
  extern __shared__ unsigned char shared_bytes[];
  constexpr int warps = layer_norm_backward_warps;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const bool columns = partial != nullptr;
  const std::int64_t cols = g.cols, padded = layer_norm_padded<V>(cols);
  C* acc = scratch ? scratch + std::int64_t{blockIdx.x} * warps * 2 * padded : reinterpret_cast<C*>(shared_bytes);
  if (columns) {
    for (std::int64_t j = threadIdx.x; j < warps * 2 * padded; j += blockDim.x) acc[j] = C(0);
    __syncthreads();
  }
  C* dw_acc = acc + std::int64_t{warp} * 2 * padded;
  C* db_acc = dw_acc + padded;
  for (std::int64_t r = std::int64_t{blockIdx.x} * warps + warp; r < g.rows; r += std::int64_t{gridDim.x} * warps) {
    const std::int64_t base = r * cols;
    const C m = b.mean[r], s = b.rstd[r];
    C mean_wdy = C(0), mean_wdy_xhat = C(0);
    if (b.dx) {
      C a = C(0), c = C(0);
      for (std::int64_t j = std::int64_t{lane} * V; j < cols; j += 32 * V) {
        const auto x = load_values<V>(b.x + base + j), dy = load_values<V>(b.dy + base + j);
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const C wdy = (b.weight ? static_cast<C>(b.weight[j + k]) : C(1)) * static_cast<C>(dy.v[k]);
          a += wdy;
          c += wdy * (static_cast<C>(x.v[k]) - m) * s;
        }
      }
      mean_wdy = warp_all_sum(a) / static_cast<C>(cols);
      mean_wdy_xhat = warp_all_sum(c) / static_cast<C>(cols);
    }
    for (std::int64_t j = std::int64_t{lane} * V; j < cols; j += 32 * V) {
      const auto x = load_values<V>(b.x + base + j), dy = load_values<V>(b.dy + base + j);
      detail::Vec<T, V> dx;
      detail::Vec<T, V> dh;
      if (b.dx && b.dh) dh = load_values<V>(b.dh + base + j);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const C xhat = (static_cast<C>(x.v[k]) - m) * s, d = static_cast<C>(dy.v[k]);
        if (b.dx) {
          const C wdy = (b.weight ? static_cast<C>(b.weight[j + k]) : C(1)) * d;
          C v = s * (wdy - mean_wdy - xhat * mean_wdy_xhat);
          if (b.dh) v += static_cast<C>(dh.v[k]);
          dx.v[k] = static_cast<T>(v);
        }
        if (columns) {
          const std::int64_t at = j - std::int64_t{lane} * V + k * 32 + lane;  // layer_norm_slot<V>(j + k)
          dw_acc[at] += d * xhat, db_acc[at] += d;
        }
      }
      if (b.dx) store_values<V>(b.dx + base + j, dx);
    }
  }
  if (!columns) return;
  __syncthreads();
  for (std::int64_t j = threadIdx.x; j < 2 * cols; j += blockDim.x) {
    const std::int64_t which = j / cols, at = which * padded + layer_norm_slot<V>(j % cols);
    C total = C(0);
#pragma unroll
    for (int w = 0; w < warps; ++w) total += acc[std::int64_t{w} * 2 * padded + at];
    partial[std::int64_t{blockIdx.x} * 2 * cols + j] = total;
  }
}

/// dweight[j] and dbias[j]: the blocks' partials added in block order.
template <class P, class C>
__global__ void __launch_bounds__(256)
    layer_norm_columns(const C* __restrict__ partial, std::int64_t blocks, std::int64_t cols, P* dweight, P* dbias) {
  const std::int64_t j = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  C dw = C(0), db = C(0);
  for (std::int64_t k = 0; k < blocks; ++k) {
    dw += partial[k * 2 * cols + j];
    db += partial[k * 2 * cols + cols + j];
  }
  if (dweight) dweight[j] = static_cast<P>(dw);
  if (dbias) dbias[j] = static_cast<P>(db);
}

}  // namespace et::kernels
