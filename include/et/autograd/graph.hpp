// The recorded graph and the engine that runs it backwards. Every recorded operation is a
// Node (tensor/meta.hpp) that derives from the GradSink of its output's type, which
// accumulates the gradients its consumers send. A leaf that requires grad is reached
// through its AccumulateGrad node, which adds into the leaf's grad(). `backward()` runs the
// nodes reachable from the root once each, every node after all of its consumers (later
// recorded nodes first among the ready ones, as PyTorch's engine does), without recording.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "et/exec/assign.hpp"
#include "et/tensor.hpp"
#include "et/tensor/meta.hpp"

namespace et::detail {

/// A node whose output is a Tensor<T, R, D>: holds the sum of the gradients sent to it.
template <class T, int R, class D>
struct GradSink : Node {
  Tensor<T, R, D> gradient;

  /// Adds g to the gradient. The first gradient is kept as it is (no copy); a later one is
  /// added in place only into storage no other handle shares (a view of the gradient the
  /// user passed to backward(), say, is never written).
  /// The sum is not recorded (evaluate, not assign): gradients are never differentiated.
  void add(Tensor<T, R, D> g) {
    if (!gradient.defined()) {
      gradient = std::move(g);
    } else if (gradient.storage().use_count() > 1 || !gradient.is_contiguous()) {
      Tensor<T, R, D> total;
      evaluate(total, gradient + g);
      gradient = std::move(total);
    } else {
      evaluate(gradient, gradient + g);
    }
  }
  /// The gradient received, handed over; an undefined tensor when none arrived.
  Tensor<T, R, D> take() { return std::exchange(gradient, Tensor<T, R, D>{}); }
};

/// Sends g to the node `to` (the producer of an input of type Tensor<T, R, D>), if any.
template <class T, int R, class D>
void send(const std::shared_ptr<Node>& to, Tensor<T, R, D> g) {
  if (!to || !g.defined()) return;
  std::lock_guard lock(leaf_mutex());  // a leaf's accumulator may be fed by graphs of several threads
  static_cast<GradSink<T, R, D>&>(*to).add(std::move(g));
}

/// Node::fold through the edge `to`, when it is the only edge into that node: a gradient
/// is folded only into an input that nothing else in any graph reads a gradient for.
inline std::optional<FoldedUpdate> fold_along(const std::shared_ptr<Node>& to, const void* storage,
                                              std::int64_t numel) {
  if (!to || to.use_count() != 1) return std::nullopt;
  return to->fold(storage, numel);
}

/// Adds the gradient that reaches a leaf into its grad(). Holds the leaf's state, so the
/// gradient lands even when every handle to the leaf is gone by then.
template <class T, int R, class D>
struct AccumulateGrad final : GradSink<T, R, D> {
  explicit AccumulateGrad(MetaPtr<T, R, D> meta) : meta_(std::move(meta)) {}
  std::string name() const override { return "gradient accumulation"; }
  /// The leaf's optimizer's fold, while no gradient is held or on its way (the first, and
  /// only, contribution of a backward that begins from no gradient) and no hook of another
  /// owner waits for the gradient.
  std::optional<FoldedUpdate> fold(const void* storage, std::int64_t numel) override {
    GradFold offer;
    {
      std::lock_guard lock(leaf_mutex());
      if (meta_->grad.defined() || this->gradient.defined()) return std::nullopt;
      offer = meta_->fold;
      // A gradient that another owner's hook waits for (DistributedDataParallel's average)
      // is not folded away.
      for (const GradHook& hook : meta_->grad_hooks)
        if (hook.owner.owner_before(offer.owner) || offer.owner.owner_before(hook.owner)) return std::nullopt;
    }
    const std::shared_ptr<void> owner = offer.owner.lock();
    if (!owner) return std::nullopt;
    return offer.take(storage, numel);
  }
  void apply(bool) override {
    std::vector<GradHook> hooks;
    {
      std::lock_guard lock(leaf_mutex());  // graphs on several threads may share a leaf
      Tensor<T, R, D> g = this->take();
      if (!g.defined()) return;
      Tensor<T, R, D>& grad = meta_->grad;
      if (grad.defined()) {
        evaluate(grad, grad + g);
      } else {
        // The first gradient becomes grad(): contiguous, and not shared with any other handle.
        if (!g.is_contiguous() || g.storage().use_count() > 1) g = untracked_copy(g);
        grad = std::move(g);
      }
      hooks = meta_->grad_hooks;
    }
    // The gradient is complete: every node that sends to this leaf ran before this one.
    // Hooks run without the lock (an optimizer's update launches work and may allocate).
    bool expired = false;
    for (const GradHook& hook : hooks) {
      if (const std::shared_ptr<void> owner = hook.owner.lock()) hook.run();
      else expired = true;
    }
    if (expired) {
      std::lock_guard lock(leaf_mutex());
      std::erase_if(meta_->grad_hooks, [](const GradHook& hook) { return hook.owner.expired(); });
    }
  }

 private:
  MetaPtr<T, R, D> meta_;
};

/// A view whose data was written since it took its history (through itself, its root or
/// another view), or whose parent needs a gradient it did not have then, takes its history
/// anew from its parent (autograd/views.hpp).
template <class T, int R, class D>
bool view_stale(const AutogradMeta<T, R, D>& meta) noexcept {
  const ViewLink& link = *meta.view;
  return link.seen != meta.version->value.load(std::memory_order_relaxed) ||
         (!meta.grad_fn && link.parent_needs_grad());
}
template <class T, int R, class D>
void refresh_view(AutogradMeta<T, R, D>& meta) {
  if (!view_stale(meta)) return;
  // Stale parents first, from the root down, in a loop: the new history reads the parent's,
  // and refreshing it by nested calls would recurse once per view of a chain.
  std::vector<const ViewLink*> stale;
  for (const ViewLink* link = meta.view.get(); link->parent_stale(); link = link->parent_link()) stale.push_back(link);
  for (auto link = stale.rbegin(); link != stale.rend(); ++link) (*link)->refresh_parent();
  ViewLink& link = *meta.view;
  meta.grad_fn = link.parent_needs_grad() ? link.make_node() : nullptr;
  link.seen = meta.version->value.load(std::memory_order_relaxed);
}

/// The node a gradient for tensor t goes to: its producer, the accumulator of a leaf that
/// requires grad, or null (t needs no gradient).
template <class T, int R, class D>
std::shared_ptr<Node> edge_of(const Tensor<T, R, D>& t) {
  const auto& meta = t.autograd_meta();
  if (!meta) return nullptr;
  if (meta->view) refresh_view(*meta);
  if (meta->grad_fn) return meta->grad_fn;
  if (!meta->requires_grad) return nullptr;
  std::lock_guard lock(leaf_mutex());
  if (auto existing = meta->accumulator.lock()) return existing;
  auto created = new_node<AccumulateGrad<T, R, D>>(meta);
  meta->accumulator = created;
  return created;
}

/// True when an operation reading these tensors is recorded now: grad mode is on and one
/// of them needs a gradient.
template <class... Ts>
bool records(const Ts&... ts) {
  return grad_enabled() && (meta_needs_grad(ts.autograd_meta()) || ...);
}

/// Whether this translation unit records operations on D tensors at all: not under
/// ET_NO_AUTOGRAD, and a CUDA operation only where nvcc compiles it (elsewhere the operation
/// itself has already stopped compilation with "needs nvcc"). A record_* function puts its
/// body under `if constexpr (records_on<D>)`, so that its backward is not even instantiated.
template <class D>
#if defined(ET_NO_AUTOGRAD)
inline constexpr bool records_on = false;
#else
inline constexpr bool records_on = !(D::is_cuda && !device_compiler);
#endif

/// Makes `node` the producer of `out` (a result, or a tensor written in place).
template <class T, int R, class D>
void attach(Tensor<T, R, D>& out, std::shared_ptr<Node> node) {
  auto& meta = out.meta();
  meta.grad_fn = std::move(node);
  meta.requires_grad = true;
}

/// What a recorded operation keeps of a tensor it reads: the data, without autograd state
/// (the node took its edge and version when it was recorded). A result written in place
/// into its own input then holds no reference cycle through its node.
template <class T, int R, class D>
Tensor<T, R, D> saved_data(const Tensor<T, R, D>& t) {
  return t.defined() ? untracked_view(t, layout_of(t)) : t;
}

/// What a node saves of its input t: t itself, autograd state included (the node takes t's
/// version from it, then keeps its saved_data), or, when `overwritten` (the result of an
/// in-place operation, written after its node saved its inputs) shares t's storage, a copy
/// of t's values, which has no version to check: no later write reaches it.
template <class T, int R, class D, class Out>
Tensor<T, R, D> saved_before_write(const Tensor<T, R, D>& t, const Out* overwritten) {
  if (overwritten == nullptr || !t.defined() || !t.storage() || t.storage() != overwritten->storage()) return t;
  return untracked_copy(t);
}

/// The versions of t's data a node saw when it saved t: the count of its autograd state
/// (shared with its views; none for a handle without one) and the count of its storage
/// (runtime/version.hpp: every write through any handle over the data reaches it). The
/// storage's is held weakly: the node's saved tensors, not its versions, keep data alive.
/// A tensor of no elements has no values a write could change: nothing is watched.
struct SavedVersion {
  std::shared_ptr<VersionCounter> counter;
  std::weak_ptr<VersionCounter> data;
  std::uint64_t seen = 0, data_seen = 0;

  template <class T, int R, class D>
  static SavedVersion of(const Tensor<T, R, D>& t) {
    SavedVersion out;
    if (t.numel() == 0) return out;
    if (const auto& meta = t.autograd_meta()) {
      out.counter = meta->version;
      out.seen = meta->version->value.load(std::memory_order_relaxed);
    }
    if (VersionCounter* version = storage_version(t.storage())) {
      out.data = std::shared_ptr<VersionCounter>(t.storage(), version);
      out.data_seen = version->value.load(std::memory_order_relaxed);
    }
    return out;
  }
  void check(const Node& node) const {
    if (counter) check(node, seen, counter->value.load(std::memory_order_relaxed));
    if (const auto version = data.lock()) check(node, data_seen, version->value.load(std::memory_order_relaxed));
  }

 private:
  static void check(const Node& node, std::uint64_t seen, std::uint64_t now) {
    if (now != seen)
      throw Error("et: a tensor that the backward of " + node.name() +
                  " needs was modified in place after it was recorded (version " + std::to_string(seen) + ", now " +
                  std::to_string(now) + "); compute into a new tensor instead, or detach() it first");
  }
};

/// Throws when a node's saved tensors were freed by an earlier backward.
inline void require_not_released(const Node& node) {
  if (node.released)
    throw Error("et: backward through the graph of " + node.name() +
                " a second time, but the first backward() freed it; pass et::retain_graph to the first "
                "backward() to keep it");
}

/// What a recorded operation's backward is told about input k: needs[k], whether it needs
/// a gradient, and fold(k, input), whether that gradient may be folded into `input` (the
/// tensor the operation read) rather than sent (FoldedUpdate; then it sends none).
struct BackwardNeeds {
  const std::vector<std::shared_ptr<Node>>& next;
  bool operator[](std::size_t k) const { return next[k] != nullptr; }
  template <class T, int R, class D>
  std::optional<FoldedUpdate> fold(std::size_t k, const Tensor<T, R, D>& input) const {
    return fold_along(next[k], input.storage().get(), input.numel());
  }
};

/// A recorded operation that is not a fused expression (matmul, conv2d, pooling): it
/// saves some tensors and computes its inputs' gradients with a function
/// `backward(gradient, needs, saved...) -> std::tuple<gradient of each input...>`, where
/// needs (BackwardNeeds) says which inputs need one (others may stay undefined).
template <class Out, class Inputs, class Saved, class F>
class OpBackward;
template <class T, int R, class D, class... Inputs, class... Saved, class F>
class OpBackward<Tensor<T, R, D>, std::tuple<Inputs...>, std::tuple<Saved...>, F> final : public GradSink<T, R, D> {
 public:
  OpBackward(const char* name, const std::tuple<const Inputs&...>& inputs, F backward, const Saved&... saved)
      : name_(name), backward_(std::move(backward)), saved_(std::in_place, saved_data(saved)...),
        versions_{SavedVersion::of(saved)...} {
    std::apply([&](const auto&... input) { (this->next.push_back(edge_of(input)), ...); }, inputs);
  }
  std::string name() const override { return name_; }
  void apply(bool retain) override {
    require_not_released(*this);
    const Tensor<T, R, D> g = this->take();
    if (g.defined()) {
      for (const auto& version : versions_) version.check(*this);
      const BackwardNeeds needs{this->next};
      auto grads = std::apply([&](const auto&... saved) { return backward_(g, needs, saved...); }, *saved_);
      [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
        (send(this->next[Ks], std::get<Ks>(grads)), ...);
      }(std::index_sequence_for<Inputs...>{});
    }
    if (!retain) saved_.reset();
  }

 private:
  const char* name_;
  F backward_;
  std::optional<std::tuple<Saved...>> saved_;
  std::array<SavedVersion, sizeof...(Saved)> versions_;
};

/// The node of an operation with output type Out: attach it to the output once computed.
template <class Out, class F, class... Inputs, class... Saved>
std::shared_ptr<Node> make_op_node(const char* name, const std::tuple<const Inputs&...>& inputs, F backward,
                                   const Saved&... saved) {
  using Node = OpBackward<Out, std::tuple<Inputs...>, std::tuple<Saved...>, F>;
  return new_node<Node>(name, inputs, std::move(backward), saved...);
}

/// Attaches to `out` the node of operation `name` on `inputs` (std::tie of them):
/// backward(gradient, needs, saved...) -> the inputs' gradients (OpBackward).
template <class T, int R, class D, class... Inputs, class F, class... Saved>
void record_op(Tensor<T, R, D>& out, const char* name, const std::tuple<const Inputs&...>& inputs, F backward,
               const Saved&... saved) {
  attach(out, make_op_node<Tensor<T, R, D>>(name, inputs, std::move(backward), saved...));
}

/// Runs the backward of every node reachable from `root` in dependency order.
inline void run_graph(const std::shared_ptr<Node>& root, bool retain) {
  std::unordered_map<Node*, int> consumers;  // edges into each node from nodes of the graph
  std::vector<Node*> stack{root.get()};
  consumers[root.get()] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const auto& next : node->next) {
      if (!next) continue;
      auto [it, inserted] = consumers.try_emplace(next.get(), 0);
      ++it->second;
      if (inserted) stack.push_back(next.get());
    }
  }
  for (const auto& [node, count] : consumers) node->graph_consumers.store(count, std::memory_order_relaxed);
  auto later_first = [](const Node* a, const Node* b) { return a->sequence < b->sequence; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later_first)> ready(later_first);
  ready.push(root.get());
  NoGradGuard no_grad;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    node->apply(retain);
    if (!retain) node->released = true;
    for (const auto& next : node->next)
      if (next && --consumers[next.get()] == 0) ready.push(next.get());
  }
}

template <class T, int R, class D>
void run_backward(const Tensor<T, R, D>& root, const Tensor<T, R, D>* seed, bool retain) {
  if (!root.requires_grad())
    throw Error("et: backward() on a tensor that does not require grad (no leaf it was computed from requires grad, "
                "or it was computed under et::NoGradGuard)");
  Tensor<T, R, D> gradient;
  if (seed) {
    if (seed->shape() != root.shape())
      throw ShapeError("et: backward(gradient): the gradient has shape " + format_shape(seed->shape()) +
                       " but the tensor has shape " + format_shape(root.shape()));
    gradient = seed->detach();  // read, never written (GradSink::add, AccumulateGrad)
  } else {
    if (root.numel() != 1)
      throw Error("et: backward() without a gradient needs a tensor of one element, but this one has shape " +
                  format_shape(root.shape()) + "; pass the gradient: t.backward(gradient)");
    NoGradGuard no_grad;
    gradient = Tensor<T, R, D>::allocate(root.shape());
    gradient = T(1);
  }
  const std::shared_ptr<Node> node = edge_of(root);
  send(node, std::move(gradient));
  run_graph(node, retain);
}

}  // namespace et::detail
