// Internal (included by eval/program.hpp): which nodes of an expression the evaluator
// computes once per element (its "bindings"), decided from the types alone.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "et/expr/node.hpp"

namespace et::detail {

template <class... Ts>
struct TypeList {};

// Type identity through the compiler builtin where there is one (g++, clang, nvcc's
// front end): the walk below checks each node type against the list of those found so
// far, and a std::is_same_v instantiation per pair of deep types is slow to compile.
#if defined(__has_builtin)
#if __has_builtin(__is_same)
#define ET_SAME_TYPE(A, B) __is_same(A, B)
#endif
#endif
#if !defined(ET_SAME_TYPE)
#define ET_SAME_TYPE(A, B) std::is_same_v<A, B>
#endif

template <class T, class List>
inline constexpr bool list_contains_v = false;
template <class T, class... Ts>
inline constexpr bool list_contains_v<T, TypeList<Ts...>> = (ET_SAME_TYPE(T, Ts) || ...);

/// Position of T in a list that contains it.
template <class T, class... Ts>
constexpr std::size_t list_index(TypeList<Ts...>) {
  constexpr bool same[] = {ET_SAME_TYPE(T, Ts)..., true};
  std::size_t i = 0;
  while (!same[i]) ++i;
  return i;
}

template <class E>
inline constexpr bool is_map_v = false;
template <class Op, class... Cs>
inline constexpr bool is_map_v<MapExpr<Op, Cs...>> = true;

// Type lists are joined with a fold over operator+ (declared only, used in decltype).
template <class... As, class... Bs>
TypeList<As..., Bs...> operator+(TypeList<As...>, TypeList<Bs...>);

template <class List, class T>
struct append;
template <class... Ts, class T>
struct append<TypeList<Ts...>, T> {
  using type = TypeList<Ts..., T>;
};

// The bound node types of a tree of more than sharing_threshold operations: the map
// node types of at least binding_min_ops operations that two or more operand slots of the
// type DAG hold (a subexpression the user named and used twice), in the order a post-order
// walk completes them first, i.e. operands before the nodes that use them.
//  - The walk collects the candidate types (at least binding_min_ops operations; smaller
//    nodes hold only smaller ones, so it never enters them).
//  - If no candidate is used twice in the tree (counted with repetitions, in linear time),
//    nothing is bound: a long chain (`e_k = e_{k-1} * a / b * (b - a)`) stays a tree and
//    costs no pairwise comparison of its node types (those cost g++ 12 s on 63 levels).
//  - Otherwise a candidate is bound when the slots of the candidates and the root that
//    hold it number two or more. Binding a node used only once would cost nothing in
//    values but a SlotReader test per use and a register; binding too few costs the
//    exponential tree.
inline constexpr std::uint64_t binding_min_ops = 2;
template <class E>
inline constexpr bool is_bound_candidate_v = is_map_v<E> && (tree_ops_v<E> >= binding_min_ops);

/// Uses of candidate nodes in the tree, counted with repetitions (saturating).
template <class E>
inline constexpr std::uint64_t candidate_uses_v = 0;
template <class Op, class... Cs>
inline constexpr std::uint64_t candidate_uses_v<MapExpr<Op, Cs...>> = std::min<std::uint64_t>(
    std::uint64_t{is_bound_candidate_v<MapExpr<Op, Cs...>>} + (candidate_uses_v<Cs> + ... + 0), std::uint64_t{1} << 40);

template <class List, class E, bool = is_bound_candidate_v<E>>
struct visit {
  using type = List;
};
template <bool Seen, class List, class E>
struct visit_map {
  using type = List;
};
template <class List, class... Es>
struct visit_all {
  using type = List;
};
template <class List, class E, class... Rest>
struct visit_all<List, E, Rest...> {
  using type = typename visit_all<typename visit<List, E>::type, Rest...>::type;
};
template <class List, class Op, class... Cs>
struct visit_map<false, List, MapExpr<Op, Cs...>> {
  using type = typename append<typename visit_all<List, Cs...>::type, MapExpr<Op, Cs...>>::type;
};
template <class List, class E>
struct visit<List, E, true> {
  using type = typename visit_map<list_contains_v<E, List>, List, E>::type;
};

template <class... Ts>
constexpr std::size_t list_size(TypeList<Ts...>) {
  return sizeof...(Ts);
}

/// Operand slots of the node types in Parents that hold X.
template <class X, class P>
inline constexpr int slots_holding_v = 0;
template <class X, class Op, class... Cs>
inline constexpr int slots_holding_v<X, MapExpr<Op, Cs...>> = (int{ET_SAME_TYPE(X, Cs)} + ... + 0);
template <class X, class Parents>
inline constexpr int in_degree_v = 0;
template <class X, class... Ps>
inline constexpr int in_degree_v<X, TypeList<Ps...>> = (slots_holding_v<X, Ps> + ... + 0);

template <class Candidates, class Parents>
struct keep_shared;
template <class... Xs, class Parents>
struct keep_shared<TypeList<Xs...>, Parents> {
  using type = decltype((TypeList<>{} + ... +
                         std::conditional_t<(in_degree_v<Xs, Parents> >= 2), TypeList<Xs>, TypeList<>>{}));
};

template <class Root, class Candidates, bool Repeats>
struct bound_of {
  using type = TypeList<>;
};
template <class Root, class... Xs>
struct bound_of<Root, TypeList<Xs...>, true> {
  using type = typename keep_shared<TypeList<Xs...>, TypeList<Xs..., Root>>::type;
};

template <class E>
struct shared_bindings {
  using type = TypeList<>;
};
template <class Op, class... Cs>
  requires(tree_ops_v<MapExpr<Op, Cs...>> > sharing_threshold)
struct shared_bindings<MapExpr<Op, Cs...>> {  // the root's operands, not the root
  using candidates = typename visit_all<TypeList<>, Cs...>::type;
  using type = typename bound_of<MapExpr<Op, Cs...>, candidates,
                                 ((candidate_uses_v<Cs> + ... + 0) > list_size(candidates{}))>::type;
};

/// The bound node types of E, operands first (none for trees up to the threshold).
template <class E>
using shared_bindings_t = typename shared_bindings<E>::type;

}  // namespace et::detail
