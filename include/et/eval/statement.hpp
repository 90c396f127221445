// How a statement of several outputs (et::assign, ops/statement.hpp) is read per element:
// one flat, trivially copyable struct that the CUDA kernel (kernels/et/kernels/statement.cuh)
// and the CPU loop (backend/cpu/statement.hpp) both call. A statement has
//  - element outputs: destinations of the index space's shape, each written from its own
//    program (eval/program.hpp) and writer;
//  - reductions: programs read over the index space and reduced (backend/reduce_ops.hpp)
//    into a 0-d destination when the pass ends;
//  - finals: 0-d programs computed once when the pass ends, into 0-d destinations.
// Every program reads the values from before the statement: an element's values are all
// computed before any of them is stored, and what ends the pass (reductions, finals) is
// computed before it is stored, after every element.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "et/config.hpp"
#include "et/eval/evaluator.hpp"

namespace et::detail {

/// A full reduction inside a statement: its operand's program and its 0-d destination.
template <class Op, class Program, class Out>
struct StatementReduction {
  using op = Op;
  using acc_type = typename Op::acc_type;
  Program in;
  Out* out;
};

/// A value computed once when the pass ends (a 0-d destination given a 0-d expression).
template <class Program, class T>
struct StatementFinal {
  using value_type = typename Program::value_type;
  Program in;
  T* out;
};

template <class Writers, class Elements, class Reductions, class Finals>
struct StatementProgram;

template <class... Writers, class... Elements, class... Reductions, class... Finals>
struct StatementProgram<Pack<Writers...>, Pack<Elements...>, Pack<Reductions...>, Pack<Finals...>> {
  static_assert(sizeof...(Writers) == sizeof...(Elements));
  static constexpr std::size_t reductions_count = sizeof...(Reductions);
  using Values = Pack<typename Elements::value_type...>;
  using Accs = Pack<typename Reductions::acc_type...>;
  using Ops = std::tuple<typename Reductions::op...>;

  Pack<Writers...> writers;
  Pack<Elements...> elements;
  Pack<Reductions...> reductions;
  Pack<Finals...> finals;

  /// Every output's value at element j of the row of rebased programs (the rows path), its
  /// reductions' lifts combined into `accs` (`position`: the element's index in the space).
  template <int R, class Index>
  ET_HD Values values_row(Index j, Accs& accs, std::int64_t position) const {
    const auto at = row_coordinate<R, Index>(j);
    return values_strided(j, at, accs, position);
  }
  template <class Index, class C>
  ET_HD Values values_strided(Index i, const C& c, Accs& accs, std::int64_t position) const {
    accumulate(accs, position, [&](const auto& program) { return program.strided(i, c); },
               std::index_sequence_for<Reductions...>{});
    return strided_values(i, c, std::index_sequence_for<Elements...>{});
  }
  template <int R, class Index>
  ET_HD void store_row(Index j, const Values& values) const {
    store_strided(row_coordinate<R, Index>(j), values);
  }
  template <class C>
  ET_HD void store_strided(const C& c, const Values& values) const {
    store_strided_impl(c, values, std::index_sequence_for<Writers...>{});
  }
  ET_HD static Accs identities() { return Accs(Reductions::op::identity()...); }
  /// a = a combined with b, reduction by reduction.
  ET_HD static void combine(Accs& a, const Accs& b) { combine_impl(a, b, std::index_sequence_for<Reductions...>{}); }

  /// The end of the pass, once: the finals' values and the reductions' results (`totals`,
  /// over n elements) are computed first, then stored.
  template <class Index>
  ET_HD void finish(const Accs& totals, std::int64_t n) const {
    finish_impl<Index>(totals, n, std::index_sequence_for<Reductions...>{}, std::index_sequence_for<Finals...>{});
  }

  /// Moves every program and writer to the element at index i (coordinate c): rows then
  /// read at row_coordinate(j) (RebaseTo).
  template <int R, class Index>
  ET_HD void rebase(const RebaseTo<R, Index>& to) {
    rebase_impl(to, std::index_sequence_for<Writers...>{}, std::index_sequence_for<Elements...>{},
                std::index_sequence_for<Reductions...>{});
  }
  /// Whether every writer writes consecutive elements along the last axis and every program
  /// reads them consecutively or broadcast (RowsReadable).
  template <int R, class Index>
  bool rows_readable() {
    RowsReadable<R, Index> unit;
    bool writers_unit = true;
    [&]<std::size_t... Ws, std::size_t... Es, std::size_t... Rs>(std::index_sequence<Ws...>, std::index_sequence<Es...>,
                                                                 std::index_sequence<Rs...>) {
      ((writers_unit = writers_unit && pack_get<Ws>(writers).strides[R - 1] == 1), ...);
      (for_each_leaf_reader(pack_get<Es>(elements), unit), ...);
      (for_each_leaf_reader(pack_get<Rs>(reductions).in, unit), ...);
    }(std::index_sequence_for<Writers...>{}, std::index_sequence_for<Elements...>{},
      std::index_sequence_for<Reductions...>{});
    return writers_unit && unit.ok;
  }

 private:
  template <class Index, class C, std::size_t... Is>
  ET_HD Values strided_values([[maybe_unused]] Index i, [[maybe_unused]] const C& c, std::index_sequence<Is...>) const {
    return Values(pack_get<Is>(elements).strided(i, c)...);
  }
  template <class Read, std::size_t... Is>
  ET_HD void accumulate([[maybe_unused]] Accs& accs, [[maybe_unused]] std::int64_t position,
                        [[maybe_unused]] const Read& read, std::index_sequence<Is...>) const {
    ((pack_get<Is>(accs) = Reductions::op::combine(pack_get<Is>(accs),
                                                   Reductions::op::lift(read(pack_get<Is>(reductions).in), position))),
     ...);
  }
  template <class C, std::size_t... Is>
  ET_HD void store_strided_impl([[maybe_unused]] const C& c, [[maybe_unused]] const Values& values,
                                std::index_sequence<Is...>) const {
    (pack_get<Is>(writers).strided(c, pack_get<Is>(values)), ...);
  }
  template <std::size_t... Is>
  ET_HD static void combine_impl([[maybe_unused]] Accs& a, [[maybe_unused]] const Accs& b, std::index_sequence<Is...>) {
    ((pack_get<Is>(a) = Reductions::op::combine(pack_get<Is>(a), pack_get<Is>(b))), ...);
  }
  template <class Index, std::size_t... Rs, std::size_t... Fs>
  ET_HD void finish_impl([[maybe_unused]] const Accs& totals, [[maybe_unused]] std::int64_t n,
                         std::index_sequence<Rs...>, std::index_sequence<Fs...>) const {
    [[maybe_unused]] const Pack<typename Finals::value_type...> values(
        pack_get<Fs>(finals).in.strided(Index{0}, Coord<0, Index>{})...);
    ((*pack_get<Rs>(reductions).out = static_cast<std::remove_pointer_t<decltype(pack_get<Rs>(reductions).out)>>(
          Reductions::op::finish(pack_get<Rs>(totals), n))),
     ...);
    ((*pack_get<Fs>(finals).out =
          static_cast<std::remove_pointer_t<decltype(pack_get<Fs>(finals).out)>>(pack_get<Fs>(values))),
     ...);
  }
  template <int R, class Index, std::size_t... Ws, std::size_t... Es, std::size_t... Rs>
  ET_HD void rebase_impl(const RebaseTo<R, Index>& to, std::index_sequence<Ws...>, std::index_sequence<Es...>,
                         std::index_sequence<Rs...>) {
    ((pack_get<Ws>(writers).data += dot<R, Index>(to.c, pack_get<Ws>(writers).strides)), ...);
    (for_each_leaf_reader(pack_get<Es>(elements), to), ...);
    (for_each_leaf_reader(pack_get<Rs>(reductions).in, to), ...);
  }
};

/// A statement's program read with indices of type Index over the index space `space`:
/// `build(expr, shape)` gives a backend's program of an expression (its shared
/// subexpressions materialized as that backend does).
template <class Index, std::size_t R, class Elements, class Reductions, class Finals, class Build>
auto make_statement_program(const std::array<std::int64_t, R>& space, const Elements& elements,
                            const Reductions& reductions, const Finals& finals, Build&& build) {
  auto writers = std::apply(
      [&](const auto&... p) { return Pack<decltype(make_writer<Index>(*p.dst))...>(make_writer<Index>(*p.dst)...); },
      elements);
  auto programs = std::apply(
      [&](const auto&... p) { return Pack<decltype(build(p.expr, space))...>(build(p.expr, space)...); }, elements);
  const auto reduction = [&](const auto& p) {
    auto program = build(p.expr, space);
    using Part = std::remove_cvref_t<decltype(p)>;
    using Op = typename Part::template op<typename decltype(program)::value_type>;
    using Out = typename std::remove_pointer_t<decltype(p.dst)>::value_type;
    return StatementReduction<Op, decltype(program), Out>{program, p.dst->data()};
  };
  auto reduced = std::apply(
      [&](const auto&... p) { return Pack<decltype(reduction(p))...>(reduction(p)...); }, reductions);
  const auto final_value = [&](const auto& p) {
    auto program = build(p.expr, std::array<std::int64_t, 0>{});
    using Out = typename std::remove_pointer_t<decltype(p.dst)>::value_type;
    return StatementFinal<decltype(program), Out>{program, p.dst->data()};
  };
  auto finished = std::apply(
      [&](const auto&... p) { return Pack<decltype(final_value(p))...>(final_value(p)...); }, finals);
  return StatementProgram<decltype(writers), decltype(programs), decltype(reduced), decltype(finished)>{
      writers, programs, reduced, finished};
}

}  // namespace et::detail
