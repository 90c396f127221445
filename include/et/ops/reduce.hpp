// Reductions: sum mean max min prod norm (all elements, or one axis), argmax argmin,
// all any (softmax, log_softmax and logsumexp: ops/softmax.hpp). A reduction consumes an
// elementwise expression directly: et::sum((x - y) * (x - y)) reads x and y once and
// never materializes the product. Results are tensors on the expression's device, so a
// reduction inside a further expression (x - et::max(x, 1, true)) is computed once.
//
// CUDA: CUB block reductions (kernels/et/kernels/reduce.cuh), deterministic: the same
// input gives the same bits run after run. CPU: OpenMP with pairwise (cascade)
// accumulation (backend/cpu/reduce.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>

#include "et/backend/cpu/reduce.hpp"
#include "et/backend/reduce_ops.hpp"
#include "et/exec/assign.hpp"
#include "et/expr/operators.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/reduce.hpp"
#endif

namespace et {

/// The third argument of an axis reduction, `true`: keep the reduced axis with extent 1
/// (PyTorch's keepdim=True). The rank is part of the type, so keepdim must be known at
/// compile time: `et::sum(x, 1, true)` gives rank R, `et::sum(x, 1)` rank R - 1, and a
/// literal `false` is a compile error pointing to the two-argument form.
struct KeepDim {
  consteval KeepDim(bool keep) {  // NOLINT(google-explicit-constructor): spelled `true`
    if (!keep) throw "et: keepdim=false: call the reduction without it, e.g. et::sum(x, axis)";
  }
};

namespace detail {

/// The element type of the values a reader of E produces (the compute type).
template <class E>
using read_value_t = typename program_t<E::rank, std::int64_t, E>::value_type;

/// Sums and products of integers and bool give int64 (as in PyTorch); others keep the type.
template <class T>
using sum_result_t = std::conditional_t<is_floating_v<T>, T, std::int64_t>;

template <class E>
using expression_device_t = typename E::device_type;

/// Records a reduction's result when autograd needs it.
template <template <class> class Op, class T, int RO, class D, class E>
void maybe_record_reduction([[maybe_unused]] Tensor<T, RO, D>& out, [[maybe_unused]] const E& expr,
                            [[maybe_unused]] int axis, [[maybe_unused]] const char* name) {
#if !defined(ET_NO_AUTOGRAD)
  if constexpr (is_floating_v<T> && is_floating_v<typename E::value_type>)
    if (grad_enabled() && needs_grad(expr)) record_reduction<Op>(out, expr, axis, name);
#endif
}

template <class E>
void require_device_expression() {
  static_assert(Device<typename E::device_type>, "et: a reduction needs an expression with at least one tensor");
}

/// Reduces every element into a 0-d tensor (recorded for autograd unless Record is false:
/// the derivatives of reductions use reductions themselves). `needs_elements`: an empty input has no
/// answer (max, min, mean, argmax) and throws ShapeError.
template <template <class> class Op, class Out, class E, bool Record = true>
Tensor<Out, 0, expression_device_t<E>> reduce_all(const E& expr, const char* name, bool needs_elements) {
  if constexpr (!devices_agree_in_v<E>) {
    return {};  // two devices met in E: reported there, once; nothing more is compiled
  } else {
    require_device_expression<E>();
    require_defined_operand(expr);
    using D = expression_device_t<E>;
    const auto shape = expr.shape();
    const std::int64_t n = checked_numel(shape);
    if (n == 0 && needs_elements)
      throw ShapeError(std::string("et: ") + name + " of an empty tensor (shape " + format_shape(shape) +
                       ") is undefined");
    auto out = Tensor<Out, 0, D>::allocate({});
    reduce_into(backend<D>, Op<read_value_t<E>>{}, expr, out.data());  // backend/backend.hpp
    if constexpr (Record) maybe_record_reduction<Op>(out, expr, -1, name);
    return out;
  }
}

/// Reduces along `axis` into a tensor of rank OutRank: E::rank - 1, or E::rank with the
/// axis kept as extent 1.
template <template <class> class Op, class Out, int OutRank, class E, bool Record = true>
Tensor<Out, OutRank, expression_device_t<E>> reduce_axis(const E& expr, int axis, const char* name,
                                                         bool needs_elements) {
  if constexpr (!devices_agree_in_v<E>) {
    return {};  // two devices met in E: reported there, once; nothing more is compiled
  } else {
    require_device_expression<E>();
    require_defined_operand(expr);
    constexpr int R = E::rank;
    static_assert(R >= 1, "et: an axis reduction needs an expression of rank 1 or more");
    using D = expression_device_t<E>;
    const auto shape = expr.shape();
    const int a = normalize_axis(axis, R, name, format_shape(shape));
    if (a < 0 || a >= R) __builtin_unreachable();  // normalize_axis threw; tells g++ (-Warray-bounds)
    AxisProblem problem;
    for (int d = 0; d < a; ++d) problem.outer *= shape[static_cast<std::size_t>(d)];
    problem.length = shape[static_cast<std::size_t>(a)];
    for (int d = a + 1; d < R; ++d) problem.inner *= shape[static_cast<std::size_t>(d)];
    Shape<OutRank> out_shape{};
    for (int d = 0, o = 0; d < R; ++d) {
      if (d != a) out_shape[static_cast<std::size_t>(o++)] = shape[static_cast<std::size_t>(d)];
      else if (OutRank == R) out_shape[static_cast<std::size_t>(o++)] = 1;
    }
    const std::int64_t outputs = problem.outer * problem.inner;
    if (problem.length == 0 && outputs > 0 && needs_elements)
      throw ShapeError(std::string("et: ") + name + " over axis " + std::to_string(axis) + " of shape " +
                       format_shape(shape) + " reduces an empty axis");
    auto out = Tensor<Out, OutRank, D>::allocate(out_shape);
    if (outputs > 0) reduce_axis_into(backend<D>, Op<read_value_t<E>>{}, expr, problem, out.data());
    if constexpr (Record) maybe_record_reduction<Op>(out, expr, a, name);
    return out;
  }
}

template <class E>
constexpr void require_floating(const char* /*what*/) {
  static_assert(std::is_floating_point_v<read_value_t<E>>,
                "et: this reduction needs a floating-point expression; convert with et::cast<float>(...)");
}

}  // namespace detail

// --- Over all elements: a 0-d tensor on the expression's device. -------------------

/// Sum of all elements (0 for an empty input). Integers and bool sum to int64.
template <Expression E>
auto sum(const E& e) {
  return detail::reduce_all<detail::SumOp, detail::sum_result_t<typename E::value_type>>(e, "sum", false);
}
/// Product of all elements (1 for an empty input). Integers and bool multiply to int64.
template <Expression E>
auto prod(const E& e) {
  return detail::reduce_all<detail::ProdOp, detail::sum_result_t<typename E::value_type>>(e, "prod", false);
}
/// Arithmetic mean (floating-point only). Throws ShapeError for an empty input.
template <Expression E>
auto mean(const E& e) {
  detail::require_floating<E>("mean");
  return detail::reduce_all<detail::MeanOp, typename E::value_type>(e, "mean", true);
}
/// Largest element; NaN if any element is NaN. Throws ShapeError for an empty input.
template <Expression E>
auto max(const E& e) {
  return detail::reduce_all<detail::MaxOp, typename E::value_type>(e, "max", true);
}
/// Smallest element; NaN if any element is NaN. Throws ShapeError for an empty input.
template <Expression E>
auto min(const E& e) {
  return detail::reduce_all<detail::MinOp, typename E::value_type>(e, "min", true);
}
/// The 2-norm sqrt(sum(x^2)) (floating-point only; 0 for an empty input).
template <Expression E>
auto norm(const E& e) {
  detail::require_floating<E>("norm");
  return detail::reduce_all<detail::NormOp, typename E::value_type>(e, "norm", false);
}
/// True if every element is nonzero (true for an empty input).
template <Expression E>
auto all(const E& e) {
  return detail::reduce_all<detail::AllOp, bool>(e, "all", false);
}
/// True if any element is nonzero (false for an empty input).
template <Expression E>
auto any(const E& e) {
  return detail::reduce_all<detail::AnyOp, bool>(e, "any", false);
}

// --- Over one axis: rank R - 1, or rank R with `true` (keepdim). ---------------------

#define ET_AXIS_REDUCTION(NAME, OP, OUT, NEEDS_ELEMENTS, CHECK)                                      \
  template <Expression E>                                                                           \
  auto NAME(const E& e, int axis) {                                                                 \
    CHECK;                                                                                          \
    return detail::reduce_axis<OP, OUT, E::rank - 1>(e, axis, #NAME, NEEDS_ELEMENTS);               \
  }                                                                                                 \
  template <Expression E>                                                                           \
  auto NAME(const E& e, int axis, KeepDim) {                                                        \
    CHECK;                                                                                          \
    return detail::reduce_axis<OP, OUT, E::rank>(e, axis, #NAME, NEEDS_ELEMENTS);                   \
  }
ET_AXIS_REDUCTION(sum, detail::SumOp, detail::sum_result_t<typename E::value_type>, false, (void)0)
ET_AXIS_REDUCTION(prod, detail::ProdOp, detail::sum_result_t<typename E::value_type>, false, (void)0)
ET_AXIS_REDUCTION(mean, detail::MeanOp, typename E::value_type, true, detail::require_floating<E>("mean"))
ET_AXIS_REDUCTION(max, detail::MaxOp, typename E::value_type, true, (void)0)
ET_AXIS_REDUCTION(min, detail::MinOp, typename E::value_type, true, (void)0)
ET_AXIS_REDUCTION(norm, detail::NormOp, typename E::value_type, false, detail::require_floating<E>("norm"))
ET_AXIS_REDUCTION(all, detail::AllOp, bool, false, (void)0)
ET_AXIS_REDUCTION(any, detail::AnyOp, bool, false, (void)0)
ET_AXIS_REDUCTION(argmax, detail::ArgMaxOp, std::int64_t, true, (void)0)
ET_AXIS_REDUCTION(argmin, detail::ArgMinOp, std::int64_t, true, (void)0)
#undef ET_AXIS_REDUCTION

}  // namespace et

namespace et::detail {

// Summing a broadcast gradient down to an operand's shape (the backward of expand() and of
// every broadcast operand). Backward code only: its views, copies and sums record nothing
// (a gradient is never differentiated again), so a program that records one operation does
// not also compile the recording of every view and reduction these would otherwise reach.

template <std::size_t R>
struct SumPlan {
  std::array<int, R> order{};             ///< buffer axis k is index-space axis order[k]
  std::array<std::int64_t, R> extents{};  ///< the buffer's shape
  std::array<int, R> inverse{};           ///< index-space axis d is buffer axis inverse[d]
  std::int64_t kept = 1, summed = 1;
  int kept_axes = 0;                      ///< buffer axes [0, kept_axes) are kept, the rest summed
};
template <std::size_t N, std::size_t R>
SumPlan<R> sum_plan(const std::array<std::int64_t, N>& to, const std::array<std::int64_t, R>& shape) {
  SumPlan<R> plan;
  std::size_t k = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (std::size_t d = 0; d != R; ++d) {
      const std::int64_t extent = d + N + 1 > R ? to[d + N - R] : 1;  // (not >= R: R may be 0)
      const bool sums = extent != shape[d];
      if (sums != (pass == 1)) continue;
      (sums ? plan.summed : plan.kept) *= shape[d];
      plan.kept_axes += sums ? 0 : 1;
      plan.inverse[d] = static_cast<int>(k);
      plan.order[k] = static_cast<int>(d);
      plan.extents[k++] = shape[d];
    }
  return plan;
}

/// The shape of rank N that sum_plan(to, shape) sums down to: `to` again, from the plan
/// (an axis is summed only where `to` has extent 1 or lacks it).
template <std::size_t N, std::size_t R>
std::array<std::int64_t, N> sum_target(const SumPlan<R>& plan, const std::array<std::int64_t, R>& shape) {
  std::array<std::int64_t, N> to{};
  for (std::size_t k = 0; k != N; ++k) {
    const std::size_t d = k + R - N;
    to[k] = plan.inverse[d] < plan.kept_axes ? shape[d] : 1;
  }
  return to;
}

/// Whether a gradient is summed by `plan` in its own layout, on the CPU: where the summed
/// axes all come before the kept ones (a bias's gradient) and at least 64 elements are kept,
/// the contiguous gradient's rows are added up in order (cpu_backend::sum_leading_rows)
/// instead of staging it transposed, which writes every element to a distant place.
template <class D, std::size_t R>
bool sums_leading_rows(const SumPlan<R>& plan) {
  if constexpr (D::is_cuda) {
    return false;
  } else {
    bool leading = plan.kept >= 64;
    for (int k = 0; k < plan.kept_axes; ++k) leading = leading && plan.order[k] == int(R) - plan.kept_axes + k;
    return leading;
  }
}

/// A buffer for a gradient over `shape` that will be summed down by `plan`, seen in the
/// index space's axis order (so it can be written as any tensor of that shape): contiguous
/// where sums_leading_rows, else transposed so that the summed axes come last.
template <class T, class D, std::size_t R>
Tensor<T, int(R), D> staging_buffer(const SumPlan<R>& plan) {
  if (sums_leading_rows<D>(plan)) {
    std::array<std::int64_t, R> shape{};
    for (std::size_t d = 0; d != R; ++d) shape[d] = plan.extents[std::size_t(plan.inverse[d])];
    return Tensor<T, int(R), D>::allocate(shape);
  }
  const auto buffer = Tensor<T, int(R), D>::allocate(plan.extents);
  return untracked_view(buffer, permute_layout(layout_of(buffer), plan.inverse));
}

/// The staged gradient (a buffer from staging_buffer(plan)) summed down to `to` (the sum is
/// skipped where nothing is summed). Read in the plan's order the buffer is contiguous
/// again, and so are its [kept, summed] rows and their sums; where sums_leading_rows, its
/// [summed, kept] rows are added up in place.
template <class T, int R, class D, std::size_t N>
Tensor<T, int(N), D> finish_sum(const Tensor<T, R, D>& staged, const SumPlan<std::size_t(R)>& plan,
                                const std::array<std::int64_t, N>& to) {
  auto contiguous_as = [](const auto& t, const auto& shape) {
    return untracked_view(t, StridedLayout<std::tuple_size_v<std::remove_cvref_t<decltype(shape)>>>{
                                 shape, contiguous_strides(shape), t.offset()});
  };
  if (plan.summed == 1) return contiguous_as(staged, to);
  if constexpr (!D::is_cuda) {
    if (sums_leading_rows<D>(plan) && staged.is_contiguous()) {
      auto out = Tensor<T, int(N), D>::allocate(to);
      cpu_backend::sum_leading_rows(staged.data(), plan.summed, plan.kept, out.data());
      return out;
    }
  }
  const auto rows = contiguous_as(staged, std::array<std::int64_t, 2>{plan.kept, plan.summed});
  return contiguous_as(reduce_axis<SumOp, T, 1, Tensor<T, 2, D>, false>(rows, 1, "sum", false), to);
}

template <class T, int R, class D, std::size_t N>
Tensor<T, int(N), D> sum_to(const Tensor<T, R, D>& g, const std::array<std::int64_t, N>& shape) {
  const auto plan = sum_plan(shape, g.shape());
  if (plan.summed == 1) return untracked_reshape(g, shape);  // nothing to sum: a view, or a copy
  if (sums_leading_rows<D>(plan) && g.is_contiguous()) return finish_sum(g, plan, shape);  // no staging copy
  auto staged = staging_buffer<T, D>(plan);
  evaluate(staged, g);
  return finish_sum(staged, plan, shape);
}

}  // namespace et::detail
