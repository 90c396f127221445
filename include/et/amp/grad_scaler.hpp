// Mixed precision, the backward's side: et::amp::GradScaler<D>, PyTorch's loss scaling for
// float16 training, with every decision on the device, so that no call waits for the host
// and a whole scaled step can be captured (et::capture) and replayed:
//
//   et::amp::GradScaler<et::Cuda<0>> scaler(et::cuda<0>);
//   for (...) {
//     opt.zero_grad();
//     { et::amp::Autocast<et::half> autocast; loss = et::nn::cross_entropy(model(xh), y); }
//     scaler.scale(loss).backward();   // the gradients of loss * scale
//     scaler.step(opt);                // unscale, check, and update unless a gradient overflowed
//     scaler.update();                 // the next step's scale
//   }
//
// The state is one small float tensor on the device: the scale, the count of clean steps
// since the scale last changed, and one overflow flag per optimizer stepped since update().
//  - scale(t): t * scale (an expression read from the device: nothing waits).
//  - unscale_(opt): every gradient of opt times 1/scale, in one multi-tensor launch that
//    also raises opt's flag where a result is not finite (inf or NaN). Call it before
//    clipping (et::nn::clip_grad_norm_); step() calls it when you did not.
//  - step(opt): opt's update, skipped on the device where its flag is raised: SGD's kernel
//    reads the flag (Optimizer::step_unless). Adam and AdamW count their steps on the host:
//    for them step() reads the flag on the host (one wait, as PyTorch's non-fused optimizers
//    under its scaler), and their steps cannot be captured anyway.
//  - update(): one kernel, PyTorch's rule (torch.amp.GradScaler, _amp_update_scale_): an
//    overflow multiplies the scale by backoff_factor (0.5) and restarts the count; otherwise
//    the count grows, and at growth_interval (2000) clean steps the scale is multiplied by
//    growth_factor (2) when the product is finite, and the count restarts. The flags are
//    cleared. update(new_scale) sets the scale instead.
//  - get_scale() and growth_tracker() read the state on the host: they wait for the GPU
//    (read them when you log, not every step); scale_tensor() is the device's scale itself.
// With enabled = false every call is a pass-through (scale(t) is t, step is opt.step()).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "et/ops/creation.hpp"
#include "et/optim/optimizer.hpp"
#include "et/tensor.hpp"

namespace et::amp {

struct GradScalerOptions {
  double init_scale = 65536.0;  ///< 2^16, as PyTorch
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
  bool enabled = true;
};

namespace detail {

/// The state's layout: [scale, clean steps, flag of optimizer 0, flag of optimizer 1, ...].
inline constexpr int first_flag = 2;
inline constexpr int max_optimizers = 8;

/// Raises a flag; concurrent threads may raise it together (on the CPU, an atomic store).
ET_HD void raise_flag(float* flag) {
#if defined(__CUDA_ARCH__)
  *flag = 1.0f;
#else
  std::atomic_ref<float>(*flag).store(1.0f, std::memory_order_relaxed);
#endif
}

/// g <- g / scale; a result that is not finite raises the flag (x - x is 0 for finite x only).
template <class T>
struct Unscale {
  const float* scale;
  float* flag;
  ET_HD void operator()(T* const* a, std::int64_t i) const {
    const T g = a[0][i] * T(1.0f / *scale);
    a[0][i] = g;
    if (!(g - g == T(0))) raise_flag(flag);
  }
};

/// The scale's update from the flags (see the file comment); the flags are cleared.
struct UpdateScale {
  float growth, backoff, interval;
  int flags;
  ET_HD void operator()(float* const* a, std::int64_t) const {
    float* s = a[0];
    bool overflow = false;
    for (int k = 0; k < flags; ++k) {
      overflow = overflow || s[first_flag + k] != 0.0f;
      s[first_flag + k] = 0.0f;
    }
    if (overflow) {
      s[0] *= backoff;
      s[1] = 0.0f;
      return;
    }
    const float clean = s[1] + 1.0f;
    if (clean >= interval) {
      const float grown = s[0] * growth;
      if (grown - grown == 0.0f) s[0] = grown;
      s[1] = 0.0f;
    } else {
      s[1] = clean;
    }
  }
};

}  // namespace detail

template <class D>
class GradScaler {
 public:
  explicit GradScaler(D dev, const GradScalerOptions& options = {}) : options_(options) {
    if (!(options.init_scale > 0) || !(options.growth_factor > 1) || !(options.backoff_factor > 0) ||
        !(options.backoff_factor < 1) || options.growth_interval < 1 || options.growth_interval > (1 << 24))
      throw Error("et: GradScaler needs init_scale > 0, growth_factor > 1, backoff_factor in (0, 1) and "
                  "growth_interval in [1, 2^24]");
    std::vector<float> initial(detail::first_flag + detail::max_optimizers, 0.0f);
    initial[0] = static_cast<float>(options.init_scale);
    state_ = from_vector(dev, initial, {std::int64_t(initial.size())});
  }

  /// t * scale (t itself when disabled): what to call backward() on.
  template <class T, int R>
  Tensor<T, R, D> scale(const Tensor<T, R, D>& t) const {
    static_assert(et::detail::is_floating_v<T>, "et: GradScaler::scale takes a floating-point tensor (the loss)");
    if (!options_.enabled) return t;
    return Tensor<T, R, D>(t * state_.select(0, 0));
  }

  /// Divides opt's gradients by the scale and raises opt's flag where one overflowed: once
  /// per optimizer between update()s, before step().
  template <class Opt>
  void unscale_(Opt& opt) {
    if constexpr (check_optimizer<Opt>()) unscale_checked(opt);
  }

  /// opt's step unless one of its gradients overflowed (see the file comment); unscales
  /// first when unscale_(opt) was not called.
  template <class Opt>
  void step(Opt& opt) {
    if constexpr (check_optimizer<Opt>()) step_checked(opt);
  }

  /// The scale of the next step, from this step's flags (one kernel; see the file comment).
  void update() {
    if (!options_.enabled) return;
    run_state_kernel(detail::UpdateScale{static_cast<float>(options_.growth_factor),
                                         static_cast<float>(options_.backoff_factor),
                                         static_cast<float>(options_.growth_interval), detail::max_optimizers});
    slots_.clear();
  }
  /// Sets the scale (the count of clean steps is kept) and clears the flags.
  void update(double new_scale) {
    if (!(new_scale > 0)) throw Error("et: GradScaler::update(new_scale) needs new_scale > 0");
    if (!options_.enabled) return;
    state_.select(0, 0) = static_cast<float>(new_scale);
    state_.slice(0, detail::first_flag, detail::first_flag + detail::max_optimizers) = 0.0f;
    slots_.clear();
  }

  /// The current scale, read on the host: waits for the GPU (1.0 when disabled).
  double get_scale() const { return options_.enabled ? double(state_.select(0, 0).item()) : 1.0; }
  /// Clean steps since the scale last changed, read on the host: waits for the GPU.
  std::int64_t growth_tracker() const { return std::int64_t(state_.select(0, 1).item()); }
  /// The scale on the device (a view of the state: it changes with update()).
  Tensor<float, 0, D> scale_tensor() const { return state_.select(0, 0); }
  bool is_enabled() const noexcept { return options_.enabled; }
  const GradScalerOptions& options() const noexcept { return options_; }

 private:
  struct Slot {
    const void* optimizer;
    int index;
    bool unscaled = false, stepped = false;
  };

  template <class Opt>
  void unscale_checked(Opt& opt) {
    if (!options_.enabled) return;
    Slot& slot = slot_of(&opt);
    // step() unscales too: after it, the step is what went wrong.
    if (slot.stepped) throw Error("et: GradScaler::unscale_() after step(): unscale before stepping");
    if (slot.unscaled) throw Error("et: GradScaler::unscale_() was already called on this optimizer since the last update()");
    using T = typename Opt::value_type;
    const auto& params = opt.parameters();
    std::vector<Tensor<T, 1, D>> grads(params.size());
    et::optim::detail::apply_all<1>(
        params,
        [&](std::size_t k, T* (&a)[1]) {
          grads[k] = params[k].grad();
          if (!grads[k].defined()) return false;
          et::detail::note_stream_uses(grads[k], state_);
          a[0] = grads[k].data();
          return true;
        },
        detail::Unscale<T>{state_.data(), flag(slot)});
    for (auto& g : grads)
      if (g.defined()) g.note_write();
    slot.unscaled = true;
  }

  template <class Opt>
  void step_checked(Opt& opt) {
    if (!options_.enabled) {
      opt.step();
      return;
    }
    if (opt.overlaps_backward())
      throw Error("et: GradScaler::step: this optimizer updates its parameters during the backward "
                  "(overlap_with_backward), before the scaler can unscale and check the gradients");
    if constexpr (requires { opt.options().dampening; }) {
      if (opt.options().momentum != 0 && opt.options().dampening != 0)
        throw Error("et: GradScaler::step: SGD with momentum and dampening != 0 is not supported (a skipped first "
                    "step would start the momentum buffer from zeros instead of the next gradient)");
    }
    Slot& slot = slot_of(&opt);
    if (slot.stepped) throw Error("et: GradScaler::step() was already called on this optimizer since the last update()");
    if (!slot.unscaled) unscale_checked(opt);
    if constexpr (Opt::skips_on_device) {
      opt.step_unless(flag(slot));
    } else {
      const Tensor<float, 0, D> raised = state_.select(0, detail::first_flag + slot.index);
      if (raised.item() == 0.0f) opt.step();  // waits for the GPU: the step count is the host's
    }
    slot.stepped = true;
  }

  /// The checks of an optimizer's type (the body compiles only when they hold, so that the
  /// failed check is the one error the user reads).
  template <class Opt>
  static constexpr bool check_optimizer() {
    using T = typename Opt::value_type;
    [[maybe_unused]] et::detail::same_devices<D, typename Opt::device_type> check;
    constexpr bool master = std::is_same_v<T, float> || std::is_same_v<T, double>;
    static_assert(master,
                  "et: GradScaler steps optimizers of float master weights: an optimizer of 16-bit parameters "
                  "would lose every update smaller than their precision; keep the parameters float and give the "
                  "model 16-bit activations under et::amp::Autocast");
    return master && std::is_same_v<D, typename Opt::device_type>;
  }

  Slot& slot_of(const void* optimizer) {
    for (Slot& s : slots_)
      if (s.optimizer == optimizer) return s;
    if (slots_.size() == detail::max_optimizers)
      throw Error("et: GradScaler steps at most " + std::to_string(detail::max_optimizers) +
                  " optimizers between update()s");
    slots_.push_back({optimizer, static_cast<int>(slots_.size())});
    return slots_.back();
  }

  float* flag(const Slot& slot) const { return state_.data() + detail::first_flag + slot.index; }

  template <class Update>
  void run_state_kernel(const Update& update) {
    et::detail::TensorList<float, 1> list;
    float* pointers[1] = {state_.data()};
    list.add(pointers, 1);
    et::detail::note_stream_uses(state_);
    run_multi_tensor(et::detail::backend<D>, list, update);  // found by argument-dependent lookup
    state_.note_write();
  }

  GradScalerOptions options_;
  Tensor<float, 1, D> state_;
  std::vector<Slot> slots_;
};

}  // namespace et::amp
