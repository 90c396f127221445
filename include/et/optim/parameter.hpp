// What an optimizer updates: et::optim::Parameter<T, D>, one tensor of any rank (a leaf
// that requires grad, contiguous), seen as a flat array. A module's parameters() gives a
// std::vector of them; for loose tensors, et::optim::parameters(w, b, ...).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "et/runtime/error.hpp"
#include "et/tensor.hpp"
#include "et/tensor/meta.hpp"

namespace et::optim {

namespace detail {

template <class T, int R, class D>
Tensor<T, 1, D> flat(const Tensor<T, R, D>& t, const char* what) {
  if (!t.is_contiguous())
    throw Error(std::string("et: an optimizer updates contiguous tensors, but a parameter's ") + what +
                " has shape " + format_shape(t.shape()) + " and strides " + format_shape(t.strides()));
  return Tensor<T, 1, D>(t.storage(), t.offset(), Shape<1>{t.numel()}, Shape<1>{1});
}

template <class T, class D>
struct Source {
  virtual ~Source() = default;
  virtual Tensor<T, 1, D> grad() const = 0;
  virtual void clear_grad() const = 0;
  virtual void note_write() const = 0;
  virtual void add_grad_hook(et::detail::GradHook hook) const = 0;
  virtual void set_grad_fold(et::detail::GradFold fold) const = 0;
};

template <class T, int R, class D>
struct TensorSource final : Source<T, D> {
  explicit TensorSource(const Tensor<T, R, D>& t) : tensor(t) {}
  Tensor<T, 1, D> grad() const override {
    const Tensor<T, R, D> g = tensor.grad();
    return g.defined() ? flat(g, "gradient") : Tensor<T, 1, D>{};
  }
  void clear_grad() const override {
    Tensor<T, R, D> handle = tensor;  // shares the autograd state
    if (handle.autograd_meta()) handle.meta().grad = Tensor<T, R, D>{};
  }
  void note_write() const override { tensor.note_write(); }
  void add_grad_hook(et::detail::GradHook hook) const override {
    Tensor<T, R, D> handle = tensor;  // shares the autograd state
    std::lock_guard lock(et::detail::leaf_mutex());
    handle.meta().grad_hooks.push_back(std::move(hook));
  }
  void set_grad_fold(et::detail::GradFold fold) const override {
    Tensor<T, R, D> handle = tensor;
    std::lock_guard lock(et::detail::leaf_mutex());
    et::detail::GradFold& current = handle.meta().fold;
    if (!current.owner.expired())
      throw Error("et: a parameter's step is already folded into the backward by another optimizer; only one "
                  "optimizer that overlaps the backward may update a tensor");
    current = std::move(fold);
  }
  Tensor<T, R, D> tensor;
};

}  // namespace detail

/// One tensor an optimizer updates. Converts implicitly from any Tensor<T, R, D> that is a
/// contiguous leaf requiring grad (et::Error otherwise); copies share the tensor.
template <class T, class D>
class Parameter {
 public:
  template <int R>
  Parameter(const Tensor<T, R, D>& t)  // NOLINT(google-explicit-constructor): a vector of tensors converts
      : data_(detail::flat(t, "data")), source_(std::make_shared<detail::TensorSource<T, R, D>>(t)) {
    static_assert(et::detail::is_floating_v<T>, "et: an optimizer's parameters are floating-point tensors");
    if (!t.requires_grad() || !t.is_leaf())
      throw Error("et: an optimizer's parameter must be a leaf tensor that requires grad (requires_grad_(true))");
  }
  /// A parameter whose gradient and bookkeeping come from `source`: for wrappers that give
  /// an optimizer views of other parameters (nn::ShardedDataParallel's shards).
  Parameter(Tensor<T, 1, D> data, std::shared_ptr<const detail::Source<T, D>> source)
      : data_(std::move(data)), source_(std::move(source)) {}
  /// The values, flat (the same storage).
  const Tensor<T, 1, D>& data() const noexcept { return data_; }
  /// The accumulated gradient, flat, or an undefined tensor before the first backward.
  Tensor<T, 1, D> grad() const { return source_->grad(); }
  /// Drops the gradient: undefined until the next backward writes it anew.
  void clear_grad() const { source_->clear_grad(); }
  std::int64_t numel() const noexcept { return data_.numel(); }
  /// Tells autograd that an optimizer step changed the values (version counter).
  void note_write() const { source_->note_write(); }
  /// Runs `hook.run` each time a backward has completed the gradient, while `hook.owner` lives.
  void add_grad_hook(et::detail::GradHook hook) const { source_->add_grad_hook(std::move(hook)); }
  /// Offers to take the gradient folded into the values (et::detail::GradFold), while
  /// `fold.owner` lives; one owner at a time (et::Error while another lives).
  void set_grad_fold(et::detail::GradFold fold) const { source_->set_grad_fold(std::move(fold)); }

 private:
  Tensor<T, 1, D> data_;
  std::shared_ptr<const detail::Source<T, D>> source_;
};

/// The parameters of loose tensors: et::optim::SGD opt(et::optim::parameters(w, b), {...}).
template <class T, int R, class D, class... Rest>
std::vector<Parameter<T, D>> parameters(const Tensor<T, R, D>& first, const Rest&... rest) {
  return {Parameter<T, D>(first), Parameter<T, D>(rest)...};
}

}  // namespace et::optim
