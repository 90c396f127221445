// How an expression is evaluated: make_program (eval/program.hpp) turns an expression
// tree into one flat, trivially copyable struct of readers (expr/readers.hpp) that both
// the CUDA kernel and the CPU loop call per element; this file plans an evaluation (which
// access path, which index type) from the operands' layouts.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <numeric>
#include <tuple>
#include <utility>

#include "et/config.hpp"
#include "et/eval/program.hpp"
#include "et/expr/node.hpp"
#include "et/expr/readers.hpp"
#include "et/tensor.hpp"

namespace et::detail {

/// The destination's writer, from `origin` on (the first element of a box: program.hpp).
template <class Index, class T, int R, class D>
Writer<T, R, Index> make_writer(const Tensor<T, R, D>& t, const std::type_identity_t<Shape<R>>& origin = {}) {
  Writer<T, R, Index> writer{t.data() + offset_of(origin, t.strides()), {}};
  copy_strides<Index, R>(writer.strides, t.strides());
  return writer;
}

/// Calls f on every tensor and generator leaf of an expression (scalars need no planning).
/// A node whose copies share one heap block (node.hpp) is walked once, however often the
/// tree uses it: every use has the same leaves.
template <class F, class T, int R, class D>
void for_each_leaf(const Tensor<T, R, D>& t, F&& f) {
  f(t);
}
template <class F, class T>
void for_each_leaf(const ScalarExpr<T>&, F&&) {}
template <class F, class Gen, int R, class D>
void for_each_leaf(const GeneratorExpr<Gen, R, D>& g, F&& f) {
  f(g);
}

template <class F>
struct LeafWalk {
  F& f;
  WalkedNodes walked;
  template <class Op, class... Cs>
  void operator()(const MapExpr<Op, Cs...>& e) {
    if (!walked.first_visit(e.identity())) return;
    // Two instantiation levels per tree level (not std::apply's five): deep chains stay
    // within the compilers' template depth limits (g++: 900).
    children(e, std::index_sequence_for<Cs...>{});
  }
  template <class Leaf>
  void operator()(const Leaf& leaf) {
    for_each_leaf(leaf, f);
  }
  template <class Op, class... Cs, std::size_t... Is>
  void children(const MapExpr<Op, Cs...>& e, std::index_sequence<Is...>) {
    ((*this)(std::get<Is>(e.children())), ...);
  }
};
template <class F, class Op, class... Cs>
void for_each_leaf(const MapExpr<Op, Cs...>& e, F&& f) {
  LeafWalk<std::remove_reference_t<F>>{f, {}}(e);
}

/// How many elementwise evaluations took each path, process-wide (tests and benchmarks read
/// them; et::elementwise_path_counts() is the public copy):
///  linear   every operand read at the output's index, one element a thread (GPU), or the
///           CPU's vectorized loop;
///  vector   the GPU's linear kernel with 16-byte accesses;
///  rows     rows of consecutive elements, every operand rebased once a row (GPU: the strided
///           kernel's rows launch; CPU: the row loop);
///  tiled    the GPU's strided kernel through shared-memory tiles (an operand read transposed);
///  general  coordinates walked element by element (any layout).
struct ElementwiseCounters {
  std::atomic<std::int64_t> linear{0}, vector{0}, rows{0}, tiled{0}, general{0};
};
inline ElementwiseCounters& elementwise_counters() {
  static ElementwiseCounters counters;
  return counters;
}
/// Whether the rows path may run (on by default): tests and benchmarks turn it off to set
/// the general path beside it on the same operands.
inline std::atomic<bool>& rows_path_enabled() {
  static std::atomic<bool> enabled{true};
  return enabled;
}

/// What an assignment needs to know before choosing a kernel.
struct ElementwisePlan {
  bool linear = true;            ///< every operand can be read at the output's linear index
  std::int64_t max_index = 0;    ///< largest index or element offset the evaluation touches
  /// Every operand can be read at the output's linear index i or, broadcast into an index
  /// space of rank 2 and up, at (i / div) % mod (layout.hpp's linear_wrap; the GPU's linear
  /// kernel does this).
  bool wrapped = true;
  /// Vectors of V elements serve the wrapped operands when V divides this (0: none wrapped).
  std::int64_t wrap_granule = 0;
};

/// plan_reads' walker: what each leaf adds to the plan. A functor rather than a lambda of
/// plan_reads, so that its members are compiled once per leaf type and index-space rank,
/// not again for every expression that reads such a leaf.
template <std::size_t R>
struct ReadPlanner {
  const std::array<std::int64_t, R>& shape;
  std::array<std::int64_t, R> dense = contiguous_strides(shape);
  ElementwisePlan plan{true, checked_numel(shape), true, 0};

  bool reads_like_output(const std::array<std::int64_t, R>& strides) const {
    for (std::size_t d = 0; d != R; ++d)
      if (shape[d] != 1 && strides[d] != dense[d]) return false;
    return true;
  }
  template <class T, int N, class D>
  void operator()(const Tensor<T, N, D>& leaf) {
    if (!leaf.defined()) throw Error("et: an undefined (default-constructed) tensor was used in an expression");
    read(broadcast_strides(leaf.shape(), leaf.strides(), shape));
  }
  void read(const std::array<std::int64_t, R>& strides) {
    const bool like_output = reads_like_output(strides);
    plan.linear = plan.linear && like_output;
    if (!like_output) {
      const LinearWrap wrap = linear_wrap(shape, strides);
      // The linear kernel's readers (64-bit) carry a wrap in index spaces of rank 2 and up.
      plan.wrapped = plan.wrapped && carries_wrap<static_cast<int>(R), std::int64_t> && wraps(wrap, shape);
      plan.wrap_granule = std::gcd(plan.wrap_granule, wrap.div > 1 ? wrap.div : wrap.mod);
    }
    plan.max_index = std::max(plan.max_index, max_offset(shape, strides));
  }
  template <class Gen, int N, class D>
  void operator()(const GeneratorExpr<Gen, N, D>& leaf) {
    const bool like_output = reads_like_output(broadcast_strides(leaf.shape(), contiguous_strides(leaf.shape()), shape));
    plan.linear = plan.linear && like_output;
    plan.wrapped = plan.wrapped && like_output;
  }
};

/// Inspects every leaf of an expression read in the index space `shape`: can it be read
/// at the row-major linear index (the linear path), and how large do offsets get?
template <std::size_t R, class E>
ElementwisePlan plan_reads(const std::array<std::int64_t, R>& shape, const E& expr) {
  ReadPlanner<R> planner{shape};
  for_each_leaf(expr, planner);
  return planner.plan;
}

/// The plan for evaluating `expr` into `dst`: the reads' plan, plus the destination's
/// own layout (the linear path also needs a contiguous destination).
template <class T, int R, class D, class E>
ElementwisePlan plan_elementwise(const Tensor<T, R, D>& dst, const E& expr) {
  ElementwisePlan plan = plan_reads(dst.shape(), expr);
  plan.linear = plan.linear && dst.is_contiguous();
  plan.wrapped = plan.wrapped && dst.is_contiguous();
  plan.max_index = std::max(plan.max_index, max_offset(dst.shape(), dst.strides()));
  return plan;
}

/// Runs f(Index{}) with Index = int32_t when every index fits below `limit`, else int64_t.
template <class F>
decltype(auto) with_index_type(bool fits_int32, F&& f) {
  if (fits_int32) return f(std::int32_t{});
  return f(std::int64_t{});
}

}  // namespace et::detail

namespace et {

/// How many elementwise evaluations took each path so far, process-wide (see
/// detail::ElementwiseCounters): a test or benchmark reads which one ran.
struct ElementwisePathCounts {
  std::int64_t linear = 0, vector = 0, rows = 0, tiled = 0, general = 0;
};
inline ElementwisePathCounts elementwise_path_counts() {
  const detail::ElementwiseCounters& c = detail::elementwise_counters();
  return {c.linear.load(), c.vector.load(), c.rows.load(), c.tiled.load(), c.general.load()};
}

}  // namespace et

namespace et::detail {

/// Row-major coordinate of linear index i in `extents`.
template <int R, class Index>
ET_HD Coord<R, Index> unravel(Index i, const Coord<R, Index>& extents) {
  Coord<R, Index> c{};
ET_UNROLL
  for (int d = R - 1; d >= 0; --d) {
    c.c[d] = i % extents.c[d];
    i /= extents.c[d];
  }
  return c;
}

template <class Index, std::size_t R>
Coord<static_cast<int>(R), Index> to_coord(const std::array<std::int64_t, R>& values) {
  Coord<static_cast<int>(R), Index> c{};
  for (std::size_t d = 0; d != R; ++d) c.c[d] = static_cast<Index>(values[d]);
  return c;
}

}  // namespace et::detail
