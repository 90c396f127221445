// The backward of a fused expression, derived from its type. For each element the program
// below evaluates the expression's reader tree once, keeping every node's value in a Tape
// (a struct shaped like the tree, which the compiler keeps in registers), then sweeps the
// tree from the root down: each node multiplies the adjoint it received by its functor's
// partial derivative for each operand (expr/functors.hpp, `partial<K>`) and hands it on;
// each tensor leaf adds what reaches it to its accumulator. Leaves that are the same tensor
// are summed before one write. So the gradients of ALL inputs come out of one pass that
// reads the inputs and the upstream gradient once and stores nothing in between.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "et/config.hpp"
#include "et/eval/program.hpp"
#include "et/expr/dag.hpp"
#include "et/expr/node.hpp"
#include "et/expr/readers.hpp"
#include "et/tensor.hpp"

namespace et::detail {

// ---- The tensor leaves of an expression tree, in depth-first order ---------------------

/// TypeList of the Tensor types at the leaves of E (every use counts: x * x has two).
template <class E>
struct tree_tensors {
  using type = TypeList<>;
};
template <class T, int R, class D>
struct tree_tensors<Tensor<T, R, D>> {
  using type = TypeList<Tensor<T, R, D>>;
};
template <class Op, class... Cs>
struct tree_tensors<MapExpr<Op, Cs...>> {
  using type = decltype((TypeList<>{} + ... + typename tree_tensors<Cs>::type{}));
};
template <class E>
using tree_tensors_t = typename tree_tensors<E>::type;

template <class List>
inline constexpr std::size_t list_size_v = 0;
template <class... Ts>
inline constexpr std::size_t list_size_v<TypeList<Ts...>> = sizeof...(Ts);

template <std::size_t K, class List>
struct list_at;
template <std::size_t K, class... Ts>
struct list_at<K, TypeList<Ts...>> {
  using type = std::tuple_element_t<K, std::tuple<Ts...>>;
};
template <std::size_t K, class List>
using list_at_t = typename list_at<K, List>::type;

/// One Writer per tensor leaf, in the index space of rank R.
template <class List, int R, class Index>
struct leaf_writers;
template <class... Ts, int R, class Index>
struct leaf_writers<TypeList<Ts...>, R, Index> {
  using type = Pack<Writer<typename Ts::value_type, R, Index>...>;
};

// The walks below expand a node's children with an index sequence rather than std::apply
// and a lambda: a fused node walks its expression when it is made, and std::apply's layers of
// invoke traits cost the front end more than the walk itself (measured with clang's
// -ftime-trace on ten recorded expressions: a quarter of all template instantiation time).

template <class Op, class... Cs>
constexpr std::index_sequence_for<Cs...> child_indices(const MapExpr<Op, Cs...>&) {
  return {};
}

template <class F, class E>
void for_each_tree_tensor(const E& e, F& f);
template <class F, class Op, class... Cs, std::size_t... Is>
void for_each_child_tensor(const MapExpr<Op, Cs...>& e, F& f, std::index_sequence<Is...>) {
  (for_each_tree_tensor(std::get<Is>(e.children()), f), ...);
}
/// Calls f(leaf) on every tensor leaf of a tree, in the order of tree_tensors_t.
template <class F, class E>
void for_each_tree_tensor(const E& e, F& f) {
  if constexpr (is_tensor_v<E>) {
    f(e);
  } else if constexpr (is_map_v<E>) {
    for_each_child_tensor(e, f, child_indices(e));
  }
}

template <class F, class E>
E map_tree_tensors(const E& e, F& f);
template <class F, class Op, class... Cs, std::size_t... Is>
MapExpr<Op, Cs...> map_children(const MapExpr<Op, Cs...>& e, F& f, std::index_sequence<Is...>) {
  return MapExpr<Op, Cs...>{map_tree_tensors(std::get<Is>(e.children()), f)...};  // braced: left to right
}
/// A copy of a tree whose tensor leaves are replaced by f(leaf) (of the same type), called
/// in the order of tree_tensors_t.
template <class F, class E>
E map_tree_tensors(const E& e, F& f) {
  if constexpr (is_tensor_v<E>) {
    return f(e);
  } else if constexpr (is_map_v<E>) {
    return map_children(e, f, child_indices(e));
  } else {
    return e;
  }
}

// ---- The expression's reader as a tree (no shared bindings) ----------------------------

template <int OutR, class Index, class E>
using tree_reader_t = typename reader_for<OutR, Index, TypeList<>, E>::type;

template <int OutR, class Index, class E>
tree_reader_t<OutR, Index, E> tree_reader(const E& e, const Shape<OutR>& shape);
template <int OutR, class Index, class Op, class... Cs, std::size_t... Is>
auto tree_reader_of_children(const MapExpr<Op, Cs...>& e, const Shape<OutR>& shape, std::index_sequence<Is...>) {
  using Reader = tree_reader_t<OutR, Index, MapExpr<Op, Cs...>>;
  return Reader{decltype(Reader::children)(tree_reader<OutR, Index>(std::get<Is>(e.children()), shape)...)};
}
template <int OutR, class Index, class E>
tree_reader_t<OutR, Index, E> tree_reader(const E& e, const Shape<OutR>& shape) {
  if constexpr (is_map_v<E>) {
    return tree_reader_of_children<OutR, Index>(e, shape, child_indices(e));
  } else {
    return make_reader<OutR, Index>(e, shape);
  }
}

// ---- Tape: every node's value for one element ------------------------------------------

template <class Reader>
struct Tape {
  typename Reader::value_type value;
};
template <class Op, class... Rs>
struct Tape<MapReader<Op, Rs...>> {
  typename MapReader<Op, Rs...>::value_type value;
  Pack<Tape<Rs>...> children;
};

/// Fills `tape` in place, children first (returning tapes by value copied each subtree
/// into its parent: cicc took minutes from 20 operations on).
template <bool Linear, class Reader, class Index, class C>
ET_HD void fill_tape(Tape<Reader>& tape, const Reader& reader, Index i, const C& c) {
  if constexpr (Linear) tape.value = reader.linear(i, Pack<>{});
  else tape.value = reader.strided(i, c, Pack<>{});
}
template <bool Linear, class Op, class... Rs, class Index, class C, std::size_t... Is>
ET_HD void fill_map(Tape<MapReader<Op, Rs...>>& tape, const MapReader<Op, Rs...>& reader, Index i, const C& c,
                    std::index_sequence<Is...>) {
  (fill_tape<Linear>(pack_get<Is>(tape.children), pack_get<Is>(reader.children), i, c), ...);
  tape.value = Op{}(pack_get<Is>(tape.children).value...);
}
template <bool Linear, class Op, class... Rs, class Index, class C>
ET_HD void fill_tape(Tape<MapReader<Op, Rs...>>& tape, const MapReader<Op, Rs...>& reader, Index i, const C& c) {
  fill_map<Linear>(tape, reader, i, c, std::index_sequence_for<Rs...>{});
}

// ---- The reverse sweep ------------------------------------------------------------------

template <class Reader>
inline constexpr std::size_t tensor_leaves_v = 0;
template <class T, int R, class Index>
inline constexpr std::size_t tensor_leaves_v<TensorReader<T, R, Index>> = 1;
template <class Op, class... Rs>
inline constexpr std::size_t tensor_leaves_v<MapReader<Op, Rs...>> = (tensor_leaves_v<Rs> + ... + 0);

template <std::size_t K, class... Rs>
constexpr std::size_t leaves_before() {
  constexpr std::size_t counts[] = {tensor_leaves_v<Rs>..., 0};
  std::size_t total = 0;
  for (std::size_t k = 0; k != K; ++k) total += counts[k];
  return total;
}

template <std::size_t Leaf, class G, class Reader, std::size_t L>
ET_HD void sweep(const Reader&, const Tape<Reader>&, G adjoint, G (&acc)[L]) {
  if constexpr (tensor_leaves_v<Reader> == 1) acc[Leaf] += adjoint;
}
template <std::size_t Leaf, std::size_t K, class G, class Op, class... Rs, std::size_t L, std::size_t... Is>
ET_HD void sweep_child(const MapReader<Op, Rs...>& reader, const Tape<MapReader<Op, Rs...>>& tape, G adjoint,
                       G (&acc)[L], std::index_sequence<Is...>) {
  using Child = std::remove_cvref_t<decltype(pack_get<K>(reader.children))>;
  if constexpr (tensor_leaves_v<Child> > 0 && std::is_floating_point_v<typename Child::value_type>) {
    const G partial = static_cast<G>(Op::template partial<K>(tape.value, pack_get<Is>(tape.children).value...));
    sweep<Leaf + leaves_before<K, Rs...>()>(pack_get<K>(reader.children), pack_get<K>(tape.children),
                                            adjoint * partial, acc);
  }
}
template <std::size_t Leaf, class G, class Op, class... Rs, std::size_t L, std::size_t... Ks>
ET_HD void sweep_children(const MapReader<Op, Rs...>& reader, const Tape<MapReader<Op, Rs...>>& tape, G adjoint,
                          G (&acc)[L], std::index_sequence<Ks...> children) {
  (sweep_child<Leaf, Ks>(reader, tape, adjoint, acc, children), ...);
}
template <std::size_t Leaf, class G, class Op, class... Rs, std::size_t L>
ET_HD void sweep(const MapReader<Op, Rs...>& reader, const Tape<MapReader<Op, Rs...>>& tape, G adjoint,
                 G (&acc)[L]) {
  sweep_children<Leaf>(reader, tape, adjoint, acc, std::index_sequence_for<Rs...>{});
}

// ---- The program one backward kernel (or CPU loop) runs per element --------------------

/// Writers: one per tensor leaf (a null one for leaves that need no gradient); group[l]:
/// the first leaf that is the same tensor as leaf l (its writer writes their sum), or -1.
template <class Index, int R, class Root, class Seed, class Writers, std::size_t L>
struct GradProgram {
  using G = typename Root::value_type;
  Root root;
  Seed seed;
  Writers writers;
  signed char group[L];

  template <bool Linear>
  ET_HD void run(Index i, const Coord<R, Index>& c) const {
    Tape<Root> tape;
    fill_tape<Linear>(tape, root, i, c);
    G acc[L];
    for (std::size_t l = 0; l < L; ++l) acc[l] = G(0);
    sweep<0>(root, tape, static_cast<G>(seed.template adjoint<Linear>(tape.value, i, c)), acc);
    store<Linear>(i, c, acc, std::make_index_sequence<L>{});
  }

 private:
  template <bool Linear, std::size_t... Ls>
  ET_HD void store(Index i, const Coord<R, Index>& c, const G (&acc)[L], std::index_sequence<Ls...> all) const {
    (store_one<Ls, Linear>(i, c, acc, all), ...);
  }
  template <std::size_t Leader, bool Linear, std::size_t... Ms>
  ET_HD void store_one(Index i, const Coord<R, Index>& c, const G (&acc)[L], std::index_sequence<Ms...>) const {
    if (group[Leader] != static_cast<signed char>(Leader)) return;
    G total = G(0);
    ((Ms >= Leader && group[Ms] == static_cast<signed char>(Leader) ? (void)(total += acc[Ms]) : void()), ...);
    if constexpr (Linear) pack_get<Leader>(writers).linear(i, total);
    else pack_get<Leader>(writers).strided(c, total);
  }
};

/// The upstream gradient, read at the element (an assignment's backward).
template <class Reader>
struct UpstreamSeed {
  Reader gradient;
  template <bool Linear, class V, class Index, class C>
  ET_HD auto adjoint(V, Index i, const C& c) const {
    if constexpr (Linear) return gradient.linear(i, Pack<>{});
    else return gradient.strided(i, c, Pack<>{});
  }
};

}  // namespace et::detail
