// Recording a fused expression: `z = f(x, y, w)` is ONE node whose backward is one kernel
// (eval/tape.hpp) that writes the gradients of all of f's inputs, plus one reduction
// per input that was broadcast. The node saves the expression, i.e. only its inputs (tensor
// handles); the intermediate values are recomputed inside the backward kernel.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/autograd/graph.hpp"
#include "et/eval/tape.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/reduce.hpp"

namespace et::detail {

/// The seed of an assignment's backward: the gradient of the destination, read as is.
struct PassSeed {
  template <int R, class Index, class G, class E>
  auto reader(const G& gradient, const Shape<R>& shape, const E&) const {
    return UpstreamSeed<decltype(make_reader<R, Index>(gradient, shape))>{make_reader<R, Index>(gradient, shape)};
  }
  template <class G>
  bool linear(const G& gradient) const {
    return gradient.is_contiguous();
  }
  void check(const Node&) const {}  // saves nothing of its own
  void release() {}
};

/// What a fused node does that does not depend on its expression: naming itself, checking
/// the versions of what it saved, taking its gradient and releasing what it saved. Compiled
/// once per result type (and index space rank), not again for every expression.
template <class T, int RO, class D, int R>
class FusedNodeBase : public GradSink<T, RO, D> {
 public:
  std::string name() const override {
    return std::string(what_) + (axis_ >= 0 ? " over axis " + std::to_string(axis_) : "") + " of " +
           std::to_string(ops_) + " fused operation(s), shape " + format_shape(shape_);
  }

  void apply(bool retain) override {
    require_not_released(*this);
    const Tensor<T, RO, D> g = this->take();
    if (g.defined()) {
      for (const auto& leaf : leaves_) leaf.version.check(*this);
      check_seed();
      backward(g);
    }
    if (!retain) release();
  }

 protected:
  FusedNodeBase(const Shape<R>& shape, const char* what, int axis, int ops, std::size_t leaves)
      : shape_(shape), what_(what), axis_(axis), ops_(ops) {
    leaves_.reserve(leaves);
  }

  /// Leaves that are one tensor (same autograd state) form a group, whose first leaf writes
  /// the gradient: group[l] is that leaf's index, or -1 for a leaf that needs no gradient.
  void group_leaves(signed char* group) const {
    for (std::size_t me = 0; me != leaves_.size(); ++me) {
      group[me] = -1;
      for (std::size_t first = 0; this->next[me] && first <= me; ++first)
        if (this->next[first] && leaves_[first].identity == leaves_[me].identity) {
          group[me] = static_cast<signed char>(first);
          break;
        }
    }
  }

  virtual void check_seed() const = 0;
  virtual void backward(const Tensor<T, RO, D>& g) = 0;
  virtual void release() = 0;

  /// What the node keeps of each tensor leaf of its expression, in tree_tensors_t order.
  struct Leaf {
    SavedVersion version;          // checked before the backward runs
    SumPlan<std::size_t(R)> plan;  // its gradient, from the index space down to its shape
    const void* identity;          // its autograd state: leaves with the same one are one tensor
  };

  /// The walkers of the expression's leaves when the node is made: functors, compiled once
  /// per leaf type (not per expression, as a lambda of the derived class would be).
  struct NoteLeaf {  // for_each_tree_tensor: edges, versions, sum plans
    FusedNodeBase& node;
    template <class U, int N, class DU>
    void operator()(const Tensor<U, N, DU>& leaf) {
      node.next.push_back(edge_of(leaf));
      node.leaves_.push_back({SavedVersion::of(leaf), sum_plan(leaf.shape(), node.shape_), leaf.autograd_meta().get()});
    }
  };
  struct SaveLeaf {  // map_tree_tensors: the handle the node keeps of each leaf
    FusedNodeBase& node;
    const Tensor<T, RO, D>* overwritten;
    std::size_t l = 0;
    template <class U, int N, class DU>
    Tensor<U, N, DU> operator()(const Tensor<U, N, DU>& leaf) {
      auto saved = saved_data(saved_before_write(leaf, overwritten));
      if (saved.storage() != leaf.storage()) node.leaves_[l].version = {};  // a copy: later writes cannot reach it
      ++l;
      return saved;
    }
  };

  Shape<R> shape_;
  const char* what_;
  int axis_;
  int ops_;
  std::vector<Leaf> leaves_;
};

/// The buffer a leaf's gradient is staged in over the index space, and its writer; true when
/// the buffer is contiguous. A function of the leaf's type, compiled once for all expressions.
template <class U, int R, class D, class Index>
bool stage_leaf_gradient(Tensor<U, R, D>& out, Writer<U, R, Index>& writer, const SumPlan<std::size_t(R)>& plan) {
  out = staging_buffer<U, D>(plan);
  writer = make_writer<Index>(out);
  return out.is_contiguous();
}

/// A leaf's gradient, staged over the index space, summed down to the leaf's shape and sent
/// typed as the leaf's sink (a Pinned leaf of a host expression, whose device is Cpu, gets it
/// in pinned memory).
template <class Leaf, class U, int R, class D>
void send_leaf_gradient(const std::shared_ptr<Node>& to, const Tensor<U, R, D>& staged,
                        const SumPlan<std::size_t(R)>& plan, const std::type_identity_t<Shape<R>>& shape) {
  auto sum = finish_sum(staged, plan, sum_target<Leaf::rank>(plan, shape));
  if constexpr (std::is_same_v<typename Leaf::device_type, D>) send(to, std::move(sum));
  else send(to, sum.to(typename Leaf::device_type{}));
}

template <class Out, class E, int R, class Seed>
class FusedBackward;

/// The backward of an expression E evaluated over the index space Shape<R> into a result
/// of type Tensor<T, RO, D>; Seed turns the result's gradient into the adjoint of E at each
/// element (PassSeed for an assignment; reductions have their own: derivatives/reduce.hpp).
template <class T, int RO, class D, class E, int R, class Seed>
class FusedBackward<Tensor<T, RO, D>, E, R, Seed> final : public FusedNodeBase<T, RO, D, R> {
  using Base = FusedNodeBase<T, RO, D, R>;
  using Leaves = tree_tensors_t<E>;
  static constexpr std::size_t L = list_size_v<Leaves>;
  using Index = std::int64_t;

 public:
  /// `what` (a string literal) and `axis` (>= 0: a reduction over that axis) name the node.
  /// `overwritten`: the tensor an in-place assignment writes (after this node saved the
  /// expression), whose old values the node then keeps a copy of; null otherwise.
  FusedBackward(const E& expr, const Shape<R>& shape, Seed seed, const char* what, int axis = -1,
                const Tensor<T, RO, D>* overwritten = nullptr)
      : Base(shape, what, axis, static_cast<int>(tree_ops_v<E>), L), seed_(std::move(seed)) {
    typename Base::NoteLeaf note{*this};
    for_each_tree_tensor(expr, note);
    typename Base::SaveLeaf save{*this, overwritten};
    expr_.emplace(map_tree_tensors(expr, save));
  }

 private:
  void check_seed() const override { seed_.check(*this); }
  void release() override {
    expr_.reset();
    seed_.release();
  }
  void backward(const Tensor<T, RO, D>& g) override { run(g, std::make_index_sequence<L>{}); }

  template <std::size_t... Ls>
  void run(const Tensor<T, RO, D>& g, std::index_sequence<Ls...>) {
    const Shape<R>& shape = this->shape_;
    using Root = tree_reader_t<R, Index, E>;
    using SeedReader = decltype(seed_.template reader<R, Index>(g, shape, *expr_));
    using Writers = typename leaf_writers<Leaves, R, Index>::type;
    GradProgram<Index, R, Root, SeedReader, Writers, L> program{
        tree_reader<R, Index>(*expr_, shape), seed_.template reader<R, Index>(g, shape, *expr_), {}, {}};
    this->group_leaves(program.group);
    std::tuple<Tensor<typename list_at_t<Ls, Leaves>::value_type, R, D>...> staged;
    bool linear = seed_.linear(g) && plan_reads(shape, *expr_).linear;
    ((program.group[Ls] == static_cast<signed char>(Ls)
          ? void(linear = stage_leaf_gradient(std::get<Ls>(staged), pack_get<Ls>(program.writers),
                                              this->leaves_[Ls].plan) && linear)
          : void()),
     ...);
    run_gradient(backend<D>, program, shape, linear);  // the one kernel
    // Each group's gradient, summed down to its leaf's shape and sent.
    ((program.group[Ls] == static_cast<signed char>(Ls)
          ? send_leaf_gradient<list_at_t<Ls, Leaves>>(this->next[Ls], std::get<Ls>(staged), this->leaves_[Ls].plan, shape)
          : void()),
     ...);
  }

  std::optional<E> expr_;
  Seed seed_;
};

/// True when the backward program of E (an assignment to a Tensor<T, R, D>) fits one
/// kernel's arguments and its leaves fit the program's group table.
template <class T, int R, class D, class E>
constexpr bool fits_gradient_kernel() {
  using Index = std::int64_t;
  using Leaves = tree_tensors_t<E>;
  constexpr std::size_t L = list_size_v<Leaves>;
  if constexpr (L > 100) {
    return false;
  } else {
    using Program = GradProgram<Index, R, tree_reader_t<R, Index, E>, UpstreamSeed<TensorReader<T, R, Index>>,
                                typename leaf_writers<Leaves, R, Index>::type, L>;
    return sizeof(Program) + sizeof(Coord<R, Index>) + 16 <= kernel_parameter_limit;
  }
}

/// Expressions of more than sharing_threshold operations (the ones with shared
/// subexpressions, evaluated as DAGs: docs/design.md) are not recorded: their backward
/// would have to be a DAG too, and compiling a fallback for every such expression would
/// double its compile time whether or not a program ever differentiates it.
template <class E>
[[noreturn]] void throw_large_expression() {
  throw Error("et: autograd records expressions of up to " + std::to_string(sharing_threshold) +
              " operations; this one has " + std::to_string(tree_ops_v<E>) +
              " (counting every use of a shared subexpression): evaluate parts of it into tensors first "
              "(et::eval), each of which is then recorded");
}

/// Records an expression whose backward program would not fit one kernel's arguments as
/// several nodes: each map operand of the root is evaluated (recorded) first, and the root
/// then reads those tensors (as run_split does for the forward, exec/assign.hpp).
template <class T, int R, class D, class Op, class... Cs>
void assign_split_recorded(Tensor<T, R, D>& dst, const MapExpr<Op, Cs...>& expr) {
  auto operand = [](const auto& child) {
    if constexpr (is_map_v<std::remove_cvref_t<decltype(child)>>) return eval(child);
    else return child;
  };
  std::apply([&](const auto&... children) { assign(dst, make_map<Op>(operand(children)...)); }, expr.children());
}

template <class T, int Rank, class D, class E>
void assign_recorded(Tensor<T, Rank, D>& dst, const E& expr) {
  if (dst.defined() && dst.requires_grad() && dst.is_leaf())
    throw Error("et: writing into a leaf tensor that requires grad while recording; write under et::NoGradGuard "
                "(as optimizers do), or into a tensor that does not require grad");
  if constexpr (list_size_v<tree_tensors_t<E>> == 0 && !contains_matmul_v<E>) {
    evaluate(dst, expr);  // no tensor: nothing to record (needs_grad was false)
  } else if constexpr (is_matmul_v<E>) {
    record_matmul(dst, expr);
  } else if constexpr (contains_matmul_v<E>) {
    if (record_linear(dst, expr)) return;  // act(matmul(a, w) + bias): one node (derivatives/linear.hpp)
    assign(dst, lower_recorded(expr));     // derivatives/linalg.hpp: each product a recorded GEMM
  } else if constexpr (tree_ops_v<E> > sharing_threshold) {
    throw_large_expression<E>();  // checked first: its tree is never built as a type
  } else if constexpr (!fits_gradient_kernel<T, Rank, D, E>()) {
    assign_split_recorded(dst, expr);
  } else {
    using Node = FusedBackward<Tensor<T, Rank, D>, E, Rank, PassSeed>;
    const Shape<Rank> shape = assigned_shape(dst, expr);
    auto node = new_node<Node>(expr, shape, PassSeed{}, "an assignment", -1, dst.defined() ? &dst : nullptr);
    evaluate(dst, expr);
    attach(dst, std::move(node));
  }
}

}  // namespace et::detail
