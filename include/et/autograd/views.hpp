// Recording views and copies (slice, transpose, expand, ..., clone, to), and writes into
// views. Each view says in tensor.hpp how its gradient goes back (`back`), so one node type
// serves them all. A view shares its base's version counter, so an in-place write through
// either is seen by the recorded operations that saved the other.
//
// A write into a view (`h.slice(0, 1, 3) = f(x)`) changes its root (the tensor that is not
// a view, up the chain of parents): as PyTorch's CopySlices does, the root's history becomes
// a node whose backward sends the root's gradient, with the view's elements zeroed, to the
// root's old history, and the view's elements to the write. Every other view of the storage
// then sees a new version and takes its history anew from its parent (edge_of, graph.hpp).
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "et/autograd/graph.hpp"

namespace et::detail {

template <class Out, class In, class Back>
class ViewBackward;
template <class T, int RO, class DO, class In, class Back>
class ViewBackward<Tensor<T, RO, DO>, In, Back> final : public GradSink<T, RO, DO> {
 public:
  /// `shares`: the output is a view of the input (else a copy, such as clone() or to()).
  ViewBackward(const In& in, Back back, const char* name, bool shares)
      : back_(std::move(back)), name_(name), shares_(shares) {
    this->next.push_back(edge_of(in));
  }
  std::string name() const override { return name_; }
  /// A view's elements are its input's: a gradient folded into them is folded into those.
  std::optional<FoldedUpdate> fold(const void* storage, std::int64_t numel) override {
    if (!shares_) return std::nullopt;
    return fold_along(this->next[0], storage, numel);
  }
  void apply(bool) override {
    const Tensor<T, RO, DO> g = this->take();
    if (g.defined()) send(this->next[0], In(back_(g)));
  }

 private:
  Back back_;
  const char* name_;
  bool shares_;
};

/// The history of values that need no gradient (a write of constants, say): a node that
/// passes nothing on.
template <class T, int R, class D>
struct ConstantBackward final : GradSink<T, R, D> {
  std::string name() const override { return "a write of values that need no gradient"; }
  void apply(bool) override { this->take(); }
};

template <class T, int R, class D>
void record_constant_write(Tensor<T, R, D>& dst) {
  attach(dst, new_node<ConstantBackward<T, R, D>>());
}

/// The root's history after a write into one of its views: next[0] is the root's history
/// before the write, next[1] the write's (or null).
template <class T, int R, class D>
class CopySlices final : public GradSink<T, R, D> {
 public:
  CopySlices(const Tensor<T, R, D>& root, ViewLink::Region region, std::shared_ptr<Node> write)
      : layout_{root.shape(), root.strides(), root.offset()}, region_(std::move(region)) {
    this->next = {edge_of(root), std::move(write)};
  }
  std::string name() const override { return "a write into a view"; }
  void apply(bool) override {
    const Tensor<T, R, D> g = this->take();
    if (!g.defined()) return;
    if (g.numel() == 0) {  // nothing to route, but the write's inputs still get their (empty) gradients
      region_(g.storage(), this->next[1], false);
      send(this->next[0], g);
      return;
    }
    // g laid out as the root is, so that the view's own layout finds its elements in it.
    const auto span = static_cast<std::size_t>(layout_.offset + max_offset(layout_.shape, layout_.strides) + 1);
    Tensor<T, R, D> laid(allocate_on<D>(span * sizeof(T)), layout_.offset, layout_.shape, layout_.strides);
    evaluate(laid, g);  // recorded nowhere, as every copy of a backward
    region_(laid.storage(), this->next[1], this->next[0] != nullptr);
    send(this->next[0], std::move(laid));
  }

 private:
  StridedLayout<std::size_t(R)> layout_;
  ViewLink::Region region_;
};

#if !defined(ET_DEVICE_COMPILER)
[[noreturn]] inline void throw_cuda_view_needs_nvcc(const char* what) {
  throw Error(std::string("et: recording ") + what +
              " for a CUDA tensor that requires grad needs a file compiled by nvcc");
}
#endif

/// The link of a view of type Out to its parent of type In.
template <class Out, class In, class Back>
class ViewLinkOf final : public ViewLink {
  using T = typename In::value_type;
  using D = typename In::device_type;

 public:
  ViewLinkOf(const In& parent, Back back, const char* name) : parent_(parent), back_(std::move(back)), name_(name) {}

  const ViewLink* parent_link() const noexcept override {
    const auto& meta = parent_.autograd_meta();
    return meta ? meta->view.get() : nullptr;
  }
  bool parent_recorded() const noexcept override {
    const auto& meta = parent_.autograd_meta();
    return meta && (meta->requires_grad || meta->grad_fn);
  }
  bool parent_stale() const noexcept override {
    const auto& meta = parent_.autograd_meta();
    return meta && meta->view && view_stale(*meta);
  }
  void refresh_parent() const override {
    const auto& meta = parent_.autograd_meta();
    if (meta && meta->view) refresh_view(*meta);
  }

  std::shared_ptr<Node> make_node() const override {
#if !defined(ET_DEVICE_COMPILER)
    if constexpr (D::is_cuda) throw_cuda_view_needs_nvcc(name_);
    else
#endif
      return new_node<ViewBackward<Out, In, Back>>(parent_, back_, name_, true);
  }

  void check_parent_as_root() const override {
    const auto& meta = parent_.autograd_meta();
    if (parent_.is_view())
      throw Error(
          "et: a result that requires grad is written into a view of a view that was made under et::NoGradGuard "
          "or of a detach()ed tensor, so the write cannot reach the tensor it views: make the views in grad mode");
    if (meta && meta->requires_grad && !meta->grad_fn)
      throw Error("et: writing into a view of a leaf tensor that requires grad while recording; write under "
                  "et::NoGradGuard (as optimizers do), or into a tensor computed from it");
    check_no_internal_overlap(parent_.shape(), parent_.strides());
  }

  void record_parent_write(Region region, std::shared_ptr<Node> write) const override {
#if !defined(ET_DEVICE_COMPILER)
    if constexpr (D::is_cuda) throw_cuda_view_needs_nvcc("a write into a view");
    else
#endif
    {
      In root = parent_;  // shares the root's autograd state
      attach(root, new_node<CopySlices<T, In::rank, D>>(root, std::move(region), std::move(write)));
    }
  }

 private:
  In parent_;  // the handle the view was made from, autograd state included
  Back back_;
  const char* name_;
};

/// Records how `out` (a view of `in` when they share storage, else a copy such as clone()
/// or to()) passes its gradient back to `in`. A view made in grad mode keeps a link to
/// `in`, whether or not `in` needs a gradient now: a later write may give it one.
template <class Out, class In, class Back>
void record_view(Out& out, const In& in, const Back& back, const char* name) {
  using T = typename In::value_type;
  using D = typename In::device_type;
  const auto& meta = in.autograd_meta();
  const bool shares = out.storage() == in.storage();
  if (shares) out.meta().version = meta->version;
  if constexpr (is_floating_v<T>) {
    if (!grad_enabled()) return;
    if (shares) {
      auto link = new_shared<ViewLink, ViewLinkOf<Out, In, Back>>(in, back, name);
      link->seen = meta->version->value.load(std::memory_order_relaxed);
      if (meta_needs_grad(meta)) attach(out, link->make_node());
      out.meta().view = std::move(link);
      return;
    }
    if (!meta_needs_grad(meta)) return;
#if !defined(ET_DEVICE_COMPILER)
    if constexpr (D::is_cuda || Out::device_type::is_cuda) throw_cuda_view_needs_nvcc(name);
    else
#endif
      attach(out, new_node<ViewBackward<Out, In, Back>>(in, back, name, false));
  }
}

/// The first half of a recorded write into the view dst (assign_into_view): checks that
/// the write can reach dst's root and returns the tensor the write goes to, dst's elements
/// without its history. Independent of the expression: compiled once per tensor type.
template <class T, int R, class D>
Tensor<T, R, D> begin_view_write(Tensor<T, R, D>& dst) {
  const auto& meta = dst.autograd_meta();
  if (!meta || !meta->view)
    throw Error(
        "et: a result that requires grad is written into a view that was made under et::NoGradGuard or of a "
        "detach()ed tensor, so the write cannot reach the tensor it views: make the view in grad mode");
  meta->view->check_root();
  (void)edge_of(dst);       // dst's history is current before the write reads it (`v += x`)
  return saved_data(dst);  // dst's elements; its history will be the write's
}

/// The second half: dst's history becomes the write's (target's), and its root's the node
/// that routes the root's gradient around the written elements (CopySlices above).
template <class T, int R, class D>
void finish_view_write(Tensor<T, R, D>& dst, const Tensor<T, R, D>& target) {
  const auto& meta = dst.autograd_meta();
  const std::shared_ptr<ViewLink> link = meta->view;
  dst.note_write();  // seen by every view of the storage (target has autograd state of its own)
  std::shared_ptr<Node> write = target.autograd_meta() ? target.autograd_meta()->grad_fn : nullptr;
  const StridedLayout<std::size_t(R)> layout{dst.shape(), dst.strides(), dst.offset()};
  auto region = [layout](const std::shared_ptr<void>& g, const std::shared_ptr<Node>& to, bool zero) {
    Tensor<T, R, D> elements(g, layout.offset, layout.shape, layout.strides);
    if (to) send(to, zero ? untracked_copy(elements) : elements);  // a copy where the elements are zeroed next
    if (zero) evaluate(elements, ScalarExpr<T>(T(0)));
  };
  link->record_root_write(region, write);
  if (!write) write = new_node<ConstantBackward<T, R, D>>();
  attach(dst, std::move(write));
  link->seen = meta->version->value.load(std::memory_order_relaxed);
}

/// Records `dst = expr` where dst is a view and grad mode is on, and either needs a
/// gradient: the write itself (a fused expression's node, as for any assignment), and on
/// dst's root the node that routes the root's gradient (CopySlices above).
template <class T, int R, class D, class E>
void assign_into_view(Tensor<T, R, D>& dst, const E& expr) {
  Tensor<T, R, D> target = begin_view_write(dst);
  if constexpr (is_floating_v<typename E::value_type> && may_need_grad_v<E>) {
    if (needs_grad(expr)) assign_recorded(target, expr);
    else evaluate(target, expr);
  } else {
    evaluate(target, expr);
  }
  finish_view_write(dst, target);
}

}  // namespace et::detail
