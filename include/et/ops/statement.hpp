// Statements of several outputs: et::assign(std::tie(d1, d2, ...), e1, e2, ...) writes every
// destination from its expression in ONE pass over one index space, and may end in full
// reductions (et::sum_of, max_of, min_of) and 0-d values computed once the pass is over:
//
//   et::assign(std::tie(x, r), x + alpha * p, r - alpha * Ap);      // two updates, one kernel
//   auto r_new = r - alpha * Ap;
//   et::assign(std::tie(x, r, rr), x + alpha * p, r_new, et::sum_of(r_new * r_new));   // CG
//   et::assign(rr, et::sum_of(r * r));                               // a reduction into rr itself
//
// Every expression reads the values from before the statement. The index space is the shape
// of the destinations of the highest rank (they must all have it; each expression broadcasts
// to it); a 0-d destination there takes a reduction of an expression of exactly that shape,
// or a 0-d expression (a "final", computed after the pass: rr = rr_new while the pass reads
// rr). Without such destinations the reductions' shape is the index space. Destinations may
// not overlap one another (et::Error). A statement that records for autograd, or whose
// expression reads another element of a destination than the one written at its index, is
// evaluated part by part (every expression into a temporary, then every destination
// written): the same values, in several kernels.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "et/backend/cpu/statement.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/reduce.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/statement.hpp"
#else
#include "et/backend/cuda/unavailable.hpp"
#endif

namespace et {

namespace detail {

/// A full reduction as a statement's source: et::sum_of, max_of, min_of.
template <template <class> class Op, class E>
struct ReductionOf {
  E expr;
  const char* name;
  bool needs_elements;  ///< an empty index space has no answer (max_of, min_of)
};
template <class X>
inline constexpr bool is_reduction_of_v = false;
template <template <class> class Op, class E>
inline constexpr bool is_reduction_of_v<ReductionOf<Op, E>> = true;

}  // namespace detail

/// The sum of every element of `e` over a statement's index space, into a 0-d destination of
/// et::assign (only there: et::sum(e) computes at once).
template <Expression E>
detail::ReductionOf<detail::SumOp, E> sum_of(const E& e) {
  return {e, "sum_of", false};
}
/// The largest (max_of) or smallest (min_of) element; NaN propagates; an empty index space
/// has none (et::ShapeError).
template <Expression E>
detail::ReductionOf<detail::MaxOp, E> max_of(const E& e) {
  return {e, "max_of", true};
}
template <Expression E>
detail::ReductionOf<detail::MinOp, E> min_of(const E& e) {
  return {e, "min_of", true};
}

namespace detail {

template <class Src>
constexpr int element_rank_of() {
  if constexpr (is_reduction_of_v<Src>) return -1;
  else return 0;
}

/// The index space's rank: the highest rank of a destination whose source is an expression,
/// or, where that is 0 or there is none, the reductions' operands' rank.
template <class... Ds, class... Ss>
constexpr int statement_rank(std::type_identity<std::tuple<Ds...>>, std::type_identity<std::tuple<Ss...>>) {
  int element = -1, reduced = -1;
  const auto one = [&]<class D, class S>(std::type_identity<D>, std::type_identity<S>) {
    if constexpr (is_reduction_of_v<S>) reduced = std::max(reduced, decltype(S::expr)::rank);
    else element = std::max(element, D::rank);
  };
  (one(std::type_identity<Ds>{}, std::type_identity<Ss>{}), ...);
  return element > 0 ? element : std::max(reduced, 0);
}

template <class Dst, class E>
struct ElementPart {
  Dst* dst;
  E expr;
};
template <template <class> class Op, class Dst, class E>
struct ReductionPart {
  template <class In>
  using op = Op<In>;  // what the backends read it through (they know no ReductionPart)
  Dst* dst;
  E expr;
  const char* name;
  bool needs_elements;
};
template <class Dst, class E>
struct FinalPart {
  Dst* dst;
  E expr;
};

template <class Dst, class E>
constexpr void check_statement_types() {
  static_assert(is_floating_v<typename Dst::value_type> || !is_floating_v<typename E::value_type>,
                "et: assigning a floating-point expression to an integer or bool tensor would truncate; convert "
                "explicitly with et::cast<T>(expr)");
}

/// The destination's part in a statement of index-space rank R, as a tuple of one (or none,
/// for the kinds it is not).
template <int R, class Dst, class Src>
auto element_part(Dst& dst, const Src& src) {
  if constexpr (!is_reduction_of_v<Src> && Dst::rank == R) {
    check_statement_types<Dst, Src>();
    static_assert(Src::rank <= R, "et: cannot assign an expression to a tensor of lower rank");
    return std::tuple{ElementPart<Dst, Src>{&dst, src}};
  } else {
    return std::tuple<>{};
  }
}
template <int R, class Dst, class Src>
auto reduction_part(Dst& dst, const Src& src) {
  if constexpr (is_reduction_of_v<Src>) {
    static_assert(Dst::rank == 0, "et: assign: a reduction (sum_of, max_of, min_of) goes into a 0-d tensor");
    static_assert(decltype(src.expr)::rank == R,
                  "et: assign: a reduction's operand has the rank of the statement's index space");
    check_statement_types<Dst, decltype(src.expr)>();
    return [&]<template <class> class Op, class E>(const ReductionOf<Op, E>& r) {
      return std::tuple{ReductionPart<Op, Dst, E>{&dst, r.expr, r.name, r.needs_elements}};
    }(src);
  } else {
    return std::tuple<>{};
  }
}
template <int R, class Dst, class Src>
auto final_part(Dst& dst, const Src& src) {
  if constexpr (!is_reduction_of_v<Src> && Dst::rank != R) {
    static_assert(Dst::rank == 0,
                  "et: assign: every destination has the statement's rank or is 0-d (a reduction or a final value)");
    static_assert(Src::rank == 0, "et: assign: a 0-d destination beside the statement's index space takes a 0-d "
                                  "expression (or a reduction: et::sum_of)");
    check_statement_types<Dst, Src>();
    return std::tuple{FinalPart<Dst, Src>{&dst, src}};
  } else {
    return std::tuple<>{};
  }
}

/// Whether some source or destination takes part in autograd: then the statement records,
/// part by part.
template <class Elements, class Reductions, class Finals>
bool statement_records([[maybe_unused]] const Elements& elements, [[maybe_unused]] const Reductions& reductions,
                       [[maybe_unused]] const Finals& finals) {
#if defined(ET_NO_AUTOGRAD)
  return false;
#else
  if (!grad_enabled()) return false;
  bool records = false;
  const auto part = [&](const auto& p) {
    records = records || p.dst->requires_grad() || needs_grad(p.expr);
  };
  std::apply([&](const auto&... p) { (part(p), ...); }, elements);
  std::apply([&](const auto&... p) { (part(p), ...); }, reductions);
  std::apply([&](const auto&... p) { (part(p), ...); }, finals);
  return records;
#endif
}

/// The statement part by part: every source evaluated (recorded where autograd asks), then
/// every destination written.
template <int R, class D, class Elements, class Reductions, class Finals>
void statement_by_parts(const Shape<R>& space, const Elements& elements, const Reductions& reductions,
                        const Finals& finals) {
  const auto element_value = [&](const auto& p) {
    using Dst = std::remove_pointer_t<decltype(p.dst)>;
    auto value = Dst::allocate(space);
    assign(value, p.expr);
    return value;
  };
  const auto reduction_value = [&]<template <class> class Op, class Dst, class E>(const ReductionPart<Op, Dst, E>& p) {
    return reduce_all<Op, typename Dst::value_type>(p.expr, p.name, p.needs_elements);
  };
  const auto final_value = [](const auto& p) { return eval(p.expr); };
  auto element_values = std::apply([&](const auto&... p) { return std::tuple{element_value(p)...}; }, elements);
  auto reduction_values = std::apply([&](const auto&... p) { return std::tuple{reduction_value(p)...}; }, reductions);
  auto final_values = std::apply([&](const auto&... p) { return std::tuple{final_value(p)...}; }, finals);
  const auto write = [](const auto& parts, auto& values) {
    [&]<std::size_t... Is>(std::index_sequence<Is...>) {
      (assign(*std::get<Is>(parts).dst, std::get<Is>(values)), ...);
    }(std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(parts)>>>{});
  };
  write(elements, element_values);
  write(reductions, reduction_values);
  write(finals, final_values);
}

/// The byte range [first, last] of a destination's elements in its storage.
template <class T, int R, class D>
std::pair<std::int64_t, std::int64_t> element_span(const Tensor<T, R, D>& t) {
  const std::int64_t first = t.offset() * std::int64_t(sizeof(T));
  return {first, first + (max_offset(t.shape(), t.strides()) + 1) * std::int64_t(sizeof(T)) - 1};
}

template <int R, class D, class Elements, class Reductions, class Finals>
void run_statement_parts(const Elements& elements, const Reductions& reductions, const Finals& finals) {
  Shape<R> space{};
  if constexpr (std::tuple_size_v<Elements> > 0) {
    if (!std::get<0>(elements).dst->defined()) throw Error("et: assign: a destination is undefined (default-constructed)");
    space = std::get<0>(elements).dst->shape();
  } else if constexpr (std::tuple_size_v<Reductions> > 0) {
    require_defined_operand(std::get<0>(reductions).expr);
    space = std::get<0>(reductions).expr.shape();
  }
  const std::string where = "et: assign: ";
  const auto check_destination = [&](const auto& p, const auto& shape) {
    if (!p.dst->defined()) throw Error(where + "a destination is undefined (default-constructed)");
    if (p.dst->shape() != shape)
      throw ShapeError(where + "a destination has shape " + format_shape(p.dst->shape()) + ", the statement's index space " +
                       format_shape(shape) + " (destinations of the statement's rank share its shape)");
    check_no_internal_overlap(p.dst->shape(), p.dst->strides());
  };
  std::apply([&](const auto&... p) {
    ((check_destination(p, space), require_defined_operand(p.expr), check_assignable(space, p.expr.shape())), ...);
  }, elements);
  std::apply([&](const auto&... p) {
    ((check_destination(p, Shape<0>{}), require_defined_operand(p.expr),
      p.expr.shape() == space ? void()
                              : throw ShapeError(where + p.name + "'s operand has shape " + format_shape(p.expr.shape()) +
                                                 ", the statement's index space " + format_shape(space))),
     ...);
    ((checked_numel(space) == 0 && p.needs_elements
          ? throw ShapeError(where + p.name + " over an empty index space " + format_shape(space) + " is undefined")
          : void()),
     ...);
  }, reductions);
  std::apply([&](const auto&... p) { ((check_destination(p, Shape<0>{}), require_defined_operand(p.expr)), ...); },
             finals);
  // Destinations must not share elements: each is written once, by one output.
  std::vector<std::tuple<const void*, std::int64_t, std::int64_t>> spans;
  const auto span = [&](const auto& p) {
    if (p.dst->numel() == 0) return;
    const auto [first, last] = element_span(*p.dst);
    for (const auto& [storage, f, l] : spans)
      if (storage == p.dst->storage().get() && first <= l && f <= last)
        throw Error(where + "two destinations share storage and overlap (or interleave): each element of a "
                            "statement is written by one output");
    spans.emplace_back(p.dst->storage().get(), first, last);
  };
  std::apply([&](const auto&... p) { (span(p), ...); }, elements);
  std::apply([&](const auto&... p) { (span(p), ...); }, reductions);
  std::apply([&](const auto&... p) { (span(p), ...); }, finals);
  // An element destination read at other elements than its own by some expression of the
  // pass: the pass would read what it already wrote.
  bool overlap = false;
  const auto reads = [&](const auto& expr) {
    std::apply([&](const auto&... p) { ((overlap = overlap || reads_overlap_writes(*p.dst, expr)), ...); }, elements);
  };
  std::apply([&](const auto&... p) { (reads(p.expr), ...); }, elements);
  std::apply([&](const auto&... p) { (reads(p.expr), ...); }, reductions);
  if (overlap || statement_records(elements, reductions, finals))
    return statement_by_parts<R, D>(space, elements, reductions, finals);
  std::apply([&](const auto&... p) { (p.dst->note_write(), ...); }, elements);
  std::apply([&](const auto&... p) { (p.dst->note_write(), ...); }, reductions);
  std::apply([&](const auto&... p) { (p.dst->note_write(), ...); }, finals);
  run_statement(backend<D>, space, elements, reductions, finals);  // backend/backend.hpp
}

template <class... Ds, class... Ss, std::size_t... Is>
void assign_statement(const std::tuple<Ds&...>& destinations, const std::tuple<const Ss&...>& sources,
                      std::index_sequence<Is...>) {
  constexpr int R = statement_rank(std::type_identity<std::tuple<Ds...>>{}, std::type_identity<std::tuple<Ss...>>{});
  using D = typename std::tuple_element_t<0, std::tuple<Ds...>>::device_type;
  const auto elements = std::tuple_cat(element_part<R>(std::get<Is>(destinations), std::get<Is>(sources))...);
  const auto reductions = std::tuple_cat(reduction_part<R>(std::get<Is>(destinations), std::get<Is>(sources))...);
  const auto finals = std::tuple_cat(final_part<R>(std::get<Is>(destinations), std::get<Is>(sources))...);
  run_statement_parts<R, D>(elements, reductions, finals);
}

template <class S>
struct source_device {
  using type = typename S::device_type;
};
template <template <class> class Op, class E>
struct source_device<ReductionOf<Op, E>> {
  using type = typename E::device_type;
};

}  // namespace detail

/// One pass, several outputs (see the file comment): each destination of `destinations`
/// (std::tie of tensors, windows included) gets its source: an expression, or a reduction
/// (et::sum_of, max_of, min_of) for a 0-d destination. One kernel on a GPU (one parallel
/// loop on the CPU) for the whole statement, reductions included.
template <class... Ds, class... Ss>
void assign(const std::tuple<Ds&...>& destinations, const Ss&... sources) {
  static_assert(sizeof...(Ds) == sizeof...(Ss), "et: assign takes one source per destination");
  static_assert(sizeof...(Ds) >= 1, "et: assign needs a destination");
  static_assert((is_tensor_v<std::remove_const_t<Ds>> && ...), "et: assign's destinations are tensors (std::tie(x, y))");
  static_assert(!(std::is_const_v<Ds> || ...), "et: assign writes its destinations: none can be const");
  [[maybe_unused]] detail::same_devices<typename std::remove_const_t<Ds>::device_type...,
                                        typename detail::source_device<Ss>::type...> check;
  if constexpr (sizeof...(Ds) == sizeof...(Ss) && sizeof...(Ds) >= 1 &&
                detail::devices_agree_v<typename std::remove_const_t<Ds>::device_type...,
                                        typename detail::source_device<Ss>::type...>) {
    detail::assign_statement(destinations, std::tuple<const Ss&...>(sources...), std::index_sequence_for<Ds...>{});
  }
}

/// A reduction into an existing 0-d tensor (one destination): et::assign(rr, et::sum_of(r * r)).
template <class T, class D, template <class> class Op, class E>
void assign(Tensor<T, 0, D>& destination, const detail::ReductionOf<Op, E>& reduction) {
  assign(std::tie(destination), reduction);
}

}  // namespace et
