// softmax, log_softmax and logsumexp on a CUDA device (ops/softmax.hpp), and
// cross_entropy's forward (nn/loss.hpp): the launchers of kernels/et/kernels/softmax.cuh,
// one kernel per call. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/softmax.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "et/backend/cuda/block_counter.hpp"
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

/// Who takes a row, and how it is read (measured on 4096^2 floats, H200): softmax and
/// log_softmax want the row in registers, read once: a warp up to 32 * row_items elements,
/// the block up to softmax_threads * row_items; logsumexp writes nothing per element and
/// reads any row once, fastest by warps. Longer rows are read twice, by warps where there
/// are rows enough to fill the GPU.
struct RowTeams {
  int team;
  std::int64_t per_block;  ///< rows a block takes
  bool vectorized;
};
template <class Kind, int V, class T, int R1>
RowTeams row_teams(int device, const T* in, const T* out, const RowsGeometry<R1>& g) {
  constexpr std::int64_t warp_row = 32 * kernels::row_items, block_row = kernels::softmax_threads * kernels::row_items;
  const bool rows_enough = g.rows >= std::int64_t{device_properties(device).multiprocessors} * 16;
  const bool by_warps = g.length <= warp_row || (Kind::per_element ? g.length > block_row && rows_enough : rows_enough);
  const int team = by_warps ? 32 : kernels::softmax_threads;
  return {team, kernels::softmax_threads / team, rows_vectorizable<V>(in, out, g, Kind::per_element)};
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
  const RowTeams teams = row_teams<Kind, V>(I, in, out, g);
  // A team per row, a launch per 2^31 - 1 blocks of rows: one launch below 2^34 rows.
  const std::int64_t rows_per_launch = std::int64_t{std::numeric_limits<std::int32_t>::max()} * teams.per_block;
  for (std::int64_t first = 0; first < g.rows; first += rows_per_launch) {
    const int blocks =
        static_cast<int>((std::min(g.rows - first, rows_per_launch) + teams.per_block - 1) / teams.per_block);
    launch<&kernels::softmax_rows<Kind, V, T, R1>>(call, blocks, kernels::softmax_threads, 0, in, out, g, first,
                                                   teams.team, teams.vectorized);
  }
}

/// cross_entropy's forward (nn/loss.hpp) in one kernel: lse[i] = logsumexp of row i of x
/// (rows as `g` says), loss = mean(lse - x[i][labels[i]]). One launch, whose 2^31 - 1
/// blocks take 2^34 rows (128 GiB of labels alone); more throw ShapeError.
template <int I, class T>
void cross_entropy_into(Backend<I>, const Tensor<T, 2, Cuda<I>>& x, const Tensor<std::int64_t, 1, Cuda<I>>& labels,
                        const Tensor<T, 1, Cuda<I>>& lse, const Tensor<T, 0, Cuda<I>>& loss,
                        const RowsGeometry<1>& g) {
  constexpr int V = vector_width<T>;
  const CudaCall call(I, "cross_entropy");
  note_expression_uses(x, labels, lse, loss);
  const RowTeams teams = row_teams<LogSumExpKind, V>(I, x.data(), lse.data(), g);
  if (g.rows > std::int64_t{std::numeric_limits<std::int32_t>::max()} * teams.per_block)
    throw ShapeError("et: cross_entropy of " + std::to_string(g.rows) + " rows: one launch takes up to 2^34");
  const int blocks = static_cast<int>((g.rows + teams.per_block - 1) / teams.per_block);
  const auto partials = allocate_bytes(I, sizeof(softmax_acc_t<T>) * static_cast<std::size_t>(blocks));
  const kernels::CrossEntropyArgs<T> args{labels.data(), labels.strides()[0], lse.data(),
                                          static_cast<softmax_acc_t<T>*>(partials.get()), block_counter(call),
                                          loss.data()};
  launch<&kernels::cross_entropy_rows<V, T>>(call, blocks, kernels::softmax_threads, 0, x.data(), g, args, teams.team,
                                             teams.vectorized);
}

}  // namespace et::detail::cuda_backend
