// Device code only: the fused elementwise kernels. An expression compiles into at most
// three kernels, each inlining its program a few times: the 32-bit linear kernel (V-wide
// body plus a scalar loop), the 32-bit strided kernel (strided_unroll elements per
// thread) and the 64-bit generic kernel (one element per thread, any layout), which only
// arrays of 2^31 elements or more reach. Plus, for programs with shared subexpressions,
// the kernel that materializes one binding. Included by
// include/et/backend/cuda/elementwise.hpp; compiled only by nvcc.
#pragma once

#include "et/expr/evaluator.hpp"

namespace et::kernels {

/// i + stride, or `end` when that would reach past it: never overflows Index, so 32-bit
/// indices serve every n below 2^31.
template <class Index>
__device__ __forceinline__ Index next_index(Index i, Index stride, Index end) {
  return end - i > stride ? i + stride : end;
}

/// Loop over a contiguous output whose operands all read at the output's linear index.
/// The launcher gives one thread per (vector of) element(s), so the loop usually runs
/// once and many resident blocks keep loads in flight while others compute; it strides
/// only past the grid limit. When `vectorized`, each step moves V elements with 16-byte
/// accesses and a scalar tail finishes the last n % V elements.
template <int V, class Writer, class Reader, class Index>
__global__ void __launch_bounds__(256) elementwise_linear(Writer out, Reader in, Index n, bool vectorized) {
  const Index first = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  Index tail_start = 0;
  if (vectorized) {
    const Index vectors = n / V;
    for (Index v = first; v < vectors; v = next_index(v, stride, vectors))
      out.template vector<V>(v * V, in.template vector<V>(v * V));
    tail_start = vectors * V;
  }
  for (Index i = tail_start + first; i < n; i = next_index(i, stride, n)) out.linear(i, in.linear(i));
}

/// Elements per thread on the strided path. A thread issues the loads of all of them
/// before its first store: with scalar accesses one element per thread leaves too few
/// requests in flight to cover memory latency (measured: a broadcast bias-add over a
/// 16384^2 matrix at 0.46x of copy bandwidth).
inline constexpr int strided_unroll = 4;

/// Loop for any layout: each element's coordinate is computed once and shared by every
/// operand (each dots it with its own, possibly zero, strides). A block covers
/// blockDim.x * strided_unroll consecutive elements, thread t the ones at t, t +
/// blockDim.x, ... (coalesced); the launcher sizes the grid for that.
template <class Writer, class Reader, int R, class Index>
__global__ void __launch_bounds__(256) elementwise_strided(Writer out, Reader in, detail::Coord<R, Index> extents,
                                                           Index n) {
  constexpr int U = strided_unroll;
  const Index width = static_cast<Index>(blockDim.x);
  const Index stride = static_cast<Index>(gridDim.x) * width * U;
  for (Index base = static_cast<Index>(blockIdx.x) * width * U + static_cast<Index>(threadIdx.x); base < n;
       base = next_index(base, stride, n)) {
    detail::Coord<R, Index> coords[U];
    typename Reader::value_type values[U];
#pragma unroll
    for (int k = 0; k < U; ++k) {
      const Index i = base + k * width;  // < n + U * blockDim.x: inside the launcher's index margin
      if (i < n) {
        coords[k] = detail::unravel<R, Index>(i, extents);
        values[k] = in.strided(i, coords[k]);
      }
    }
#pragma unroll
    for (int k = 0; k < U; ++k)
      if (base + k * width < n) out.strided(coords[k], values[k]);
  }
}

/// Any layout, any index type, one element per thread and iteration: the path for arrays
/// past 32-bit indices. Instantiated once per expression, so it stays a single inlined
/// copy of the program (bandwidth on such sizes is dominated by the memory, not the issue
/// rate of the index arithmetic).
template <class Writer, class Reader, int R, class Index>
__global__ void __launch_bounds__(256) elementwise_generic(Writer out, Reader in, detail::Coord<R, Index> extents,
                                                           Index n) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
       i < n; i = next_index(i, stride, n)) {
    const detail::Coord<R, Index> c = detail::unravel<R, Index>(i, extents);
    out.strided(c, in.strided(i, c));
  }
}

/// Stores binding `select` of a program for every output element, contiguously (see
/// expr/program.hpp: an occurrence of a shared subexpression with operands of its own).
template <class Program, int R, class Index>
__global__ void __launch_bounds__(256) materialize_binding(Program in, int select, void* out,
                                                           detail::Coord<R, Index> extents, Index n) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
       i < n; i = next_index(i, stride, n))
    in.store_binding(select, out, i, detail::unravel<R, Index>(i, extents));
}

}  // namespace et::kernels
