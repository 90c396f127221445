// Device code only: the fused elementwise kernels. An expression compiles into at most
// three kernels, each inlining its program a few times: the linear kernel (V-wide body
// plus a scalar tail, 64-bit indices), the 32-bit strided kernel (strided_unroll elements
// per thread) and the 64-bit generic kernel (one element per thread, any layout), which
// only non-linear layouts of 2^31 elements or more reach. Plus, for programs with shared subexpressions,
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

/// The linear and strided kernels run each thread once, without a loop: the launcher gives
/// one thread per (vector of) element(s) or per strided_unroll elements, within the grid
/// limit (2^31 - 1 blocks). A grid-stride loop would never take a second step but costs a
/// tiny launch a fifth of its time (measured in a CUDA graph of 1000 dependent launches on
/// 1024 floats, H200: 1.11 us per kernel with the loop, 0.97 without).
///
/// A contiguous output whose operands all read at the output's linear index. When
/// `vectorized`, thread t moves elements [tV, tV + V) with 16-byte accesses, and threads
/// below n % V then write the scalar tail.
template <int V, class Writer, class Reader, class Index>
__global__ void __launch_bounds__(256) elementwise_linear(Writer out, Reader in, Index n, bool vectorized) {
  const Index t = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + static_cast<Index>(threadIdx.x);
  Index tail_start = 0;
  if (vectorized) {
    const Index vectors = n / V;
    if (t < vectors) out.template vector<V>(t * V, in.template vector<V>(t * V));
    tail_start = vectors * V;
  }
  if (t < n - tail_start) out.linear(tail_start + t, in.linear(tail_start + t));
}

/// Elements per thread on the strided path. A thread issues the loads of all of them
/// before its first store: with scalar accesses one element per thread leaves too few
/// requests in flight to cover memory latency (measured: a broadcast bias-add over a
/// 16384^2 matrix at 0.46x of copy bandwidth).
inline constexpr int strided_unroll = 4;

/// Any layout: each element's coordinate is computed once and shared by every operand
/// (each dots it with its own, possibly zero, strides). Block b covers blockDim.x *
/// strided_unroll consecutive elements, thread t the ones at t, t + blockDim.x, ...
/// (coalesced); the launcher sizes the grid for that.
template <class Writer, class Reader, int R, class Index>
__global__ void __launch_bounds__(256) elementwise_strided(Writer out, Reader in, detail::Coord<R, Index> extents,
                                                           Index n) {
  constexpr int U = strided_unroll;
  const Index width = static_cast<Index>(blockDim.x);
  const Index base = static_cast<Index>(blockIdx.x) * width * U + static_cast<Index>(threadIdx.x);
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

/// The fused backward of an expression (autograd/tape.hpp): every input's gradient for
/// the elements of a grid-stride range, one element per thread and iteration. `linear`:
/// every operand, the upstream gradient and every gradient written are laid out like the
/// contiguous index space. One kernel per expression type (64-bit indices throughout).
template <class Program, int R>
__global__ void __launch_bounds__(256) gradient(Program program, detail::Coord<R, std::int64_t> extents,
                                                std::int64_t n, bool linear) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i = next_index(i, stride, n)) {
    if (linear) program.template run<true>(i, detail::Coord<R, std::int64_t>{});
    else program.template run<false>(i, detail::unravel<R, std::int64_t>(i, extents));
  }
}

}  // namespace et::kernels
