// Device code only: the kernel of a statement of several outputs (et::assign; its program:
// eval/statement.hpp). One launch: blocks stride over the index space (rows, or chunks of
// consecutive elements), each thread computing strided_unroll elements' values before it
// stores them and combining its reductions' lifts; then each block's accumulators go to its
// slot of `partials`, and the last block to finish (a ticket taken after a fence) combines
// the slots in block order (deterministic) and ends the pass: the reductions' results and
// the finals (StatementProgram::finish), then sets the ticket back to 0. Included by
// include/et/backend/cuda/statement.hpp.
#pragma once

#include <tuple>
#include <utility>

#include "et/eval/statement.hpp"
#include "et/kernels/elementwise.cuh"
#include "et/kernels/reduce.cuh"

namespace et::kernels {

/// Where a statement's launch goes: rows (runs > 0: `rows` rows of `cols` elements, each cut
/// into `runs` runs of row_run, a block taking 8 rows of one run per tile) or chunks of
/// 256 * strided_unroll consecutive elements (runs == 0); `tiles` units in all.
template <class Index>
struct StatementGrid {
  Index rows = 1, cols = 1, runs = 0, tiles = 0;
};

/// Every accumulator of a block combined (thread 0 holds the result).
template <class SP, std::size_t... Is>
__device__ __forceinline__ void block_reduce_all(typename SP::Accs& accs, std::index_sequence<Is...>) {
  ((pack_get<Is>(accs) = block_reduce<std::tuple_element_t<Is, typename SP::Ops>, 256>(pack_get<Is>(accs))), ...);
}

template <class SP, int R, class Index>
__global__ void __launch_bounds__(256) statement(SP s, detail::Coord<R, Index> extents, Index n, StatementGrid<Index> g,
                                                 typename SP::Accs* partials, unsigned int* ticket) {
  constexpr int U = strided_unroll;
  using Accs = typename SP::Accs;
  using Values = typename SP::Values;
  Accs accs = SP::identities();
  if (g.runs > 0) {
    const Index lane = static_cast<Index>(threadIdx.x) % 32, warp = static_cast<Index>(threadIdx.x) / 32;
    for (Index tile = static_cast<Index>(blockIdx.x); tile < g.tiles; tile += static_cast<Index>(gridDim.x)) {
      const Index row = tile / g.runs * 8 + warp, col = tile % g.runs * row_run + lane;
      if (row >= g.rows || col >= g.cols) continue;
      detail::Coord<R, Index> c{};
      if constexpr (R >= 1) c.c[R - 1] = col;
      if constexpr (R >= 2) {
        Index rest = row;
        for (int d = R - 2; d > 0; --d) {
          c.c[d] = rest % extents.c[d];
          rest /= extents.c[d];
        }
        c.c[0] = rest;
      }
      const Index first = row * g.cols + col;
      SP local = s;
      local.rebase(detail::RebaseTo<R, Index>{first, c});
      Values values[U];
#pragma unroll
      for (int k = 0; k < U; ++k)
        if (col + k * 32 < g.cols)
          values[k] = local.template values_row<R>(static_cast<Index>(k * 32), accs, static_cast<std::int64_t>(first + k * 32));
#pragma unroll
      for (int k = 0; k < U; ++k)
        if (col + k * 32 < g.cols) local.template store_row<R>(static_cast<Index>(k * 32), values[k]);
    }
  } else {
    for (Index tile = static_cast<Index>(blockIdx.x); tile < g.tiles; tile += static_cast<Index>(gridDim.x)) {
      const Index base = tile * (256 * U) + static_cast<Index>(threadIdx.x);
      Values values[U];
      detail::Coord<R, Index> coords[U];
#pragma unroll
      for (int k = 0; k < U; ++k) {
        const Index i = base + k * 256;
        if (i < n) {
          coords[k] = detail::unravel<R, Index>(i, extents);
          values[k] = s.values_strided(i, coords[k], accs, static_cast<std::int64_t>(i));
        }
      }
#pragma unroll
      for (int k = 0; k < U; ++k)
        if (base + k * 256 < n) s.store_strided(coords[k], values[k]);
    }
  }
  if (partials == nullptr) return;  // nothing ends the pass: no reductions, no finals
  block_reduce_all<SP>(accs, std::make_index_sequence<SP::reductions_count>{});
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = accs;
    __threadfence();  // the slot is visible before the ticket says so
    last = atomicAdd(ticket, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Accs total = SP::identities();
  for (unsigned b = threadIdx.x; b < gridDim.x; b += 256) SP::combine(total, partials[b]);
  block_reduce_all<SP>(total, std::make_index_sequence<SP::reductions_count>{});
  if (threadIdx.x == 0) {
    s.template finish<Index>(total, static_cast<std::int64_t>(n));
    *ticket = 0;  // left as it was found: the next statement with this ticket needs no memset
  }
}

}  // namespace et::kernels
