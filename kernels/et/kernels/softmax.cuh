// Device code only: softmax, log_softmax and logsumexp over rows in one kernel
// (backend/softmax_ops.hpp has the arithmetic), and cross_entropy's forward in one. A team of
// threads, a warp or the whole block, takes a row: it reads the row in chunks of team *
// row_items elements into registers, folds each chunk into its thread's statistics,
// reduces the maximum across the team and then the sums rescaled to it (one exp per
// thread, not one per merge), then writes the output from the registers when the row was
// one chunk (one read of the input), or reads the row again otherwise. Included by
// include/et/backend/cuda/softmax.hpp; nvcc only.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "et/backend/softmax_ops.hpp"
#include "et/expr/readers.hpp"
#include "et/types.hpp"

namespace et::kernels {

inline constexpr int softmax_threads = 256;
/// Elements of a chunk each thread holds.
inline constexpr int row_items = 16;

/// Combines one value per thread of a team (a warp, or the whole block through `shared`)
/// with `op`, in a fixed order: every thread of the team gets the result.
template <class Acc, class Op>
__device__ __forceinline__ Acc team_reduce(Acc value, int team, Acc (&shared)[softmax_threads / 32], Op op) {
  ET_UNROLL
  for (int delta = 16; delta > 0; delta /= 2) value = op(value, __shfl_xor_sync(0xffffffffu, value, delta));
  if (team > 32) {
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = value;
    __syncthreads();
    value = shared[0];
    ET_UNROLL
    for (int w = 1; w < softmax_threads / 32; ++w) value = op(value, shared[w]);
    __syncthreads();  // before the next call overwrites `shared`
  }
  return value;
}

/// Chunk `first` of a row into values[] (-inf past the row's end): V consecutive elements
/// per access when `vectorized` (unit steps, aligned, length a multiple of V). A chunk
/// wholly inside the row is read without bounds checks.
template <int V, class T, class Acc>
__device__ __forceinline__ void load_chunk(const T* x, std::int64_t first, std::int64_t length, std::int64_t step,
                                           int lane, int team, bool vectorized, Acc (&values)[row_items]) {
  constexpr Acc none = -std::numeric_limits<Acc>::infinity();
  auto value = [](T v) { return static_cast<Acc>(static_cast<detail::compute_t<T>>(v)); };
  auto load = [&](auto checked) {
    if (vectorized) {
      ET_UNROLL
      for (int k = 0; k < row_items / V; ++k) {
        const std::int64_t i = first + (static_cast<std::int64_t>(k) * team + lane) * V;
        const bool inside = !checked || i < length;
        detail::Vec<T, V> loaded;
        if (inside) loaded = *reinterpret_cast<const detail::Vec<T, V>*>(x + i);
        ET_UNROLL
        for (int v = 0; v < V; ++v) values[k * V + v] = inside ? value(loaded.v[v]) : none;
      }
    } else {
      ET_UNROLL
      for (int k = 0; k < row_items; ++k) {
        const std::int64_t i = first + static_cast<std::int64_t>(k) * team + lane;
        values[k] = !checked || i < length ? value(x[i * step]) : none;
      }
    }
  };
  if (first + static_cast<std::int64_t>(team) * row_items <= length) load(std::false_type{});
  else load(std::true_type{});
}

/// output(value) for the values of a chunk (same positions as load_chunk).
template <int V, class T, class Output, class Acc>
__device__ __forceinline__ void store_chunk(T* y, std::int64_t first, std::int64_t length, std::int64_t step,
                                            int lane, int team, bool vectorized, const Output& output,
                                            const Acc (&values)[row_items]) {
  auto out = [&](Acc x) { return static_cast<T>(static_cast<detail::compute_t<T>>(output(x))); };
  if (vectorized) {
    ET_UNROLL
    for (int k = 0; k < row_items / V; ++k) {
      const std::int64_t i = first + (static_cast<std::int64_t>(k) * team + lane) * V;
      if (i >= length) continue;
      detail::Vec<T, V> result;
      ET_UNROLL
      for (int v = 0; v < V; ++v) result.v[v] = out(values[k * V + v]);
      *reinterpret_cast<detail::Vec<T, V>*>(y + i) = result;
    }
  } else {
    ET_UNROLL
    for (int k = 0; k < row_items; ++k) {
      const std::int64_t i = first + static_cast<std::int64_t>(k) * team + lane;
      if (i < length) y[i * step] = out(values[k]);
    }
  }
}

/// The statistics of the row at `x` over its team: every thread reads its part chunk by
/// chunk into `values` (the last chunk stays there) and folds it into `own`; the result is
/// the row's maximum and its sum rescaled to that maximum's shift (one exp per thread).
template <class Kind, int V, class T, class Acc, int R1>
__device__ __forceinline__ detail::RowStats<Kind, Acc> team_row_stats(const T* x, const detail::RowsGeometry<R1>& g,
                                                                        int lane, int team, bool vectorized,
                                                                        Acc (&values)[row_items],
                                                                        detail::RowStats<Kind, Acc>& own,
                                                                        Acc (&shared)[softmax_threads / 32]) {
  using Stats = detail::RowStats<Kind, Acc>;
  const std::int64_t chunk = static_cast<std::int64_t>(team) * row_items;
  for (std::int64_t first = 0; first < g.length; first += chunk) {
    load_chunk<V>(x, first, g.length, g.in_step, lane, team, vectorized, values);
    own.template add<std::is_same_v<Kind, detail::SoftmaxKind>>(values);  // softmax keeps exp(x - own max)
  }
  const Acc max = team_reduce(own.max, team, shared, [](Acc a, Acc b) { return detail::math::fmax(a, b); });
  const Acc sum = team_reduce(own.sum_at(Stats::shift(max)), team, shared, [](Acc a, Acc b) { return a + b; });
  return Stats{max, sum};
}

/// The row of block-thread `threadIdx.x` when a team of `team` threads takes a row: a
/// block's teams take consecutive rows; a whole-block team's threads share one row, so a
/// block takes a row whole or not at all (team_reduce's barriers).
__device__ __forceinline__ std::int64_t team_row(int team) {
  return static_cast<std::int64_t>(blockIdx.x) * (softmax_threads / team) + threadIdx.x / team;
}

/// One row per team of `team` threads (32, or softmax_threads: the whole block): the rows
/// from `first_row` on, one per team of the grid (no grid-stride loop: its state, held
/// across the row, made log_softmax spill at the 64-register bound, 43.5 us on 4096^2 floats
/// (H200) against 38 for softmax). `vectorized`: see load_chunk (the output then has unit
/// steps too). Four blocks per SM (64 registers): on 4096^2 floats (H200) logsumexp takes
/// 22 us instead of 25 at its natural 96 registers, softmax and log_softmax alike.
template <class Kind, int V, class T, int R1>
__global__ void __launch_bounds__(softmax_threads, 4)
    softmax_rows(const T* in, T* out, detail::RowsGeometry<R1> g, std::int64_t first_row, int team, bool vectorized) {
  using Acc = detail::softmax_acc_t<T>;
  using Stats = detail::RowStats<Kind, Acc>;
  __shared__ Acc shared[softmax_threads / 32];
  const int lane = static_cast<int>(threadIdx.x) % team;
  const std::int64_t row = first_row + team_row(team);
  if (row >= g.rows) return;
  std::int64_t in_offset = 0, out_offset = 0;
  g.offsets(row, in_offset, out_offset);
  const T* x = in + in_offset;
  Acc values[row_items];
  Stats own;
  const auto output = team_row_stats<Kind, V>(x, g, lane, team, vectorized, values, own, shared).output();
  if constexpr (Kind::per_element) {
    T* y = out + out_offset;
    if (g.length <= static_cast<std::int64_t>(team) * row_items) {  // the row is in registers
      if constexpr (std::is_same_v<Kind, detail::SoftmaxKind>) {
        const Acc own_shift = Stats::shift(own.max);
        const Acc factor =
            (own_shift == output.shift ? Acc(1) : detail::math::exp(own_shift - output.shift)) * output.inverse_sum;
        store_chunk<V>(y, 0, g.length, g.out_step, lane, team, vectorized, [factor](Acc t) { return t * factor; },
                       values);
      } else {
        store_chunk<V>(y, 0, g.length, g.out_step, lane, team, vectorized, output, values);
      }
    } else {
      const std::int64_t chunk = static_cast<std::int64_t>(team) * row_items;
      for (std::int64_t first = 0; first < g.length; first += chunk) {
        load_chunk<V>(x, first, g.length, g.in_step, lane, team, vectorized, values);
        store_chunk<V>(y, first, g.length, g.out_step, lane, team, vectorized, output, values);
      }
    }
  } else if (lane == 0) {
    out[out_offset] = static_cast<T>(static_cast<detail::compute_t<T>>(output.log_sum));
  }
}

/// cross_entropy's forward, the labels' side of it: row i's label and what the loss is
/// written to. The logits' rows are a RowsGeometry<1> whose output is lse (unit steps).
template <class T>
struct CrossEntropyArgs {
  const std::int64_t* labels;
  std::int64_t label_stride;
  T* lse;                               ///< a row's logsumexp, saved for the backward
  detail::softmax_acc_t<T>* partials;   ///< one a block
  unsigned* counter;                    ///< 0 at the launch; blocks done (backend/cuda/block_counter.hpp)
  T* loss;
};

/// The whole forward of cross_entropy in one kernel: each team takes a row's logsumexp as
/// softmax_rows does, writes it to lse and takes the row's term lse - x[label] (NaN for a
/// label outside [0, C)); each block adds its teams' terms in order into partials; the
/// block that finishes last (the counter) adds the partials in a fixed order (the same
/// value every run) and writes their mean, then sets the counter back to 0.
template <int V, class T>
__global__ void __launch_bounds__(softmax_threads, 4)
    cross_entropy_rows(const T* in, detail::RowsGeometry<1> g, CrossEntropyArgs<T> a, int team, bool vectorized) {
  using Acc = detail::softmax_acc_t<T>;
  using Kind = detail::LogSumExpKind;
  __shared__ Acc shared[softmax_threads / 32];
  __shared__ Acc terms[softmax_threads / 32];
  __shared__ bool last;
  const int lane = static_cast<int>(threadIdx.x) % team;
  const std::int64_t row = team_row(team);
  Acc term = 0;
  if (row < g.rows) {  // uniform over a team, and a whole-block team is the block
    std::int64_t in_offset = 0, out_offset = 0;
    g.offsets(row, in_offset, out_offset);
    const T* x = in + in_offset;
    const std::int64_t label = a.labels[row * a.label_stride];  // loaded before the row
    Acc values[row_items];
    detail::RowStats<Kind, Acc> own;
    const auto stats = team_row_stats<Kind, V>(x, g, lane, team, vectorized, values, own, shared);
    if (lane == 0) {  // the label's logit, read after its row: from L1 or L2
      const Acc picked = label >= 0 && label < g.length
                             ? static_cast<Acc>(static_cast<detail::compute_t<T>>(x[label * g.in_step]))
                             : std::numeric_limits<Acc>::quiet_NaN();
      const Acc log_sum = stats.log_sum();
      a.lse[out_offset] = static_cast<T>(static_cast<detail::compute_t<T>>(log_sum));
      term = log_sum - picked;
    }
  }
  if (threadIdx.x % 32 == 0) terms[threadIdx.x / 32] = term;  // 0 but for a team's first thread
  __syncthreads();
  if (threadIdx.x == 0) {
    Acc block_total = terms[0];
    ET_UNROLL
    for (int w = 1; w < softmax_threads / 32; ++w) block_total += terms[w];
    a.partials[blockIdx.x] = block_total;
    __threadfence();  // the partial is visible to every block before the count says so
    last = atomicAdd(a.counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  Acc total = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += softmax_threads) total += __ldcg(a.partials + b);
  total = team_reduce(total, softmax_threads, shared, [](Acc x, Acc y) { return x + y; });
  if (threadIdx.x == 0) {
    *a.loss = static_cast<T>(static_cast<detail::compute_t<T>>(total / static_cast<Acc>(g.rows)));
    *a.counter = 0;
  }
}

}  // namespace et::kernels
