// Expression nodes: what an expression IS (its children, element type, rank,
// device and broadcast shape). How a node is evaluated lives in evaluator.hpp;
// how a whole assignment runs on a device lives in backend/.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <atomic>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/config.hpp"
#include "et/device.hpp"
#include "et/layout.hpp"
#include "et/types.hpp"

namespace et {

namespace detail {
/// Base of every expression node, tensors included.
struct ExprTag {};
}  // namespace detail

/// Anything that can be evaluated elementwise: tensors and lazy expression nodes.
template <class E>
concept Expression = std::derived_from<std::remove_cvref_t<E>, detail::ExprTag>;

/// An operand of an elementwise operator: an expression or a plain C++ scalar.
template <class X>
concept Operand = Expression<X> || Scalar<X>;

namespace detail {

/// A plain C++ value inside an expression; rank 0, on every device. Its element type is
/// T, but it holds the value in T's compute type: `half_tensor * 0.1` multiplies by 0.1f
/// (as PyTorch does), not by 0.1 rounded to half.
template <class T>
struct ScalarExpr : ExprTag {
  using value_type = T;
  using device_type = AnyDevice;
  static constexpr int rank = 0;
  compute_t<T> value;
  explicit ScalarExpr(compute_t<T> v) : value(v) {}
  Shape<0> shape() const { return {}; }
};

template <std::size_t A>
const std::array<std::int64_t, A>& broadcast_all(const std::array<std::int64_t, A>& a) {
  return a;
}
template <std::size_t A, std::size_t B, class... Rest>
auto broadcast_all(const std::array<std::int64_t, A>& a, const std::array<std::int64_t, B>& b, const Rest&... rest) {
  return broadcast_all(broadcast_shape(a, b), rest...);
}

/// The element type of Op applied to operands of element types Ts. Functors compute on
/// compute types (half and bfloat16 as float); a computed type that is the compute type
/// of the operands' promoted type stands for that promoted type, so half + half and
/// exp(half) are half while half < half is bool and int32 / int32 is float. A functor
/// with its own rule states it as `template <class... Ts> using element_type = ...`
/// (Cast<U> gives U; where's mask takes no part in promotion).
template <class Op, class... Ts>
constexpr auto result_element() {
  if constexpr (requires { typename Op::template element_type<Ts...>; }) {
    return std::type_identity<typename Op::template element_type<Ts...>>{};
  } else {
    using Promoted = promote_all_t<Ts...>;
    using Computed = decltype(Op{}(std::declval<compute_t<Ts>>()...));
    return std::type_identity<std::conditional_t<std::is_same_v<Computed, compute_t<Promoted>>, Promoted, Computed>>{};
  }
}
template <class Op, class... Ts>
using result_element_t = typename decltype(result_element<Op, Ts...>())::type;

/// Map nodes in an expression tree, counted with repetitions (saturating: trees built
/// from named subexpressions double at every level).
template <class E>
inline constexpr std::uint64_t tree_ops_v = 0;

/// False when operands on two different devices meet somewhere in expression E. The
/// meeting itself stopped compilation with its message (same_devices); evaluating,
/// assigning or reducing E then compiles nothing more, so that no second error follows.
template <class E>
inline constexpr bool devices_agree_in_v = true;

/// Trees up to this many operations are held and evaluated as trees; larger ones are
/// DAGs: their nodes live on the heap, shared by every copy (below), and the evaluator
/// computes their shared subexpressions once per element (eval/program.hpp).
inline constexpr std::uint64_t sharing_threshold = 32;

/// A reference-counted, immutable heap copy of T: what std::shared_ptr<const T> does,
/// without its per-type control blocks (whose instantiation cost grows with every node
/// type of a deep expression).
template <class T>
class SharedNode {
 public:
  explicit SharedNode(T&& value) : block_(new Block{std::move(value), {1}}) {}
  SharedNode(const SharedNode& other) noexcept : block_(other.block_) {
    block_->references.fetch_add(1, std::memory_order_relaxed);
  }
  /// Moves leave an empty node behind (only ever destroyed): building an expression from
  /// temporaries then takes no reference-count traffic.
  SharedNode(SharedNode&& other) noexcept : block_(std::exchange(other.block_, nullptr)) {}
  SharedNode& operator=(SharedNode other) noexcept {
    std::swap(block_, other.block_);
    return *this;
  }
  ~SharedNode() {
    if (block_ && block_->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete block_;
  }
  const T& operator*() const noexcept { return block_->value; }
  const void* get() const noexcept { return block_; }

 private:
  struct Block {
    T value;
    std::atomic<long> references;
  };
  Block* block_;
};

/// The heap blocks (MapExpr::identity) an expression walk has been through: a node whose
/// copies share one block is walked once, however often the tree uses it. Not a template:
/// compiled once, not again in every walk of every expression.
class WalkedNodes {
 public:
  /// True the first time a walk meets `id`, and for every node held by value (null).
  bool first_visit(const void* id) {
    if (!id) return true;
    if (std::find(ids_.begin(), ids_.end(), id) != ids_.end()) return false;
    ids_.push_back(id);
    return true;
  }

 private:
  std::vector<const void*> ids_;
};

/// An elementwise function Op applied to broadcast children. Children are held by
/// value (tensors are cheap handles), so an expression never dangles. A node of a large
/// tree keeps its children and shape in one heap block that its copies share: naming a
/// subexpression and using it twice (`e2 = e1 * a / b * (b - e1)`) then costs a pointer
/// per use instead of a copy of the whole subtree, and the copies keep one identity.
template <class Op, class... Children>
class MapExpr : public ExprTag {
 public:
  using value_type = result_element_t<Op, typename Children::value_type...>;
  using device_type = common_device_t<typename Children::device_type...>;
  static constexpr int rank = std::max({Children::rank...});
  static constexpr std::uint64_t ops = std::min<std::uint64_t>(1 + (tree_ops_v<Children> + ... + 0), std::uint64_t{1} << 40);

  /// Children by value: operands that are temporaries (the subtrees of a larger
  /// expression) move in, so building a tree copies each named tensor once (a copy costs
  /// an atomic reference count; a 17-operation chain built by copying took 1.5 us of host
  /// time on the lent H100's processor, as much as a third of its launch).
  explicit MapExpr(Children... children) : contents_(make_contents(std::move(children)...)) {}

  const Shape<rank>& shape() const { return contents().shape; }
  const std::tuple<Children...>& children() const { return contents().children; }
  /// The heap block every copy of this node shares, or null for a node held by value.
  const void* identity() const {
    if constexpr (on_heap) return contents_.get();
    else return nullptr;
  }

 private:
  struct Contents {
    std::tuple<Children...> children;
    Shape<rank> shape;
  };
  static constexpr bool on_heap = ops > sharing_threshold;
  static auto make_contents(Children&&... children) {
    Shape<rank> shape = broadcast_all(children.shape()...);
    if constexpr (on_heap) return SharedNode<Contents>(Contents{{std::move(children)...}, shape});
    else return Contents{{std::move(children)...}, shape};
  }
  const Contents& contents() const {
    if constexpr (on_heap) return *contents_;
    else return contents_;
  }
  std::conditional_t<on_heap, SharedNode<Contents>, Contents> contents_;
};

template <class Op, class... Cs>
inline constexpr std::uint64_t tree_ops_v<MapExpr<Op, Cs...>> = MapExpr<Op, Cs...>::ops;
template <class Op, class... Cs>
inline constexpr bool devices_agree_in_v<MapExpr<Op, Cs...>> =
    devices_agree_v<typename Cs::device_type...> && (devices_agree_in_v<Cs> && ...);

/// A value computed from the linear (row-major) index alone: ranges and random numbers.
/// Gen is a device-copyable functor `value_type operator()(std::int64_t) const`.
template <class Gen, int Rank, class D>
class GeneratorExpr : public ExprTag {
 public:
  using value_type = typename Gen::value_type;
  using device_type = D;
  static constexpr int rank = Rank;

  GeneratorExpr(Gen gen, const Shape<Rank>& shape) : gen_(gen), shape_(shape) {}
  const Shape<Rank>& shape() const { return shape_; }
  const Gen& generator() const { return gen_; }

 private:
  Gen gen_;
  Shape<Rank> shape_;
};

/// Throws et::Error when `x` is an undefined (default-constructed) tensor: it has no
/// shape or storage to compute with (without the check it read as an empty [0] tensor).
template <class X>
void require_defined_operand(const X& x) {
  if constexpr (requires { x.defined(); }) {
    if (!x.defined())
      throw Error("et: an undefined (default-constructed) tensor cannot be an operand; assign it a tensor first");
  }
}

/// Wraps a C++ scalar in the element type it takes beside an expression of type T; an
/// expression is copied, or moved when it is a temporary. A scalar that an integer type
/// cannot hold is an et::Error (uint8 tensor + 256, int32 tensor + 2^40), as in PyTorch.
template <class T, class X>
auto as_operand(X&& x) {
  require_defined_operand(x);
  using V = std::remove_cvref_t<X>;
  using S = scalar_type_t<T, V>;
  if constexpr (Expression<V>) return V(std::forward<X>(x));
  else if constexpr (std::is_integral_v<S>) return ScalarExpr<S>(scalar_as<S>(x, "a scalar operand"));
  else return ScalarExpr<S>(static_cast<compute_t<S>>(x));
}

/// The promoted element type of the expression operands in a list (void if none):
/// it decides the type the scalars in that list take.
template <class Acc, class X>
constexpr auto promote_step() {
  if constexpr (!Expression<X>) return std::type_identity<Acc>{};
  else if constexpr (std::is_void_v<Acc>) return std::type_identity<typename X::value_type>{};
  else return std::type_identity<promote_t<Acc, typename X::value_type>>{};
}
template <class Acc, class... Xs>
struct operands_value_type {
  using type = Acc;
};
template <class Acc, class X, class... Rest>
struct operands_value_type<Acc, X, Rest...> {
  using type = typename operands_value_type<typename decltype(promote_step<Acc, X>())::type, Rest...>::type;
};

/// Builds MapExpr<Op, ...> from operands, at least one of which is an expression.
/// Device mismatches stop compilation here, with a message naming both devices.
template <class Op, class... Xs>
auto make_map(Xs&&... xs) {
  using T = typename operands_value_type<void, std::remove_cvref_t<Xs>...>::type;
  static_assert(!std::is_void_v<T>, "et: an elementwise operation needs at least one tensor or expression");
  using Result = MapExpr<Op, decltype(as_operand<T>(std::forward<Xs>(xs)))...>;
  using Checked [[maybe_unused]] = typename Result::device_type;
  return Result(as_operand<T>(std::forward<Xs>(xs))...);
}

}  // namespace detail
}  // namespace et
