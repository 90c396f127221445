// Device code only: reduction kernels. Each reads its input through an evaluator program,
// so a reduction consumes an elementwise expression without materializing it. Blocks
// combine with warp shuffles (block_reduce below), as CUB's BlockReduce does; CUB itself
// is not included because its headers alone cost about 6 s of compile time in every
// translation unit that includes et/core.hpp. Included by include/et/backend/cuda/reduce.hpp.
#pragma once

#include <cstring>

#include "et/backend/reduce_ops.hpp"
#include "et/eval/evaluator.hpp"
#include "et/kernels/elementwise.cuh"

namespace et::kernels {

/// How a reduction kernel reads its input.
enum class ReadMode { vector, linear, strided };

/// __shfl_down_sync for any trivially copyable value, one 32-bit word at a time.
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, int delta) {
  constexpr int words = (sizeof(T) + 3) / 4;
  unsigned buffer[words] = {};
  std::memcpy(buffer, &value, sizeof(T));
  ET_UNROLL
  for (int w = 0; w < words; ++w) buffer[w] = __shfl_down_sync(0xffffffffu, buffer[w], delta);
  T out;
  std::memcpy(&out, buffer, sizeof(T));
  return out;
}

/// Combines the accumulators of a whole block (Threads a multiple of 32, at most 1024) in
/// thread order; the result is valid in thread 0. Every thread of the block must call it.
template <class Op, int Threads>
__device__ __forceinline__ typename Op::acc_type block_reduce(typename Op::acc_type acc) {
  using Acc = typename Op::acc_type;
  static_assert(Threads % 32 == 0 && Threads <= 1024);
  constexpr int warps = Threads / 32;
  __shared__ Acc warp_results[warps];
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  ET_UNROLL
  for (int delta = 16; delta > 0; delta /= 2) {
    const Acc other = shuffle_down(acc, delta);
    if (lane + delta < 32) acc = Op::combine(acc, other);
  }
  if (lane == 0) warp_results[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < warps ? warp_results[lane] : Op::identity();
    ET_UNROLL
    for (int delta = 16; delta > 0; delta /= 2) {
      const Acc other = shuffle_down(acc, delta);
      if (lane + delta < 32) acc = Op::combine(acc, other);
    }
  }
  __syncthreads();  // warp_results may be reused by the caller's next call
  return acc;
}

template <class Op, class Reader, int R, class Index>
__device__ __forceinline__ typename Op::acc_type lift_element(const Reader& in, ReadMode mode, Index i,
                                                               const detail::Coord<R, Index>& extents,
                                                               std::int64_t position) {
  if (mode == ReadMode::strided) return Op::lift(in.strided(i, detail::unravel<R, Index>(i, extents)), position);
  return Op::lift(in.linear(i), position);
}

template <class Op, int V, class Index, class Reader>
__device__ __forceinline__ typename Op::acc_type combine_vector(typename Op::acc_type acc, const Reader& in, Index i,
                                                                 std::int64_t position) {
  const auto values = in.template vector<V>(i);
  ET_UNROLL
  for (int k = 0; k < V; ++k) acc = Op::combine(acc, Op::lift(values.v[k], position + k));
  return acc;
}

/// Stage 1 of a full reduction: each block reduces a grid-strided share of the n elements
/// into partials[blockIdx.x]; with no partials (one block) it writes the result to *out
/// itself. In vector mode four vectors per thread are in flight.
template <class Op, int Threads, int V, class Reader, int R, class Index, class Out>
__global__ void __launch_bounds__(Threads)
    reduce_all_blocks(Reader in, Index n, ReadMode mode, detail::Coord<R, Index> extents,
                      typename Op::acc_type* partials, Out* out) {
  using Acc = typename Op::acc_type;
  const Index first = static_cast<Index>(blockIdx.x) * Threads + static_cast<Index>(threadIdx.x);
  const Index stride = static_cast<Index>(gridDim.x) * Threads;
  Acc acc = Op::identity();
  Index tail = 0;
  if (mode == ReadMode::vector) {
    const Index vectors = n / V;
    Index v = first;
    for (; v + 3 * stride < vectors; v += 4 * stride) {
      const auto a = in.template vector<V>(v * V);
      const auto b = in.template vector<V>((v + stride) * V);
      const auto c = in.template vector<V>((v + 2 * stride) * V);
      const auto d = in.template vector<V>((v + 3 * stride) * V);
      ET_UNROLL
      for (int k = 0; k < V; ++k) {
        acc = Op::combine(acc, Op::lift(a.v[k], v * V + k));
        acc = Op::combine(acc, Op::lift(b.v[k], (v + stride) * V + k));
        acc = Op::combine(acc, Op::lift(c.v[k], (v + 2 * stride) * V + k));
        acc = Op::combine(acc, Op::lift(d.v[k], (v + 3 * stride) * V + k));
      }
    }
    for (; v < vectors; v += stride) acc = combine_vector<Op, V>(acc, in, v * V, static_cast<std::int64_t>(v) * V);
    tail = vectors * V;
  }
  for (Index i = tail + first; i < n; i = next_index(i, stride, n))
    acc = Op::combine(acc, lift_element<Op>(in, mode, i, extents, static_cast<std::int64_t>(i)));
  acc = block_reduce<Op, Threads>(acc);
  if (threadIdx.x != 0) return;
  if (partials) partials[blockIdx.x] = acc;
  else *out = static_cast<Out>(Op::finish(acc, n));
}

/// Stage 2 of a full reduction: one block combines the partials and writes the result.
template <class Op, int Threads, class Out>
__global__ void __launch_bounds__(Threads)
    reduce_all_finish(const typename Op::acc_type* partials, int count, std::int64_t n, Out* out) {
  using Acc = typename Op::acc_type;
  Acc acc = Op::identity();
  for (int b = static_cast<int>(threadIdx.x); b < count; b += Threads) acc = Op::combine(acc, partials[b]);
  acc = block_reduce<Op, Threads>(acc);
  if (threadIdx.x == 0) *out = static_cast<Out>(Op::finish(acc, n));
}

/// Reduces each row of a [rows, length] view (the innermost axis): one block per row,
/// threads striding along it (V-wide accesses in vector mode), block_reduce to finish.
template <class Op, int Threads, int V, class Reader, int R, class Index, class Out>
__global__ void __launch_bounds__(Threads)
    reduce_rows(Reader in, Index rows, Index length, ReadMode mode, detail::Coord<R, Index> extents, Out* out) {
  using Acc = typename Op::acc_type;
  for (Index row = static_cast<Index>(blockIdx.x); row < rows; row += static_cast<Index>(gridDim.x)) {
    const Index base = row * length;
    Acc acc = Op::identity();
    if (mode == ReadMode::vector) {
#pragma unroll 4
      for (Index j = static_cast<Index>(threadIdx.x) * V; j < length; j += Threads * V)
        acc = combine_vector<Op, V>(acc, in, base + j, static_cast<std::int64_t>(j));
    } else {
#pragma unroll 4
      for (Index j = static_cast<Index>(threadIdx.x); j < length; j += Threads)
        acc = Op::combine(acc, lift_element<Op>(in, mode, base + j, extents, static_cast<std::int64_t>(j)));
    }
    acc = block_reduce<Op, Threads>(acc);
    if (threadIdx.x == 0) out[row] = static_cast<Out>(Op::finish(acc, length));
  }
}

inline constexpr int column_lanes = 32;  // consecutive outputs per block: one warp-wide access per row
inline constexpr int column_rows = 8;    // rows read concurrently per block

/// Reduces a [outer, length, inner] view along its middle axis: each thread owns one
/// output (consecutive threads, consecutive memory) and walks rows; blockIdx.y splits the
/// rows into chunks when there are too few outputs to fill the GPU. With one chunk the
/// result is written directly, otherwise chunk partials go to `partials`.
template <class Op, class Reader, int R, class Index, class Out>
__global__ void __launch_bounds__(column_lanes* column_rows)
    reduce_columns(Reader in, Index outputs, Index length, Index inner, Index rows_per_chunk, ReadMode mode,
                   detail::Coord<R, Index> extents, typename Op::acc_type* partials, Out* out) {
  using Acc = typename Op::acc_type;
  const Index o = static_cast<Index>(blockIdx.x) * column_lanes + static_cast<Index>(threadIdx.x);
  const Index outer = o / inner, k = o % inner;
  const Index begin = static_cast<Index>(blockIdx.y) * rows_per_chunk;
  const Index end = length - begin < rows_per_chunk ? length : begin + rows_per_chunk;
  Acc acc = Op::identity();
  if (o < outputs) {
#pragma unroll 4
    for (Index j = begin + static_cast<Index>(threadIdx.y); j < end; j += column_rows)
      acc = Op::combine(acc, lift_element<Op>(in, mode, (outer * length + j) * inner + k, extents,
                                              static_cast<std::int64_t>(j)));
  }
  __shared__ Acc lanes[column_rows][column_lanes + 1];
  lanes[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || o >= outputs) return;
  for (int y = 1; y < column_rows; ++y) acc = Op::combine(acc, lanes[y][threadIdx.x]);
  if (gridDim.y == 1) out[o] = static_cast<Out>(Op::finish(acc, length));
  else partials[static_cast<std::int64_t>(blockIdx.y) * outputs + o] = acc;
}

/// Combines the chunk partials of reduce_columns, in chunk order.
template <class Op, class Index, class Out>
__global__ void reduce_columns_finish(const typename Op::acc_type* partials, Index chunks, Index outputs,
                                      std::int64_t length, Out* out) {
  const Index o = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  if (o >= outputs) return;
  typename Op::acc_type acc = Op::identity();
  for (Index c = 0; c < chunks; ++c) acc = Op::combine(acc, partials[static_cast<std::int64_t>(c) * outputs + o]);
  out[o] = static_cast<Out>(Op::finish(acc, length));
}

}  // namespace et::kernels
