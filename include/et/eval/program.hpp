// Internal (included by eval/evaluator.hpp): how an expression tree becomes the one flat
// struct a kernel or CPU loop evaluates per element: a Program, i.e. the root's reader
// plus the "bindings", subexpressions computed once per element.
//
// Why bindings: a subexpression a user names and uses twice (`auto e2 = e1*a/b*(b - e1)`)
// is used twice by the tree, so a tree built that way doubles at every level. Evaluated
// as a tree, its reader (the kernel's argument), its code and its compile time grow with
// the TREE, exponentially in the nesting depth. Here they grow with the DAG instead:
//  - in a tree of more than sharing_threshold operations, a map node type that two or
//    more operand slots hold is a binding (expr/dag.hpp); its type is its structure, so
//    all uses of one subexpression are one binding;
//  - the program computes each binding once per element, operands first, keeps the value
//    in `ctx`, and every use reads it (SlotReader);
//  - uses of one binding may still hold different operands (`f(x) + f(y)`): the builder
//    below sorts them into variants and materializes the other variants first, by the
//    same program, so the result is right for any operands (docs/design.md).
// Small trees are left as trees: their duplicates cost little code and no extra pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/expr/dag.hpp"
#include "et/expr/node.hpp"
#include "et/expr/readers.hpp"
#include "et/tensor.hpp"

namespace et::detail {

// ---- Leaf readers --------------------------------------------------------------------

template <class Index, std::size_t R>
void copy_strides(Index (&out)[R > 0 ? R : 1], const std::array<std::int64_t, R>& strides) {
  for (std::size_t d = 0; d != R; ++d) out[d] = static_cast<Index>(strides[d]);
}

/// The offset of a box's first element (`origin`, coordinates in the whole index space)
/// in an operand read with `strides` there. The CUDA backend evaluates an index space whose
/// offsets pass 32 bits box by box (backend/cuda/elementwise.hpp), each box read by a
/// program whose operands start at its origin; the whole space's origin is all zeros.
template <std::size_t R>
std::int64_t offset_of(const std::array<std::int64_t, R>& origin, const std::array<std::int64_t, R>& strides) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d != R; ++d) offset += origin[d] * strides[d];
  return offset;
}

/// A leaf's reader in the index space `out_shape`, starting at `origin` in it.
template <int OutR, class Index, class T, int R, class D>
auto make_reader(const Tensor<T, R, D>& t, const Shape<OutR>& out_shape, const Shape<OutR>& origin = {}) {
  TensorReader<T, OutR, Index> reader{};
  const auto strides = broadcast_strides(t.shape(), t.strides(), out_shape);
  reader.data = t.data() + offset_of(origin, strides);
  copy_strides<Index, OutR>(reader.strides, strides);
  if constexpr (TensorReader<T, OutR, Index>::wraps) {
    const LinearWrap wrap = linear_wrap(out_shape, strides);
    if (wraps(wrap, out_shape)) {
      reader.wrap_div = static_cast<std::uint32_t>(wrap.div);  // a broadcast operand (readers.hpp)
      reader.wrap_mod = static_cast<std::uint32_t>(wrap.mod);
    }
  }
  return reader;
}
template <int OutR, class Index, class T>
auto make_reader(const ScalarExpr<T>& s, const Shape<OutR>&, const Shape<OutR>& = {}) {
  return ScalarReader<compute_t<T>>{s.value};
}
template <int OutR, class Index, class Gen, int R, class D>
auto make_reader(const GeneratorExpr<Gen, R, D>& g, const Shape<OutR>& out_shape, const Shape<OutR>& origin = {}) {
  const auto strides = broadcast_strides(g.shape(), contiguous_strides(g.shape()), out_shape);
  GeneratorReader<Gen, OutR, Index> reader{g.generator(), offset_of(origin, strides), {}};
  copy_strides<Index, OutR>(reader.strides, strides);
  return reader;
}

// ---- Reader types ------------------------------------------------------------------

template <int OutR, class Index, class Shared, class Node>
struct reader_for {  // leaves
  using type = decltype(make_reader<OutR, Index>(std::declval<const Node&>(), std::declval<const Shape<OutR>&>()));
};
template <int OutR, class Index, class Shared, class Node>
struct own_reader;
template <int OutR, class Index, class Shared, class Op, class... Cs>
struct own_reader<OutR, Index, Shared, MapExpr<Op, Cs...>> {
  using type = MapReader<Op, typename reader_for<OutR, Index, Shared, Cs>::type...>;
};
template <int OutR, class Index, class Shared, class Op, class... Cs>
struct reader_for<OutR, Index, Shared, MapExpr<Op, Cs...>> {
  using own = typename own_reader<OutR, Index, Shared, MapExpr<Op, Cs...>>::type;
  using type = std::conditional_t<list_contains_v<MapExpr<Op, Cs...>, Shared>,
                                  SlotReader<list_index<MapExpr<Op, Cs...>>(Shared{}), typename own::value_type>, own>;
};

// ---- The program -------------------------------------------------------------------

template <class Root, class... Bindings>
struct Program {
  using value_type = typename Root::value_type;
  Pack<Bindings...> bindings;
  Root root;

  template <class Index>
  ET_HD value_type linear(Index i) const {
    Pack<typename Bindings::value_type...> ctx;
    bind_linear(i, ctx, std::index_sequence_for<Bindings...>{});
    return root.linear(i, ctx);
  }
  template <class Index, class C>
  ET_HD value_type strided(Index i, const C& c) const {
    Pack<typename Bindings::value_type...> ctx;
    bind_strided(i, c, ctx, std::index_sequence_for<Bindings...>{});
    return root.strided(i, c, ctx);
  }
  template <int V, class Index>
  ET_HD Vec<value_type, V> vector(Index i) const {
    Pack<Vec<typename Bindings::value_type, V>...> ctx;
    bind_vector<V>(i, ctx, std::index_sequence_for<Bindings...>{});
    return root.template vector<V>(i, ctx);
  }
  /// Bytes of one value of binding k.
  static std::size_t binding_size(int k) {
    constexpr std::size_t sizes[] = {sizeof(typename Bindings::value_type)..., 0};
    return sizes[k];
  }
  /// Computes bindings 0..select for the element at output index i (coordinate c) and
  /// stores binding `select` at out[i], in its compute type.
  template <class Index, class C>
  ET_HD void store_binding(int select, void* out, Index i, const C& c) const {
    store_impl(select, out, i, c, std::index_sequence_for<Bindings...>{});
  }

 private:
  template <class Index, class Ctx, std::size_t... Is>
  ET_HD void bind_linear([[maybe_unused]] Index i, [[maybe_unused]] Ctx& ctx, std::index_sequence<Is...>) const {
    ((pack_get<Is>(ctx) = pack_get<Is>(bindings).linear(i, ctx)), ...);
  }
  template <class Index, class C, class Ctx, std::size_t... Is>
  ET_HD void bind_strided([[maybe_unused]] Index i, [[maybe_unused]] const C& c, [[maybe_unused]] Ctx& ctx,
                          std::index_sequence<Is...>) const {
    ((pack_get<Is>(ctx) = pack_get<Is>(bindings).strided(i, c, ctx)), ...);
  }
  template <int V, class Index, class Ctx, std::size_t... Is>
  ET_HD void bind_vector([[maybe_unused]] Index i, [[maybe_unused]] Ctx& ctx, std::index_sequence<Is...>) const {
    ((pack_get<Is>(ctx) = pack_get<Is>(bindings).template vector<V>(i, ctx)), ...);
  }
  template <class Index, class C, std::size_t... Is>
  ET_HD void store_impl(int select, void* out, Index i, const C& c, std::index_sequence<Is...>) const {
    Pack<typename Bindings::value_type...> ctx;
    (void)((pack_get<Is>(ctx) = pack_get<Is>(bindings).strided(i, c, ctx),
            static_cast<int>(Is) == select &&
                (static_cast<typename Bindings::value_type*>(out)[i] = pack_get<Is>(ctx), true)) ||
           ...);
  }
};

/// Calls f(leaf) on every leaf reader of a program: the bindings', then the root's.
template <class Root, class... Bindings, class F, std::size_t... Is>
ET_HD void for_each_binding_leaf_reader(Program<Root, Bindings...>& program, F& f, std::index_sequence<Is...>) {
  (for_each_leaf_reader(pack_get<Is>(program.bindings), f), ...);
}
template <class Root, class... Bindings, class F>
ET_HD void for_each_leaf_reader(Program<Root, Bindings...>& program, F& f) {
  for_each_binding_leaf_reader(program, f, std::index_sequence_for<Bindings...>{});
  for_each_leaf_reader(program.root, f);
}

/// Builds the program of an expression read in the index space of `shape`.
///
/// First a walk reads every use of every bound node into a *variant* of that binding:
/// uses with the same reader (same operands, same variants of the bindings below) share
/// one; a use of the same heap block as an earlier one is recognized without a walk. A
/// SlotReader then carries a tag (variant + 1) instead of a pointer. Then the program is
/// assembled with variant 0 of every binding; a use of another variant reads a buffer,
/// which `materialize(program, binding)` fills (and the caller keeps alive until the
/// program has run) by running a program in which that variant AND the variants it uses
/// below are the bindings' values, so `f(x) + f(y)` costs one extra pass, not one per
/// bound node of f. Only where one pass would need two variants of one binding is the
/// inner one materialized first.
template <int OutR, class Index, class Shared, class Root>
class ProgramBuilder;
template <int OutR, class Index, class... Xs, class Root>
class ProgramBuilder<OutR, Index, TypeList<Xs...>, Root> {
  using Shared = TypeList<Xs...>;
  template <class Node>
  using reader_t = typename reader_for<OutR, Index, Shared, Node>::type;
  template <class Node>
  using own_t = typename own_reader<OutR, Index, Shared, Node>::type;
  static constexpr std::size_t bindings = sizeof...(Xs);

 public:
  using program_type = Program<reader_t<Root>, own_t<Xs>...>;

  /// `shape`: the whole index space; `origin`: where in it the program's own index space
  /// (a box of it) starts.
  ProgramBuilder(const Shape<OutR>& shape, const Shape<OutR>& origin) : shape_(shape), origin_(origin) {}

  template <class Materialize>
  program_type build(const Root& root, Materialize& materialize) {
    reader_t<Root> root_reader = read(root);
    program_type program{};
    Holds holds;
    resolve_all_below(program, holds, bindings, materialize);
    patch(root_reader, program, holds, materialize);
    program.root = root_reader;
    return program;
  }

 private:
  template <std::size_t K>
  using bound_t = std::remove_cvref_t<decltype(pack_get<K>(std::declval<program_type&>().bindings))>;

  /// One distinct use of a binding: its reader's bytes (readers are trivially copyable,
  /// and tagged slots make them self-contained), the heap block it was read from (or
  /// null), and the buffer it was materialized into, once it was.
  struct Variant {
    std::vector<unsigned char> reader;
    const void* identity;
    const void* buffer = nullptr;
  };
  /// Which variant each binding of a program under assembly holds (-1: none yet).
  struct Holds {
    long variant[bindings + 1];
    Holds() { std::fill(variant, variant + bindings + 1, -1L); }
  };

  template <class T>
  static const T* tag(std::size_t variant) {
    return reinterpret_cast<const T*>(static_cast<std::uintptr_t>(variant + 1));
  }
  template <class T>
  static std::size_t tagged_variant(const T* slot) {
    return static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(slot)) - 1;
  }
  template <std::size_t K>
  bound_t<K> load(std::size_t variant) const {
    bound_t<K> reader;
    std::memcpy(&reader, variants_[K][variant].reader.data(), sizeof(reader));
    return reader;
  }

  // ---- the walk ----
  template <class Node>
  reader_t<Node> read(const Node& node) {
    if constexpr (is_map_v<Node>) {
      constexpr bool bound = list_contains_v<Node, Shared>;
      if constexpr (bound) {
        constexpr std::size_t K = list_index<Node>(Shared{});
        using Value = typename reader_t<Node>::value_type;
        // Another use of a heap block already read (node.hpp): same operands, no walk.
        if (const void* id = node.identity())
          for (std::size_t v = 0; v != variants_[K].size(); ++v)
            if (variants_[K][v].identity == id) return reader_t<Node>{tag<Value>(v)};
        const own_t<Node> own = read_operands(
            node, std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(node.children())>>>{});
        for (std::size_t v = 0; v != variants_[K].size(); ++v)
          if (same_reader(own, load<K>(v))) return reader_t<Node>{tag<Value>(v)};
        Variant variant{std::vector<unsigned char>(sizeof(own)), node.identity()};
        std::memcpy(variant.reader.data(), &own, sizeof(own));
        variants_[K].push_back(std::move(variant));
        return reader_t<Node>{tag<Value>(variants_[K].size() - 1)};
      } else {
        return read_operands(
            node, std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(node.children())>>>{});
      }
    } else {
      return make_reader<OutR, Index>(node, shape_, origin_);
    }
  }

  // Two instantiation levels per tree level (not std::apply's five): deep chains stay
  // within the compilers' template depth limits (g++: 900).
  template <class Op, class... Cs, std::size_t... Is>
  own_t<MapExpr<Op, Cs...>> read_operands(const MapExpr<Op, Cs...>& node, std::index_sequence<Is...>) {
    return own_t<MapExpr<Op, Cs...>>{Pack<reader_t<Cs>...>(read(std::get<Is>(node.children()))...)};
  }

  // ---- the assembly ----
  /// Makes binding K of `program` hold `variant`, with the bindings it reads holding the
  /// variants it read (or buffers). False when K already holds another variant.
  template <std::size_t K, class Materialize>
  bool resolve(program_type& program, Holds& holds, std::size_t variant, Materialize& materialize) {
    if (holds.variant[K] >= 0) return static_cast<std::size_t>(holds.variant[K]) == variant;
    holds.variant[K] = static_cast<long>(variant);
    bound_t<K> reader = load<K>(variant);
    patch(reader, program, holds, materialize);
    pack_get<K>(program.bindings) = reader;
    return true;
  }

  /// Replaces the tags in `reader` for `program`: null where the binding holds the
  /// variant (or can be made to), else the variant's buffer.
  template <class Reader, class Materialize>
  void patch(Reader& reader, program_type& program, Holds& holds, Materialize& materialize) {
    auto patch_slot = [&]<std::size_t J, class T>(SlotReader<J, T>& slot) {
      const std::size_t variant = tagged_variant(slot.materialized);
      if (const void* buffer = variants_[J][variant].buffer) slot.materialized = static_cast<const T*>(buffer);
      else if (resolve<J>(program, holds, variant, materialize)) slot.materialized = nullptr;
      else slot.materialized = static_cast<const T*>(materialize_variant<J>(variant, materialize));
    };
    for_each_slot(reader, patch_slot);
  }

  /// Every binding below `end` that holds nothing yet holds its variant 0 (their values
  /// are computed before binding `end`'s, so they must be real values).
  template <class Materialize>
  void resolve_all_below(program_type& program, Holds& holds, std::size_t end, Materialize& materialize) {
    [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
      ((Ks < end && holds.variant[Ks] < 0 ? (void)resolve<Ks>(program, holds, 0, materialize) : void()), ...);
    }(std::index_sequence_for<Xs...>{});
  }

  template <std::size_t K, class Materialize>
  const void* materialize_variant(std::size_t variant, Materialize& materialize) {
    program_type program{};
    Holds holds;
    resolve<K>(program, holds, variant, materialize);
    resolve_all_below(program, holds, K, materialize);
    const void* buffer = materialize(program, static_cast<int>(K));
    variants_[K][variant].buffer = buffer;
    return buffer;
  }

  Shape<OutR> shape_;
  Shape<OutR> origin_;
  std::vector<Variant> variants_[bindings + 1];
};

template <int OutR, class Index, class E>
using program_t = typename ProgramBuilder<OutR, Index, shared_bindings_t<E>, E>::program_type;

/// True when evaluating E may materialize shared subexpressions (see above).
template <class E>
inline constexpr bool has_bindings_v = !std::is_same_v<shared_bindings_t<E>, TypeList<>>;

/// The program of `expr` read in the index space `shape`, or in the box of it that starts
/// at `origin` (then `materialize` fills buffers of the box's elements).
template <int OutR, class Index, class E, class Materialize>
program_t<OutR, Index, E> make_program(const E& expr, const Shape<OutR>& shape, Materialize&& materialize,
                                       const Shape<OutR>& origin = {}) {
  return ProgramBuilder<OutR, Index, shared_bindings_t<E>, E>(shape, origin).build(expr, materialize);
}

}  // namespace et::detail
