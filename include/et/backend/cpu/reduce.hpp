// How reductions run on the CPU: OpenMP over independent pieces, each accumulated
// pairwise (a cascade: blocks of 64 elements in order, block results merged through a
// binary counter, as NumPy sums), so float rounding error grows like log2(n), not n.
// Per-thread results are combined in thread order: the same input and thread count
// give the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "et/backend/cpu/elementwise.hpp"
#include "et/backend/reduce_ops.hpp"
#include "et/eval/evaluator.hpp"

namespace et::detail::cpu_backend {

template <class Op>
class PairwiseAccumulator {
 public:
  using Acc = typename Op::acc_type;
  void add(Acc value) {
    block_ = Op::combine(block_, value);
    if (++in_block_ == block_size) flush_block();
  }
  Acc result() const {
    Acc total = Op::identity();
    for (int level = 63; level >= 0; --level)  // higher levels hold earlier elements
      if ((blocks_ >> level) & 1u) total = Op::combine(total, levels_[level]);
    return Op::combine(total, block_);
  }

 private:
  static constexpr int block_size = 64;
  void flush_block() {
    Acc carry = block_;
    std::uint64_t k = blocks_++;
    int level = 0;
    for (; k & 1u; k >>= 1, ++level) carry = Op::combine(levels_[level], carry);
    levels_[level] = carry;
    block_ = Op::identity();
    in_block_ = 0;
  }
  Acc levels_[64]{};
  Acc block_ = Op::identity();
  std::uint64_t blocks_ = 0;
  int in_block_ = 0;
};

/// The value of element i (row-major in the expression's own shape).
template <int R, class Index, class Reader>
auto read_element(const Reader& reader, bool linear, Index i, const Coord<R, Index>& extents) {
  if (linear) return reader.linear(i);
  return reader.strided(i, unravel<R, Index>(i, extents));
}

template <class Index, class Op, class Out, class E>
void reduce_all_loop(const E& expr, Out* out, bool linear) {
  constexpr int R = E::rank;
  const auto shape = expr.shape();
  std::vector<std::shared_ptr<void>> buffers;
  const auto reader = build_program<Index>(expr, shape, buffers);
  const auto extents = to_coord<Index>(shape);
  const Index n = static_cast<Index>(checked_numel(shape));
  int threads = 1;
#if defined(_OPENMP)
  if (n >= parallel_threshold) threads = omp_get_max_threads();
#endif
  std::vector<typename Op::acc_type> partial(static_cast<std::size_t>(threads), Op::identity());
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int thread = 0;
#if defined(_OPENMP)
    thread = omp_get_thread_num();
    const int team = omp_get_num_threads();
#else
    const int team = 1;
#endif
    const Index chunk = (n + team - 1) / team;
    const Index begin = std::min<Index>(n, chunk * thread), end = std::min<Index>(n, begin + chunk);
    PairwiseAccumulator<Op> accumulator;
    for (Index i = begin; i < end; ++i)
      accumulator.add(Op::lift(read_element<R>(reader, linear, i, extents), static_cast<std::int64_t>(i)));
    partial[static_cast<std::size_t>(thread)] = accumulator.result();
  }
  typename Op::acc_type total = Op::identity();
  for (const auto& value : partial) total = Op::combine(total, value);
  *out = static_cast<Out>(Op::finish(total, static_cast<std::int64_t>(n)));
}

/// Reduces every element of `expr` into *out.
template <class Op, class Out, class E>
void reduce_into(Backend, Op, const E& expr, Out* out) {
  reduce_all_loop<CpuIndex, Op>(expr, out, plan_reads(expr.shape(), expr).linear);
}

template <class Index, class Op, class Out, class E>
void reduce_axis_loop(const E& expr, const AxisProblem& problem, Out* out, bool linear) {
  constexpr int R = E::rank;
  const auto shape = expr.shape();
  std::vector<std::shared_ptr<void>> buffers;
  const auto reader = build_program<Index>(expr, shape, buffers);
  const auto extents = to_coord<Index>(shape);
  const Index outputs = static_cast<Index>(problem.outer * problem.inner);
  const Index length = static_cast<Index>(problem.length), inner = static_cast<Index>(problem.inner);
#pragma omp parallel for schedule(static) if (static_cast<std::int64_t>(outputs) * problem.length >= parallel_threshold)
  for (Index o = 0; o < outputs; ++o) {
    const Index outer = o / inner, k = o % inner;
    PairwiseAccumulator<Op> accumulator;
    for (Index j = 0; j < length; ++j) {
      const Index i = (outer * length + j) * inner + k;
      accumulator.add(Op::lift(read_element<R>(reader, linear, i, extents), static_cast<std::int64_t>(j)));
    }
    out[o] = static_cast<Out>(Op::finish(accumulator.result(), problem.length));
  }
}

/// Reduces `expr` along one axis (described by `problem`) into the contiguous `out`.
template <class Op, class Out, class E>
void reduce_axis_into(Backend, Op, const E& expr, const AxisProblem& problem, Out* out) {
  reduce_axis_loop<CpuIndex, Op>(expr, problem, out, plan_reads(expr.shape(), expr).linear);
}

/// out[k] = sum over i < rows of g[i * cols + k]: a contiguous gradient summed over its
/// leading axes (a bias's gradient, ops/reduce.hpp's sum_to), read once in order and summed
/// in double (where the general path's pairwise sums stay within a few roundings too).
/// Threads take blocks of columns, each summing every row of its block.
template <class T>
void sum_leading_rows(const T* g, std::int64_t rows, std::int64_t cols, T* out) {
  using Acc = double;
  constexpr std::int64_t block = 256;
  const std::int64_t blocks = (cols + block - 1) / block;
#pragma omp parallel for schedule(static) if (rows * cols >= parallel_threshold && blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t first = b * block, width = std::min(block, cols - first);
    Acc sums[block] = {};
    for (std::int64_t i = 0; i < rows; ++i) {
      const T* row = g + i * cols + first;
#pragma omp simd
      for (std::int64_t k = 0; k < width; ++k) sums[k] += static_cast<Acc>(static_cast<compute_t<T>>(row[k]));
    }
    for (std::int64_t k = 0; k < width; ++k) out[first + k] = static_cast<T>(static_cast<compute_t<T>>(sums[k]));
  }
}

}  // namespace et::detail::cpu_backend
