// Reduction operators: how elements are lifted into an accumulator, combined and
// finished. The same ET_HD code runs in the CUDA kernels and the CPU loops. Each
// operator is a class template over the element's compute type `In`.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "et/config.hpp"
#include "et/expr/functors.hpp"
#include "et/types.hpp"

namespace et::detail {

/// A reduction along one axis, seen in the expression's row-major index space as
/// [outer, length, inner]: element (o, j, k) is at linear index (o * length + j) * inner + k.
/// inner == 1 reduces the innermost (contiguous) axis: "rows"; otherwise "columns".
struct AxisProblem {
  std::int64_t outer = 1, length = 1, inner = 1;
};

/// Sums accumulate in float for float (and narrower floating types), double for
/// double, and int64 for integers and bool (as in PyTorch).
template <class In>
using sum_accumulator_t =
    std::conditional_t<std::is_same_v<In, double>, double,
                       std::conditional_t<std::is_floating_point_v<In>, float, std::int64_t>>;

template <class Acc>
ET_HD Acc wrapping_add(Acc a, Acc b) {
  return arithmetic<Acc>(a, b, PlusFn{});
}

template <class In>
struct SumOp {
  using acc_type = sum_accumulator_t<In>;
  ET_HD static acc_type identity() { return acc_type(0); }
  ET_HD static acc_type lift(In x, std::int64_t) { return acc_type(x); }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return wrapping_add(a, b); }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

template <class In>
struct MeanOp : SumOp<In> {
  using acc_type = sum_accumulator_t<In>;
  ET_HD static acc_type finish(acc_type a, std::int64_t count) { return a / static_cast<acc_type>(count); }
};

template <class In>
struct ProdOp {
  using acc_type = sum_accumulator_t<In>;
  ET_HD static acc_type identity() { return acc_type(1); }
  ET_HD static acc_type lift(In x, std::int64_t) { return acc_type(x); }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return arithmetic<acc_type>(a, b, TimesFn{}); }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

/// The 2-norm, sqrt(sum(x^2)).
template <class In>
struct NormOp {
  using acc_type = sum_accumulator_t<In>;
  ET_HD static acc_type identity() { return acc_type(0); }
  ET_HD static acc_type lift(In x, std::int64_t) { return acc_type(x) * acc_type(x); }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return a + b; }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return math::sqrt(a); }
};

/// max and min propagate NaN (as torch.max does, unlike IEEE fmax).
template <class In>
struct MaxOp {
  using acc_type = In;
  ET_HD static acc_type identity() {
    if constexpr (std::is_floating_point_v<In>) return -std::numeric_limits<In>::infinity();
    else return std::numeric_limits<In>::lowest();
  }
  ET_HD static acc_type lift(In x, std::int64_t) { return x; }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return Maximum{}(a, b); }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

template <class In>
struct MinOp {
  using acc_type = In;
  ET_HD static acc_type identity() {
    if constexpr (std::is_floating_point_v<In>) return std::numeric_limits<In>::infinity();
    else return std::numeric_limits<In>::max();
  }
  ET_HD static acc_type lift(In x, std::int64_t) { return x; }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return Minimum{}(a, b); }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

template <class In>
struct AllOp {
  using acc_type = bool;
  ET_HD static acc_type identity() { return true; }
  ET_HD static acc_type lift(In x, std::int64_t) { return static_cast<bool>(x); }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return a && b; }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

template <class In>
struct AnyOp {
  using acc_type = bool;
  ET_HD static acc_type identity() { return false; }
  ET_HD static acc_type lift(In x, std::int64_t) { return static_cast<bool>(x); }
  ET_HD static acc_type combine(acc_type a, acc_type b) { return a || b; }
  ET_HD static acc_type finish(acc_type a, std::int64_t) { return a; }
};

/// A value and where it was found (its index along the reduced axis).
template <class In>
struct ValueIndex {
  In value;
  std::int64_t index;
};

/// argmax/argmin: the first index of the extreme value; a NaN counts as the extreme
/// (PyTorch's rule), so the first NaN wins.
template <class In, bool Largest>
struct ArgExtremeOp {
  using acc_type = ValueIndex<In>;
  ET_HD static acc_type identity() {
    return {Largest ? MaxOp<In>::identity() : MinOp<In>::identity(), std::numeric_limits<std::int64_t>::max()};
  }
  ET_HD static acc_type lift(In x, std::int64_t index) { return {x, index}; }
  ET_HD static acc_type combine(acc_type a, acc_type b) {
    const bool a_nan = is_nan(a.value), b_nan = is_nan(b.value);
    if (a_nan || b_nan) {
      if (a_nan && b_nan) return a.index <= b.index ? a : b;
      return a_nan ? a : b;
    }
    const bool b_better = Largest ? b.value > a.value : b.value < a.value;
    if (b_better || (b.value == a.value && b.index < a.index)) return b;
    return a;
  }
  ET_HD static std::int64_t finish(acc_type a, std::int64_t) { return a.index; }
};
template <class In>
using ArgMaxOp = ArgExtremeOp<In, true>;
template <class In>
using ArgMinOp = ArgExtremeOp<In, false>;

}  // namespace et::detail
