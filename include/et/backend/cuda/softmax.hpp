// softmax, log_softmax and logsumexp on a CUDA device (ops/softmax.hpp): the launcher of
// kernels/et/kernels/softmax.cuh, one kernel per call. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/softmax.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>

#include "et/backend/cuda/elementwise.hpp"
#include "et/kernels/softmax.cuh"

namespace et::detail::cuda_backend {

/// True when every row starts 16-byte aligned and steps by one element, so the kernel
/// reads and writes V elements per access.
template <int V, class T, int R1>
bool rows_vectorizable(const T* in, const T* out, const RowsGeometry<R1>& g, bool per_element) {
  if (g.in_step != 1 || (per_element && g.out_step != 1) || g.length % V != 0) return false;
  if (!aligned_for(in, 16) || (per_element && !aligned_for(out, 16))) return false;
  for (int d = 0; d < R1; ++d) {
    if (g.extents[d] == 1) continue;
    if ((g.in_strides[d] * static_cast<std::int64_t>(sizeof(T))) % 16 != 0) return false;
    if (per_element && (g.out_strides[d] * static_cast<std::int64_t>(sizeof(T))) % 16 != 0) return false;
  }
  return true;
}

template <int I, class Kind, class T, int R, int RO, int R1>
void softmax_rows_into(Backend<I>, Kind, const Tensor<T, R, Cuda<I>>& x, const Tensor<T, RO, Cuda<I>>& y,
                       const RowsGeometry<R1>& g) {
  constexpr int V = vector_width<T>;
  static_assert(kernels::row_items % V == 0);
  const CudaCall call(I, Kind::name);
  note_expression_uses(x, y);
  const T* in = x.data();
  T* out = y.data();
  // Who takes a row (measured on 4096^2 floats, H200): softmax and log_softmax want the
  // row in registers, read once: a warp up to 32 * row_items elements, the block up to
  // softmax_threads * row_items; logsumexp writes nothing per element and reads any row
  // once, fastest by warps. Longer rows are read twice, by warps where there are rows
  // enough to fill the GPU.
  constexpr std::int64_t warp_row = 32 * kernels::row_items, block_row = kernels::softmax_threads * kernels::row_items;
  const bool rows_enough = g.rows >= std::int64_t{device_properties(I).multiprocessors} * 16;
  const bool by_warps = g.length <= warp_row || (Kind::per_element ? g.length > block_row && rows_enough : rows_enough);
  const int team = by_warps ? 32 : kernels::softmax_threads;
  const std::int64_t teams = kernels::softmax_threads / team;
  const bool vectorized = rows_vectorizable<V>(in, out, g, Kind::per_element);
  // A team per row, a launch per 2^31 - 1 blocks of rows: one launch below 2^34 rows.
  const std::int64_t rows_per_launch = std::int64_t{std::numeric_limits<std::int32_t>::max()} * teams;
  for (std::int64_t first = 0; first < g.rows; first += rows_per_launch) {
    const int blocks = static_cast<int>((std::min(g.rows - first, rows_per_launch) + teams - 1) / teams);
    launch<&kernels::softmax_rows<Kind, V, T, R1>>(call, blocks, kernels::softmax_threads, 0, in, out, g, first,
                                                   team, vectorized);
  }
}

}  // namespace et::detail::cuda_backend
