// How a whole assignment runs: static checks (devices, rank, truncation), shape checks,
// aliasing, then exactly one evaluation on the destination's device.
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "et/backend/cpu/elementwise.hpp"
#include "et/eval/evaluator.hpp"
#include "et/exec/lowering.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/elementwise.hpp"
#else
#include "et/backend/cuda/unavailable.hpp"
#endif

namespace et::detail {

/// Throws ShapeError unless `from` broadcasts to exactly `to` (trailing axes aligned).
template <std::size_t To, std::size_t From>
void check_assignable(const std::array<std::int64_t, To>& to, const std::array<std::int64_t, From>& from) {
  for (std::size_t k = 0; k != From; ++k) {
    const std::int64_t extent = from[From - 1 - k];
    if (extent != 1 && extent != to[To - 1 - k])
      throw ShapeError("et: cannot assign an expression of shape " + format_shape(from) + " to a tensor of shape " +
                       format_shape(to));
  }
}

/// reads_overlap_writes' walker (a functor, not a lambda: compiled once per leaf type, not
/// per expression): does a tensor leaf share dst's storage but read other elements than
/// the one written at the same index?
template <class T, int R, class D>
struct OverlapCheck {
  const Tensor<T, R, D>& dst;
  bool overlap = false;
  template <class U, int N, class DU>
  void operator()(const Tensor<U, N, DU>& leaf) {
    if (!leaf.storage() || leaf.storage() != dst.storage()) return;
    bool same_elements = static_cast<const void*>(leaf.data()) == static_cast<const void*>(dst.data()) &&
                         sizeof(U) == sizeof(T);
    const auto strides = broadcast_strides(leaf.shape(), leaf.strides(), dst.shape());
    for (int d = 0; d < R; ++d)
      if (dst.shape()[d] != 1 && strides[d] != dst.strides()[d]) same_elements = false;
    overlap = overlap || !same_elements;
  }
  template <class Leaf>
  void operator()(const Leaf&) {}  // a generator reads no memory
};

/// True when some operand shares the destination's storage but would read other elements
/// than the one being written at the same index: then a temporary keeps the result right.
template <class T, int R, class D, class E>
bool reads_overlap_writes(const Tensor<T, R, D>& dst, const E& expr) {
  OverlapCheck<T, R, D> check{dst};
  for_each_leaf(expr, check);
  return check.overlap;
}

/// The most bytes of kernel arguments a CUDA launch takes (CUDA 12.1 and later, Volta
/// and later GPUs); an expression whose program and writer pass it is split, on every
/// device alike, so that the CPU evaluates (and rounds) it the same way.
inline constexpr std::size_t kernel_parameter_limit = 32764;

template <class T, int R, class E>
inline constexpr bool fits_one_kernel_v =
    sizeof(program_t<R, std::int64_t, E>) + sizeof(Writer<T, R, std::int64_t>) + 2 * sizeof(Coord<R, std::int64_t>) <=
    kernel_parameter_limit;

template <class T, int R, class D, class E>
void run_on_device(const Tensor<T, R, D>& dst, const E& expr);

/// Evaluates an expression too large for one kernel's arguments as several: each map
/// operand of the root is materialized (recursively split where it is still too large),
/// in its compute type, and the root then reads those temporaries.
template <class T, int R, class D, class Op, class... Cs>
void run_split(const Tensor<T, R, D>& dst, const MapExpr<Op, Cs...>& expr) {
  auto materialize = [&](const auto& child) {
    using C = std::remove_cvref_t<decltype(child)>;
    if constexpr (is_map_v<C>) {
      const auto temporary = Tensor<compute_t<typename C::value_type>, C::rank, D>::allocate(child.shape());
      run_on_device(temporary, child);
      return temporary;
    } else {
      return child;
    }
  };
  std::apply([&](const auto&... children) { run_on_device(dst, make_map<Op>(materialize(children)...)); },
             expr.children());
}

template <class T, int R, class D, class E>
void run_on_device(const Tensor<T, R, D>& dst, const E& expr) {
  if constexpr (!fits_one_kernel_v<T, R, E>) run_split(dst, expr);
  else run_elementwise(backend<D>, dst, expr);  // backend/backend.hpp
}

/// True when some tensor of the expression needs a gradient (derivatives/fused.hpp walks
/// matmul operands too). Overloads per node type, found by argument-dependent lookup.
template <class T, int R, class D>
bool needs_grad(const Tensor<T, R, D>& t) {
  return meta_needs_grad(t.autograd_meta());
}
template <class E>
  requires(!is_tensor_v<E> && !is_map_v<E>)
bool needs_grad(const E&) {
  return false;
}
/// Walks an expression as for_each_leaf does (evaluator.hpp): two instantiation levels per
/// tree level, not std::apply's five (a 31-level chain passed g++'s limit of 900), and a
/// node whose copies share one heap block once (a deep shared form is not walked 2^depth times).
struct GradWalk {
  WalkedNodes walked;
  template <class Op, class... Cs>
  bool operator()(const MapExpr<Op, Cs...>& e) {
    if (!walked.first_visit(e.identity())) return false;
    return children(e, std::index_sequence_for<Cs...>{});
  }
  template <class Leaf>
  bool operator()(const Leaf& leaf) {
    return needs_grad(leaf);  // a tensor, a scalar, a generator, a matmul (lowering.hpp)
  }
  template <class Op, class... Cs, std::size_t... Is>
  bool children(const MapExpr<Op, Cs...>& e, std::index_sequence<Is...>) {
    return ((*this)(std::get<Is>(e.children())) || ...);
  }
};
template <class Op, class... Cs>
bool needs_grad(const MapExpr<Op, Cs...>& e) {
  return GradWalk{}(e);
}

/// False for an expression that can never need a gradient: it reads no floating-point
/// tensor and holds no matrix product (an integer tensor cast to float, scalars, random
/// numbers). Its recording code is then not even compiled.
template <class E>
inline constexpr bool may_need_grad_v = contains_matmul_v<E>;
template <class T, int R, class D>
inline constexpr bool may_need_grad_v<Tensor<T, R, D>> = is_floating_v<T>;
template <class Op, class... Cs>
inline constexpr bool may_need_grad_v<MapExpr<Op, Cs...>> = (may_need_grad_v<Cs> || ...);

/// The shape an assignment to dst gives it: dst's own, or, when dst is undefined, the
/// expression's.
template <class T, int Rank, class D, class E>
Shape<Rank> assigned_shape(const Tensor<T, Rank, D>& dst, const E& expr) {
  if (dst.defined()) return dst.shape();
  Shape<Rank> shape;
  shape.fill(1);
  return broadcast_shape(shape, expr.shape());
}

/// The evaluation itself, recorded or not: allocates an undefined dst, checks shapes and
/// overlap, then runs one kernel (one loop on the CPU).
template <class T, int Rank, class D, class E>
void evaluate(Tensor<T, Rank, D>& dst, const E& expr, Aliasing aliasing) {
  if (!dst.defined()) dst = Tensor<T, Rank, D>::allocate(assigned_shape(dst, expr));
  else dst.note_write();  // an in-place write (autograd's version counter)
  check_assignable(dst.shape(), expr.shape());
  check_no_internal_overlap(dst.shape(), dst.strides());  // an expand()ed destination: writes would race
  if (dst.numel() == 0) return;
  if constexpr (contains_matmul_v<E>) {
    assign_with_matmul(dst, expr);  // ops/linalg.hpp: the GEMMs first, then the elementwise rest
  } else if (aliasing == Aliasing::checked && reads_overlap_writes(dst, expr)) {
    const Tensor<T, Rank, D> temporary = Tensor<T, Rank, D>::allocate(dst.shape());
    run_on_device(temporary, expr);
    run_on_device(dst, temporary);
  } else {
    run_on_device(dst, expr);
  }
}

template <class T, int Rank, class D, class E>
void assign(Tensor<T, Rank, D>& dst, const E& expr, Aliasing aliasing) {
  [[maybe_unused]] const auto checked = common_device_of<D, typename E::device_type>();
  // Operands on two devices: reported once, where they met; nothing more is compiled.
  constexpr bool one_device = devices_agree_v<D, typename E::device_type> && devices_agree_in_v<E>;
#if !defined(ET_DEVICE_COMPILER)
  if constexpr (D::is_cuda && one_device) {  // here rather than only in run_on_device: a shorter report
    [[maybe_unused]] cuda_evaluation_needs_nvcc<D> report;
  }
#endif
  constexpr bool rank_fits = E::rank <= Rank;
  constexpr bool no_truncation = is_floating_v<T> || !is_floating_v<typename E::value_type>;
  static_assert(rank_fits, "et: cannot assign an expression to a tensor of lower rank");
  static_assert(no_truncation,
                "et: assigning a floating-point expression to an integer or bool tensor would truncate; "
                "convert explicitly with et::cast<T>(expr)");
  if constexpr (one_device && rank_fits && no_truncation) {  // after a failed check, report nothing more
#if !defined(ET_NO_AUTOGRAD)
    if constexpr (is_floating_v<T>) {
      if (dst.is_view() && grad_enabled() && (dst.requires_grad() || needs_grad(expr)))
        return assign_into_view(dst, expr);
    }
    if constexpr (is_floating_v<T> && is_floating_v<typename E::value_type> && may_need_grad_v<E>) {
      if (grad_enabled() && needs_grad(expr)) return assign_recorded(dst, expr);
    }
#endif
    evaluate(dst, expr, aliasing);  // a recorded assignment above keeps the check: its backward reads the operands
#if !defined(ET_NO_AUTOGRAD)
    if constexpr (is_floating_v<T>) {
      if (!dst.is_leaf() && grad_enabled()) record_constant_write(dst);  // its old history no longer applies
    }
#endif
  }
}

/// Evaluates an expression into a new contiguous tensor of its own shape and rank.
template <Expression E>
auto eval(const E& expr) {
  using D = typename E::device_type;
  static_assert(Device<D>, "et: eval() needs an expression with at least one tensor (scalars have no device)");
  Tensor<typename E::value_type, E::rank, D> out;  // undefined: assign allocates it
  assign(out, expr);
  return out;
}

}  // namespace et::detail

namespace et {
using detail::eval;

/// `et::noalias(dst) = expr` (Eigen's `dst.noalias() = expr`): the caller promises that no
/// operand reads an element of dst other than the one written at the same index, so the
/// assignment runs one kernel straight into dst where it would otherwise evaluate into a
/// temporary first (an operand that is another window of dst's storage: the check cannot
/// tell two windows that do not meet from two that do). Where an operand does read other
/// elements of dst, the result is unspecified (elements are written in no set order). A
/// recorded assignment (a gradient needed) keeps the check. dst must be defined; +=, -=, *=
/// and /= likewise.
template <class T, int Rank, class D>
class NoAlias {
 public:
  explicit NoAlias(Tensor<T, Rank, D>& dst) : dst_(&dst) { require_defined(); }
  explicit NoAlias(Tensor<T, Rank, D>&& view) : owned_(std::move(view)), dst_(&owned_) { require_defined(); }
  NoAlias(const NoAlias&) = delete;  // it refers to dst: used where it is made, as Eigen's proxy is
  NoAlias& operator=(const NoAlias&) = delete;
  template <Expression E>
  NoAlias& operator=(const E& expr) {
    [[maybe_unused]] detail::same_devices<D, typename E::device_type> check;
    detail::assign(*dst_, expr, detail::Aliasing::promised_none);
    return *this;
  }
  template <Operand X>
  NoAlias& operator+=(const X& x) { return compound<detail::Add>(x); }
  template <Operand X>
  NoAlias& operator-=(const X& x) { return compound<detail::Sub>(x); }
  template <Operand X>
  NoAlias& operator*=(const X& x) { return compound<detail::Mul>(x); }
  template <Operand X>
  NoAlias& operator/=(const X& x) { return compound<detail::Div>(x); }

 private:
  template <class Op, class X>
  NoAlias& compound(const X& x) {
    [[maybe_unused]] detail::same_device_operands<Tensor<T, Rank, D>, X> check;
    detail::assign(*dst_, detail::make_map<Op>(*dst_, x), detail::Aliasing::promised_none);
    return *this;
  }
  void require_defined() const {
    if (!dst_->defined()) throw Error("et: noalias() on an undefined (default-constructed) tensor");
  }
  Tensor<T, Rank, D> owned_;  // a temporary view (noalias(a.t(...))): its handle lives here
  Tensor<T, Rank, D>* dst_;   // the tensor written: recording attaches its history there
};

template <Element T, int Rank, Device D>
NoAlias<T, Rank, D> noalias(Tensor<T, Rank, D>& dst) {
  return NoAlias<T, Rank, D>(dst);
}
template <Element T, int Rank, Device D>
NoAlias<T, Rank, D> noalias(Tensor<T, Rank, D>&& view) {
  return NoAlias<T, Rank, D>(std::move(view));
}
}
