// What every optimizer shares (et::optim::SGD, Adam and AdamW derive from Optimizer): its
// parameters, zero_grad(), and step(), which runs the derived class's update(): ONE fused
// kernel launch for all parameters (one parallel loop on the CPU; a launch per 256
// parameters beyond that), like PyTorch's fused/foreach optimizers.
//
// overlap_with_backward() moves the updates into the backward: each parameter is updated
// as soon as the backward has completed its gradient, on a side stream of the device, while
// the backward goes on with the earlier layers (their GEMMs are arithmetic-bound, the
// update memory-bound); step() then makes the current stream wait for those updates.
// PyTorch's optimizer-in-backward (torch.distributed.optim._apply_optimizer_in_backward).
// An optimizer whose step is linear in the gradient (SGD without momentum: p <- (1 - lr *
// weight_decay) p - lr g) goes further: a weight whose gradient one GEMM computes (a
// Linear's) is updated by that GEMM, in place, and its gradient is never written (then its
// grad() stays undefined, as PyTorch's optimizer-in-backward drops it). It applies when the
// weight is read once in the graph, whole, and its backward starts from no gradient
// (zero_grad(true), or the first backward).
//
//   opt.overlap_with_backward();
//   for (...) { opt.zero_grad(true); loss = f(model(x)); loss.backward(); opt.step(); }
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "et/backend/cpu/multi_tensor.hpp"
#include "et/backend/tensor_list.hpp"
#include "et/optim/parameter.hpp"
#include "et/runtime/stream.hpp"
#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/multi_tensor.hpp"
#endif

namespace et::optim {

namespace detail {

using et::detail::TensorList;

/// Calls run(list, last) on the arrays that `arrays_of(k, pointers)` gives parameter k
/// (false: skip it), in lists of TensorList::capacity; `last`: no list follows. The last
/// list is empty only when no parameter gave arrays.
template <int K, class T, class D, class Arrays, class Run>
void for_each_list(const std::vector<Parameter<T, D>>& params, Arrays arrays_of, Run run) {
  TensorList<T, K> list;
  for (std::size_t k = 0; k != params.size(); ++k) {
    T* pointers[K];
    if (params[k].numel() == 0 || !arrays_of(k, pointers)) continue;
    if (!list.add(pointers, params[k].numel())) {
      run(list, false);
      list.count = 0;
      list.add(pointers, params[k].numel());
    }
  }
  run(list, true);
}

/// Runs `update` over the arrays that `arrays_of(k, pointers)` gives parameter k (false:
/// skip it), in lists of TensorList::capacity: one launch each.
template <int K, class T, class D, class Arrays, class Update>
void apply_all(const std::vector<Parameter<T, D>>& params, Arrays arrays_of, const Update& update) {
  for_each_list<K>(params, arrays_of, [&](const TensorList<T, K>& list, bool) {
    run_multi_tensor(et::detail::backend<D>, list, update);  // found by argument-dependent lookup
  });
}

template <class T>
struct ZeroUpdate {
  ET_HD void operator()(T* const* a, std::int64_t i) const { a[0][i] = T(0); }
};

/// The parameters' flat gradients, zeroed in one launch (or dropped).
template <class T, class D>
void zero_grads(const std::vector<Parameter<T, D>>& params, bool set_to_none) {
  if (set_to_none) {
    for (const auto& param : params) param.clear_grad();
    return;
  }
  std::vector<Tensor<T, 1, D>> grads(params.size());
  apply_all<1>(
      params,
      [&](std::size_t k, T* (&p)[1]) {
        grads[k] = params[k].grad();
        p[0] = grads[k].defined() ? grads[k].data() : nullptr;
        return grads[k].defined();
      },
      ZeroUpdate<T>{});
}

}  // namespace detail

/// The base of the optimizers: Derived provides `update(chosen)`, which updates, in one
/// launch on the current stream, every parameter k that has a gradient and chosen(k).
template <class Derived, class T, class D>
class Optimizer {
 public:
  using value_type = T;   ///< the parameters' element type
  using device_type = D;
  /// Zeros every gradient in one launch; with set_to_none, drops them instead (PyTorch's
  /// zero_grad(set_to_none=True)): the next backward writes each gradient anew rather than
  /// adding into zeros, which saves writing and reading every gradient once.
  void zero_grad(bool set_to_none = false) { detail::zero_grads(params_, set_to_none); }

  /// One update of every parameter that has a gradient. After overlap_with_backward(), the
  /// parameters the last backward reached were updated during it: the current stream waits
  /// for those updates (the host does not), and only the others that have a gradient are
  /// updated here.
  void step() {
    if (!overlap_) {
      self().update([](std::size_t) { return true; });
    } else {
      Overlap& o = *overlap_;
      self().update([&](std::size_t k) { return !o.updated[k]; });
      o.finished.record(o.side);
      current_stream(D{}).wait(o.finished);
      std::fill(o.updated.begin(), o.updated.end(), char(0));
    }
    for (const auto& p : params_) p.note_write();
  }

  /// From now on, every backward() that completes a parameter's gradient updates that
  /// parameter at once, on a side stream (on the CPU: at once, in the backward), and step()
  /// only waits for those updates. One backward per step: a second backward reaching a
  /// parameter before step() throws et::Error (gradients cannot be accumulated over several
  /// backwards while updates overlap them). Returns the optimizer.
  Derived& overlap_with_backward() {
    if (overlap_) return self();
    overlap_ = std::make_shared<Overlap>(this, params_.size());
    for (std::size_t k = 0; k != params_.size(); ++k) {
      Overlap* state = overlap_.get();  // alive while the hook runs: it is the hook's owner
      params_[k].add_grad_hook({overlap_, [state, k] { state->owner->update_in_backward(k); }});
      if constexpr (requires(const Derived& d) { d.folded_step(); })
        params_[k].set_grad_fold({overlap_, [state, k](const void* storage, std::int64_t numel) {
                                    return state->owner->fold_in_backward(k, storage, numel);
                                  }});
    }
    return self();
  }
  bool overlaps_backward() const noexcept { return overlap_ != nullptr; }

  /// step(), with every update skipped on the device when *skip != 0 (a float the GPU wrote:
  /// et::amp::GradScaler's overflow flag), so that the host never waits to decide. Only for
  /// optimizers whose state the device alone keeps (Derived::skips_on_device: SGD); the others
  /// are stepped by the scaler after it reads the flag on the host.
  void step_unless(const float* skip) {
    static_assert(Derived::skips_on_device, "et: this optimizer counts its steps on the host; it cannot skip a step on the device");
    skip_ = skip;
    try {
      step();
    } catch (...) {
      skip_ = nullptr;
      throw;
    }
    skip_ = nullptr;
  }

  const std::vector<Parameter<T, D>>& parameters() const noexcept { return params_; }

 protected:
  explicit Optimizer(std::vector<Parameter<T, D>> params) : params_(std::move(params)) {}
  // A moved optimizer takes its hooks along; a copy does not overlap until asked to.
  Optimizer(const Optimizer& other) : params_(other.params_) {}
  Optimizer(Optimizer&& other) noexcept : params_(std::move(other.params_)), overlap_(std::move(other.overlap_)) {
    if (overlap_) overlap_->owner = this;
  }
  Optimizer& operator=(const Optimizer& other) {
    if (this != &other) {
      params_ = other.params_;
      overlap_.reset();
    }
    return *this;
  }
  Optimizer& operator=(Optimizer&& other) noexcept {
    params_ = std::move(other.params_);
    overlap_ = std::move(other.overlap_);
    if (overlap_) overlap_->owner = this;
    return *this;
  }
  ~Optimizer() = default;

  std::vector<Parameter<T, D>> params_;
  const float* skip_ = nullptr;  ///< step_unless's flag while it steps, else null

 private:
  struct Overlap {
    Overlap(Optimizer* o, std::size_t n) : owner(o), updated(n, 0) {}
    Optimizer* owner;
    Stream<D> side = Stream<D>::create();
    Event<D> ready, finished;
    std::vector<char> updated;  ///< by the backward since the last step()
  };

  Derived& self() noexcept { return static_cast<Derived&>(*this); }

  /// Parameter k's gradient is complete on the current stream: update it on the side stream.
  void update_in_backward(std::size_t k) {
    Overlap& o = *overlap_;
    if (o.updated[k])
      throw Error("et: overlap_with_backward(): a second backward() reached a parameter before step(); call "
                  "step() after each backward (gradients cannot accumulate over several backwards while the "
                  "updates overlap them)");
    o.ready.record(current_stream(D{}));
    o.side.wait(o.ready);
    {
      StreamGuard<D> guard(o.side);
      self().update([k](std::size_t j) { return j == k; });
    }
    params_[k].note_write();
    o.updated[k] = 1;
  }

  /// Parameter k's update with its gradient folded in, computed by the backward
  /// (et::detail::FoldedUpdate), when `storage` and `numel` are all of its elements and
  /// Derived::folded_step() gives the update's (beta, alpha) for this step.
  std::optional<et::detail::FoldedUpdate> fold_in_backward(std::size_t k, const void* storage, std::int64_t numel) {
    Overlap& o = *overlap_;
    const auto& data = params_[k].data();
    if (o.updated[k] || storage != data.storage().get() || numel != data.numel()) return std::nullopt;
    const std::optional<std::pair<double, double>> scale = self().folded_step();
    if (!scale) return std::nullopt;
    return et::detail::FoldedUpdate{scale->first, scale->second, [&o, this, k] {
                                      params_[k].note_write();
                                      o.updated[k] = 1;
                                    }};
  }

  std::shared_ptr<Overlap> overlap_;
};

}  // namespace et::optim
