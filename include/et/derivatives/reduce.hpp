// Recording reductions. A reduction consumes a fused expression, so its backward is the
// expression's fused backward (derivatives/fused.hpp) seeded with the reduction's own
// derivative at each element: one kernel for every input of the expression, plus, for
// max, min and prod, one reduction over the expression that the derivative needs.
// Conventions are PyTorch's: max/min over all elements share the gradient evenly among
// the tied extreme elements; over one axis the gradient goes to the element argmax/argmin
// picks (the first extreme one); prod handles zeros exactly; norm's gradient is 0 at 0.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "et/derivatives/fused.hpp"
#include "et/ops/reduce.hpp"

namespace et::detail {

enum class ReductionKind { none, sum, mean, max, min, prod, norm };

template <template <class> class Op>
inline constexpr ReductionKind reduction_kind_v = ReductionKind::none;
template <>
inline constexpr ReductionKind reduction_kind_v<SumOp> = ReductionKind::sum;
template <>
inline constexpr ReductionKind reduction_kind_v<MeanOp> = ReductionKind::mean;
template <>
inline constexpr ReductionKind reduction_kind_v<MaxOp> = ReductionKind::max;
template <>
inline constexpr ReductionKind reduction_kind_v<MinOp> = ReductionKind::min;
template <>
inline constexpr ReductionKind reduction_kind_v<ProdOp> = ReductionKind::prod;
template <>
inline constexpr ReductionKind reduction_kind_v<NormOp> = ReductionKind::norm;

/// The adjoint of the reduced expression's element v, from the result's gradient g and
/// what the derivative needs: the result m, `count` (ties, zeros, or the chosen index) and
/// `other` (the product of the nonzero elements). Every reader is broadcast along the
/// reduced axes.
template <ReductionKind Kind, class GR, class CR, int R>
struct ReductionSeed {
  GR g;         ///< the result's gradient
  GR m;         ///< the result
  CR count;     ///< int64: tied extremes / zeros / argmax index
  GR other;     ///< prod of the nonzero elements (prod only)
  double scale;  ///< 1/n for mean
  int axis;     ///< the reduced axis, -1 for all

  template <bool Linear, class V, class Index, class C>
  ET_HD auto adjoint(V v, Index i, const C& c) const {
    using G = decltype(g.strided(i, c, Pack<>{}));
    const G grad = g.strided(i, c, Pack<>{});
    if constexpr (Kind == ReductionKind::sum) {
      return grad;
    } else if constexpr (Kind == ReductionKind::mean) {
      return static_cast<G>(grad * scale);
    } else if constexpr (Kind == ReductionKind::max || Kind == ReductionKind::min) {
      if (axis >= 0) return c.c[axis] == count.strided(i, c, Pack<>{}) ? grad : G(0);
      const G extreme = m.strided(i, c, Pack<>{});
      const bool tied = G(v) == extreme || (is_nan(G(v)) && is_nan(extreme));
      return tied ? grad / static_cast<G>(count.strided(i, c, Pack<>{})) : G(0);
    } else if constexpr (Kind == ReductionKind::prod) {
      if (G(v) != G(0)) return grad * m.strided(i, c, Pack<>{}) / G(v);
      return count.strided(i, c, Pack<>{}) == 1 ? grad * other.strided(i, c, Pack<>{}) : G(0);
    } else {
      const G norm = m.strided(i, c, Pack<>{});
      return norm == G(0) ? G(0) : grad * G(v) / norm;
    }
  }
};

/// The Seed policy of a recorded reduction (see FusedBackward): keeps the result and the
/// reduced axis; computes what the derivative needs when the backward runs.
template <ReductionKind Kind, class E, class T, int RO, class D>
struct ReductionSeedPolicy {
  static constexpr int R = E::rank;
  Tensor<T, RO, D> result;
  int axis;  // normalized; -1: all elements
  std::int64_t elements;
  Tensor<std::int64_t, R, D> count;
  Tensor<T, R, D> other;
  SavedVersion result_version;  // where the derivative reads the result (not max/min over an axis)

  static Shape<R> ones() {
    Shape<R> s;
    s.fill(1);
    return s;
  }
  /// t on D, seen with the reduced axes as extent 1 (so it broadcasts over the input).
  template <class U, int RR, class DD>
  Tensor<U, R, D> broadcastable(const Tensor<U, RR, DD>& t) const {
    const Tensor<U, RR, D> here = t.to(D{});  // Pinned reductions give Cpu results
    if constexpr (RR == R) return here;
    else if constexpr (RR == 0)
      return untracked_view(here, StridedLayout<std::size_t(R)>{ones(), ones(), here.offset()});
    else return untracked_view(here, unsqueeze_layout(layout_of(here), axis));
  }

  template <int RI, class Index, class G>
  auto reader(const G& gradient, const Shape<RI>& shape, const E& e) {
    prepare(e);
    using GR = TensorReader<T, RI, Index>;
    using CR = TensorReader<std::int64_t, RI, Index>;
    auto read = [&](const auto& t) {
      return make_reader<RI, Index>(broadcastable(t), shape);
    };
    ReductionSeed<Kind, GR, CR, RI> seed{read(gradient), {}, {}, {}, 1.0, axis};
    if constexpr (Kind == ReductionKind::mean) seed.scale = 1.0 / static_cast<double>(elements);
    if constexpr (Kind != ReductionKind::sum && Kind != ReductionKind::mean) seed.m = read(result);
    if (count.defined()) seed.count = make_reader<RI, Index>(count, shape);
    if (other.defined()) seed.other = make_reader<RI, Index>(other, shape);
    return seed;
  }
  template <class G>
  bool linear(const G&) const {
    return false;
  }
  void check(const Node& node) const { result_version.check(node); }
  void release() {
    result = {};
    count = {};
    other = {};
  }

 private:
  /// The reductions the derivative needs, over the saved expression (no recording).
  void prepare(const E& e) {
    if constexpr (Kind == ReductionKind::max || Kind == ReductionKind::min) {
      if (axis >= 0) {
        if constexpr (R >= 1) {
          if constexpr (Kind == ReductionKind::max) count = broadcastable(argmax(e, axis, true));
          else count = broadcastable(argmin(e, axis, true));
        }
      } else {
        const auto m = broadcastable(result);
        count = broadcastable(sum(where(e == m, 1, where(e != e, where(m != m, 1, 0), 0))));
      }
    } else if constexpr (Kind == ReductionKind::prod) {
      if (axis >= 0) {
        if constexpr (R >= 1) {
          auto nonzero = where(e == 0, 1, e);
          count = broadcastable(sum(where(e == 0, 1, 0), axis, true));
          other = broadcastable(reduce_axis<ProdOp, T, R, decltype(nonzero), false>(nonzero, axis, "prod", false));
        }
      } else {
        count = broadcastable(sum(where(e == 0, 1, 0)));
        auto nonzero = where(e == 0, 1, e);
        other = broadcastable(reduce_all<ProdOp, T, decltype(nonzero), false>(nonzero, "prod", false));
      }
    }
  }
};

/// Records out = reduce(expr) (axis -1: over all elements) for autograd.
template <template <class> class Op, class T, int RO, class D, class E>
void record_reduction(Tensor<T, RO, D>& out, const E& expr, int axis, const char* name) {
  constexpr ReductionKind Kind = reduction_kind_v<Op>;
  if constexpr (Kind != ReductionKind::none && tree_ops_v<E> > sharing_threshold) {
    throw_large_expression<E>();
  } else if constexpr (Kind != ReductionKind::none && !contains_matmul_v<E>) {
    using Policy = ReductionSeedPolicy<Kind, E, T, RO, D>;
    using Node = FusedBackward<Tensor<T, RO, D>, E, E::rank, Policy>;
    out.meta();  // its version counter, shared by the saved result (which holds no graph)
    Policy policy{out.detach(), axis, checked_numel(expr.shape()) / std::max<std::int64_t>(1, out.numel()), {}, {}, {}};
    constexpr bool extreme = Kind == ReductionKind::max || Kind == ReductionKind::min;
    if (Kind == ReductionKind::prod || Kind == ReductionKind::norm || (extreme && axis < 0))
      policy.result_version = SavedVersion::of(out);
    attach(out, new_node<Node>(expr, expr.shape(), std::move(policy), name, axis));
  }
}

}  // namespace et::detail
