// Device code only: the one fused elementwise kernel (two access paths). Included by
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

/// Loop for any layout: each element's coordinate is computed once and
/// shared by every operand (each dots it with its own, possibly zero, strides).
template <class Writer, class Reader, int R, class Index>
__global__ void __launch_bounds__(256) elementwise_strided(Writer out, Reader in, detail::Coord<R, Index> extents,
                                                           Index n) {
  const Index first = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = first; i < n; i = next_index(i, stride, n)) {
    const detail::Coord<R, Index> c = detail::unravel<R, Index>(i, extents);
    out.strided(c, in.strided(i, c));
  }
}

}  // namespace et::kernels
