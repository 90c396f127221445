// What a tensor handle carries for reverse-mode differentiation (included at the end of
// tensor.hpp). A handle that never took part in autograd carries nothing (a null
// pointer); `requires_grad_(true)` or a recorded operation gives it an AutogradMeta, which
// every copy of the handle made afterwards shares (as every Python reference to a PyTorch
// tensor shares its one TensorImpl). The graph itself (nodes, the engine) is in
// autograd/graph.hpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "et/device.hpp"
#include "et/runtime/version.hpp"
#include "et/tensor/forward.hpp"
#include "et/types.hpp"

namespace et {

namespace detail {

/// Whether operations record their backward on this thread (NoGradGuard turns it off).
inline bool& grad_mode_flag() {
  thread_local bool enabled = true;
  return enabled;
}

/// Guards the leaves' accumulators and their hooks (created and run by graphs of any thread).
inline std::mutex& leaf_mutex() {
  static std::mutex mutex;
  return mutex;
}

/// A gradient folded into the tensor it is the gradient of: the operation that computes g
/// writes x <- beta * x + alpha * g (a GEMM's own beta and alpha) instead of g, then calls
/// done(). Plain SGD's step is such an update (beta = 1 - lr * weight_decay, alpha = -lr).
struct FoldedUpdate {
  double beta = 1, alpha = 1;
  std::function<void()> done;
};

/// The parts of graphs that this thread is freeing (release_iteratively).
struct PendingReleases {
  std::vector<std::shared_ptr<void>> parts;
  bool draining = false;
};
inline PendingReleases& pending_releases() {
  thread_local PendingReleases pending;  // one list for every kind of part
  return pending;
}

/// Drops `part` (a node, a tensor's autograd state, a view's link) without recursing into
/// what it holds: each of those drops its own parts through this, and the outermost call
/// frees them one at a time from a list. So freeing a chain of a million recorded
/// operations or views takes constant stack, as PyTorch's deleteNode does, where plain
/// shared pointers would free it by one nested destructor call per link.
template <class P>
void release_iteratively(std::shared_ptr<P>& part) noexcept {
  if (!part || part.use_count() != 1) {  // only the last owner frees (and so recurses)
    part.reset();
    return;
  }
  PendingReleases& pending = pending_releases();
  pending.parts.push_back(std::move(part));
  if (pending.draining) return;  // an outer call frees it
  pending.draining = true;
  while (!pending.parts.empty()) {
    std::shared_ptr<void> last = std::move(pending.parts.back());
    pending.parts.pop_back();
    last.reset();  // its destructor hands its own parts to the list
  }
  pending.draining = false;
}

/// A recorded operation: its backward takes the gradient of its output (held by the
/// GradSink of the output's type, graph.hpp) and sends its inputs' gradients down `next`.
struct Node {
  Node() : sequence(next_sequence()) {}
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node() {
    for (auto& edge : next) release_iteratively(edge);
  }
  /// Computes and sends the inputs' gradients; `retain`: keep what it saved (else freed).
  virtual void apply(bool retain) = 0;
  /// The operation, for messages ("sum", "expression (x * y + z)", "matmul").
  virtual std::string name() const = 0;
  /// Asked by the one node whose edge reaches this one (graph.hpp's fold_along) before it
  /// computes the gradient it would send: whether that gradient may instead be folded into
  /// the input it read, which is `numel` elements of `storage`. Leaves whose optimizer
  /// offers it (GradFold) and the views between them and the asking node say yes.
  virtual std::optional<FoldedUpdate> fold(const void* /*storage*/, std::int64_t /*numel*/) { return std::nullopt; }

  /// The producers of this node's inputs (null where an input needs no gradient), in the
  /// order of the inputs.
  std::vector<std::shared_ptr<Node>> next;
  /// Creation order: the engine runs later nodes first among those that are ready.
  std::uint64_t sequence;
  /// Set once apply() freed what the node saved (a backward without retain_graph).
  std::atomic<bool> released{false};
  /// The edges into this node from the nodes of the backward now running (set by the
  /// engine before any node runs): 1 means one consumer sends all of its gradient. Atomic:
  /// backwards of several threads through graphs sharing a leaf set its accumulator's.
  std::atomic<int> graph_consumers{0};

 private:
  static std::uint64_t next_sequence() {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed);
  }
};

/// A new N (a Node or a ViewLink: their destructors are virtual) owned through a
/// std::shared_ptr<Base>. Made with new, not make_shared: the control block is then
/// shared_ptr<Base>'s own, one type for every node type, where make_shared instantiates a
/// control block and half a dozen functions of it per node type (in CI's -O0 build of
/// tests/cpu/test_random.cpp, 5.9 MB of its 54 MB of code). A recorded operation pays a
/// second small allocation for it.
template <class Base, class N, class... Args>
std::shared_ptr<Base> new_shared(Args&&... args) {
  return std::shared_ptr<Base>(static_cast<Base*>(new N(std::forward<Args>(args)...)));
}
template <class N, class... Args>
std::shared_ptr<Node> new_node(Args&&... args) {
  return new_shared<Node, N>(std::forward<Args>(args)...);
}

/// Where a view made in grad mode came from (autograd/views.hpp): its parent tensor and how
/// its gradient goes back to it. A write into the view, or into any tensor sharing its
/// storage, changes the version of the data; the view then takes its history anew from its
/// parent's, so that what it reads and what its gradient reaches stay the same thing.
struct ViewLink {
  /// `region(g, write, zero)`: g is storage laid out as the root's; sends the view's
  /// elements of it to `write` (if any), then zeroes them if `zero`.
  using Region = std::function<void(const std::shared_ptr<void>& g, const std::shared_ptr<Node>& write, bool zero)>;

  ViewLink() = default;
  ViewLink(const ViewLink&) = delete;
  ViewLink& operator=(const ViewLink&) = delete;
  virtual ~ViewLink() = default;
  /// The parent's own link when the parent is a view made in grad mode, else null.
  virtual const ViewLink* parent_link() const noexcept = 0;
  /// True when the parent requires grad or was computed by a recorded operation.
  virtual bool parent_recorded() const noexcept = 0;
  /// True when the parent is a view whose history is out of date (graph.hpp's view_stale).
  virtual bool parent_stale() const noexcept = 0;
  /// Brings the parent's history up to date, its own parent's being so already.
  virtual void refresh_parent() const = 0;
  /// A new node passing the view's gradient to the parent's current history.
  virtual std::shared_ptr<Node> make_node() const = 0;
  /// Throws unless a write can be recorded on the parent, which is the root.
  virtual void check_parent_as_root() const = 0;
  /// Records on the parent, which is the root, a write of `write` (see record_root_write).
  virtual void record_parent_write(Region region, std::shared_ptr<Node> write) const = 0;

  // The chain of parents is walked by loops, not calls: views can nest a million deep.

  /// True when the parent takes part in recording (directly or through its own parent).
  bool parent_needs_grad() const noexcept {
    for (const ViewLink* link = this; link; link = link->parent_link())
      if (link->parent_recorded()) return true;
    return false;
  }
  /// The link whose parent is the root (the first tensor up the chain that is not a view).
  const ViewLink& root_link() const noexcept {
    const ViewLink* link = this;
    while (const ViewLink* up = link->parent_link()) link = up;
    return *link;
  }
  /// Throws unless a write into this view can be recorded on its root.
  void check_root() const { root_link().check_parent_as_root(); }
  /// Records on the root that the view's elements were overwritten by the result of `write`
  /// (null: by values that need no gradient).
  void record_root_write(Region region, std::shared_ptr<Node> write) const {
    root_link().record_parent_write(std::move(region), std::move(write));
  }

  /// The version of the data when the view's history was last taken from its parent.
  std::uint64_t seen = 0;
};

/// Work to run once a backward has completed a leaf's gradient, while `owner` lives (a hook
/// whose owner is gone is dropped).
struct GradHook {
  std::weak_ptr<void> owner;
  std::function<void()> run;
};

/// An optimizer's offer, while `owner` lives, to take a leaf's gradient folded into the
/// leaf (FoldedUpdate): `take(storage, numel)` gives the update when those are all of the
/// leaf's elements and the optimizer can fold this step, else nullopt.
struct GradFold {
  std::weak_ptr<void> owner;
  std::function<std::optional<FoldedUpdate>(const void* storage, std::int64_t numel)> take;
};

/// The autograd state of a tensor handle and of the copies made after it was created.
template <class T, int Rank, class D>
struct AutogradMeta {
  ~AutogradMeta() {  // the history and the view's parent may be long chains
    release_iteratively(grad_fn);
    release_iteratively(view);
  }

  bool requires_grad = false;
  /// The accumulated gradient (leaves), undefined until a backward reached the tensor.
  Tensor<T, Rank, D> grad;
  /// The recorded operation that computed this tensor; null for a leaf.
  std::shared_ptr<Node> grad_fn;
  /// A leaf's gradient accumulator while a graph uses it (graph.hpp).
  std::weak_ptr<Node> accumulator;
  /// Counts in-place writes to this tensor and to its views (shared by them); the storage
  /// keeps a count of its own (runtime/version.hpp), which every handle over it reaches.
  std::shared_ptr<VersionCounter> version = std::make_shared<VersionCounter>();
  /// Set for a view made in grad mode.
  std::shared_ptr<ViewLink> view;
  /// Run, in order, each time a backward has completed this leaf's gradient (graph.hpp's
  /// AccumulateGrad; an optimizer's overlap_with_backward).
  std::vector<GradHook> grad_hooks;
  /// Set by an optimizer whose update may be folded into the backward (graph.hpp).
  GradFold fold;
};

template <class T, int R, class D>
using MetaPtr = std::shared_ptr<AutogradMeta<T, R, D>>;

/// True when a tensor with this meta takes part in recording: it requires grad (a leaf),
/// was computed by a recorded operation, or is a view of a tensor that takes part.
template <class M>
bool meta_needs_grad(const M& meta) noexcept {
  return meta && (meta->requires_grad || meta->grad_fn || (meta->view && meta->view->parent_needs_grad()));
}

}  // namespace detail

/// Turns recording off on this thread for the guard's scope (PyTorch's torch.no_grad()):
/// results computed inside need no gradient and hold no graph. Nests; restores the
/// previous state when it ends.
class NoGradGuard {
 public:
  NoGradGuard() : previous_(detail::grad_mode_flag()) { detail::grad_mode_flag() = false; }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
  ~NoGradGuard() { detail::grad_mode_flag() = previous_; }

 private:
  bool previous_;
};

/// True unless a NoGradGuard is active on this thread.
inline bool grad_enabled() noexcept { return detail::grad_mode_flag(); }

/// `loss.backward(et::retain_graph)`: keep the graph's saved tensors for another backward.
struct RetainGraph {};
inline constexpr RetainGraph retain_graph{};

}  // namespace et
