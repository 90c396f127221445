// Device code only: layer normalization's kernels (ops/layer_norm.hpp), over rows of `cols`
// packed values, with the contract backend/nn_shapes.hpp states. Included by
// include/et/backend/cuda/layer_norm.hpp; nvcc only.
//
// Rows of at most a few chunks of 32 V values (a transformer's 768 floats or bfloat16) are
// held in registers: every load of a row in flight at once, each value read once.
//   layer_norm_forward_rows   a warp a row: the row's sum (and, in the residual form, h = x +
//              residual written on the way), its squared deviations from the mean (from the
//              registers: no cancellation), then y.
//   layer_norm_backward_rows  warps stride over the rows: mean(w dy) and mean(w dy xhat),
//              then dx; each lane adds dy xhat and dy of its columns into registers, which
//              the block's warps add into shared memory in warp order for its partial.
// Wider rows loop over the row (layer_norm_forward: three passes, the later two read back
// from the cache; layer_norm_backward: per-warp column accumulators in shared memory, or in
// global scratch for rows too wide for it). layer_norm_columns adds the blocks' partials in
// a fixed order. No atomics: the same bits every run on a device.
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

/// The register kernels' widest rows: CH chunks of 32 V values a warp. The forward holds
/// a row's values (8 chunks: 1024 floats, 2048 bfloat16), the backward its column
/// accumulators too, two of the compute type per value (at most 64 floats, 32 doubles).
inline constexpr int layer_norm_forward_chunks = 8;
template <int V, class C>
inline constexpr int layer_norm_backward_chunks = 128 / (V * sizeof(C)) < 8 ? static_cast<int>(128 / (V * sizeof(C))) : 8;

/// Loads chunk t of a row into `to` where it lies inside the row (column (32 t + lane) V on).
template <int V, int CH, class T>
__device__ __forceinline__ void load_row(detail::Vec<T, V> (&to)[CH], const T* row, std::int64_t cols, int lane) {
#pragma unroll
  for (int t = 0; t < CH; ++t)
    if ((std::int64_t{t} * 32 + lane) * V < cols) to[t] = load_values<V>(row + (std::int64_t{t} * 32 + lane) * V);
}

/// The forward with the row in registers (cols <= 32 V CH): every load of a row in flight
/// at once, each value read from memory once (layer_norm_forward reads it three times).
template <class T, class P, class C, int V, int CH>
__global__ void __launch_bounds__(256)
    layer_norm_forward_rows(detail::LayerNormGeometry g, detail::LayerNormForward<T, P, C> b) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t r = std::int64_t{blockIdx.x} * layer_norm_rows_per_block + threadIdx.x / 32;
  if (r >= g.rows) return;
  const std::int64_t base = r * g.cols;
  const auto inside = [&](int t) { return (std::int64_t{t} * 32 + lane) * V < g.cols; };
  const auto column = [&](int t) { return (std::int64_t{t} * 32 + lane) * V; };
  detail::Vec<T, V> v[CH];
  load_row<V>(v, b.x + base, g.cols, lane);
  if (b.residual) {
    detail::Vec<T, V> res[CH];
    load_row<V>(res, b.residual + base, g.cols, lane);
#pragma unroll
    for (int t = 0; t < CH; ++t)
      if (inside(t)) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[t].v[k] = static_cast<T>(static_cast<C>(v[t].v[k]) + static_cast<C>(res[t].v[k]));
        store_values<V>(b.h + base + column(t), v[t]);
      }
  }
  C sum = C(0);
#pragma unroll
  for (int t = 0; t < CH; ++t)
    if (inside(t))
#pragma unroll
      for (int k = 0; k < V; ++k) sum += static_cast<C>(v[t].v[k]);
  const C mean = warp_all_sum(sum) / static_cast<C>(g.cols);
  C squares = C(0);
#pragma unroll
  for (int t = 0; t < CH; ++t)
    if (inside(t))
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const C d = static_cast<C>(v[t].v[k]) - mean;
        squares += d * d;
      }
  const C rstd = ::rsqrt(warp_all_sum(squares) / static_cast<C>(g.cols) + static_cast<C>(g.eps));
#pragma unroll
  for (int t = 0; t < CH; ++t)
    if (inside(t)) {
      detail::Vec<P, V> w, bias;
      if (b.weight) w = load_values<V>(b.weight + column(t));
      if (b.bias) bias = load_values<V>(b.bias + column(t));
      detail::Vec<T, V> y;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        C out = (static_cast<C>(v[t].v[k]) - mean) * rstd;
        if (b.weight) out *= static_cast<C>(w.v[k]);
        if (b.bias) out += static_cast<C>(bias.v[k]);
        y.v[k] = static_cast<T>(out);
      }
      store_values<V>(b.y + base + column(t), y);
    }
  if (lane == 0 && b.mean) b.mean[r] = mean, b.rstd[r] = rstd;
}

/// The backward with each row in registers and each lane's column accumulators there too
/// (cols <= 32 V CH): warps stride over the rows; at the end the block's warps add their
/// accumulators into shared memory one warp after another (a fixed order), and the block
/// writes its partial [2][cols] (dy xhat, then dy) for layer_norm_columns.
template <class T, class P, class C, int V, int CH>
__global__ void __launch_bounds__(32 * layer_norm_backward_warps)
    layer_norm_backward_rows(detail::LayerNormGeometry g, detail::LayerNormBackward<T, P, C> b, C* partial) {
  constexpr int warps = layer_norm_backward_warps;
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const std::int64_t cols = g.cols;
  const auto inside = [&](int t) { return (std::int64_t{t} * 32 + lane) * V < cols; };
  const auto column = [&](int t) { return (std::int64_t{t} * 32 + lane) * V; };
  C dw[CH][V], db[CH][V];
#pragma unroll
  for (int t = 0; t < CH; ++t)
#pragma unroll
    for (int k = 0; k < V; ++k) dw[t][k] = db[t][k] = C(0);
  for (std::int64_t r = std::int64_t{blockIdx.x} * warps + warp; r < g.rows; r += std::int64_t{gridDim.x} * warps) {
    const std::int64_t base = r * cols;
    detail::Vec<T, V> x[CH], dy[CH];
    load_row<V>(x, b.x + base, cols, lane);
    load_row<V>(dy, b.dy + base, cols, lane);
    const C m = b.mean[r], s = b.rstd[r];
    if (b.dx) {
      detail::Vec<P, V> w[CH];
      if (b.weight) load_row<V>(w, b.weight, cols, lane);
      C a = C(0), c = C(0);
#pragma unroll
      for (int t = 0; t < CH; ++t)
        if (inside(t))
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const C wdy = (b.weight ? static_cast<C>(w[t].v[k]) : C(1)) * static_cast<C>(dy[t].v[k]);
            a += wdy;
            c += wdy * (static_cast<C>(x[t].v[k]) - m) * s;
          }
      const C mean_wdy = warp_all_sum(a) / static_cast<C>(cols), mean_wdy_xhat = warp_all_sum(c) / static_cast<C>(cols);
      detail::Vec<T, V> dh[CH];
      if (b.dh) load_row<V>(dh, b.dh + base, cols, lane);
#pragma unroll
      for (int t = 0; t < CH; ++t)
        if (inside(t)) {
          detail::Vec<T, V> dx;
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const C xhat = (static_cast<C>(x[t].v[k]) - m) * s;
            const C wdy = (b.weight ? static_cast<C>(w[t].v[k]) : C(1)) * static_cast<C>(dy[t].v[k]);
            C v = s * (wdy - mean_wdy - xhat * mean_wdy_xhat);
            if (b.dh) v += static_cast<C>(dh[t].v[k]);
            dx.v[k] = static_cast<T>(v);
          }
          store_values<V>(b.dx + base + column(t), dx);
        }
    }
    if (partial)
#pragma unroll
      for (int t = 0; t < CH; ++t)
        if (inside(t))
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const C d = static_cast<C>(dy[t].v[k]);
            dw[t][k] += d * (static_cast<C>(x[t].v[k]) - m) * s;
            db[t][k] += d;
          }
  }
  if (partial == nullptr) return;  // the same for every thread of the launch
  __shared__ C acc[2 * CH * 32 * V];
  for (int w = 0; w < warps; ++w) {
    if (warp == w)
#pragma unroll
      for (int t = 0; t < CH; ++t)
        if (inside(t))
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const std::int64_t j = column(t) + k;
            acc[j] = w == 0 ? dw[t][k] : acc[j] + dw[t][k];
            acc[cols + j] = w == 0 ? db[t][k] : acc[cols + j] + db[t][k];
          }
    __syncthreads();
  }
  for (std::int64_t j = threadIdx.x; j < 2 * cols; j += blockDim.x) partial[std::int64_t{blockIdx.x} * 2 * cols + j] = acc[j];
}

/// dweight[j] and dbias[j]: the blocks' partials [blocks][2][cols] added up, 32 columns a
/// block: row y of the block's threads adds partials y, y + 8, ... in order, then row 0
/// adds the eight sums in order (the same bits every run on a device).
template <class P, class C>
__global__ void __launch_bounds__(256)
    layer_norm_columns(const C* __restrict__ partial, std::int64_t blocks, std::int64_t cols, P* dweight, P* dbias) {
  __shared__ C sums[2][8][32];
  const int x = static_cast<int>(threadIdx.x % 32), y = static_cast<int>(threadIdx.x / 32);
  const std::int64_t j = std::int64_t{blockIdx.x} * 32 + x;
  C dw = C(0), db = C(0);
  if (j < cols)
    for (std::int64_t k = y; k < blocks; k += 8) {
      dw += partial[k * 2 * cols + j];
      db += partial[k * 2 * cols + cols + j];
    }
  sums[0][y][x] = dw, sums[1][y][x] = db;
  __syncthreads();
  if (y != 0 || j >= cols) return;
  for (int k = 1; k < 8; ++k) dw += sums[0][k][x], db += sums[1][k][x];
  if (dweight) dweight[j] = static_cast<P>(dw);
  if (dbias) dbias[j] = static_cast<P>(db);
}

}  // namespace et::kernels
