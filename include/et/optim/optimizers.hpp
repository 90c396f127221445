// Optimizers (namespace et::optim), PyTorch's update rules, each step ONE fused kernel
// launch for all parameters (optim/optimizer.hpp: what they share, and updates overlapped
// with the backward):
//
//   et::optim::SGD opt(et::optim::parameters(w, b), {.lr = 0.01, .momentum = 0.9});
//   et::optim::Adam adam(model.parameters(), {.lr = 1e-3});     // AdamW: et::optim::AdamW
//   opt.zero_grad();  loss.backward();  opt.step();
//
// A parameter without a gradient (no backward reached it) is skipped, as in PyTorch.
// float and double parameters; the state (momentum, moments) has the parameter's type.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "et/expr/functors.hpp"
#include "et/ops/creation.hpp"
#include "et/optim/adam.hpp"
#include "et/optim/optimizer.hpp"
#include "et/runtime/allocator.hpp"

namespace et::optim {

/// Stochastic gradient descent, PyTorch's torch.optim.SGD: g += weight_decay * p; with
/// momentum, buf = momentum * buf + (1 - dampening) * g (buf = g at the first step) and g =
/// g + momentum * buf (nesterov) or buf; p -= lr * g.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

template <class T>
struct SgdUpdate {
  T lr, momentum, dampening, weight_decay;
  bool nesterov, first;
  const float* skip;  ///< non-null: no update where *skip != 0 (optimizer.hpp: step_unless)
  ET_HD void operator()(T* const* a, std::int64_t i) const {  // a: parameter, gradient, momentum buffer
    if (skip != nullptr && *skip != 0.0f) return;
    T g = a[1][i] + weight_decay * a[0][i];
    if (momentum != T(0)) {
      const T buf = first ? g : momentum * a[2][i] + (T(1) - dampening) * g;
      a[2][i] = buf;
      g = nesterov ? g + momentum * buf : buf;
    }
    a[0][i] -= lr * g;
  }
};

template <class T, class D>
class SGD : public Optimizer<SGD<T, D>, T, D> {
  using Base = Optimizer<SGD<T, D>, T, D>;
  friend Base;

 public:
  using Options = SGDOptions;
  static constexpr bool skips_on_device = true;
  SGD(std::vector<Parameter<T, D>> params, SGDOptions options) : Base(std::move(params)), options_(options) {
    if (!(options.lr >= 0) || !(options.momentum >= 0) || !(options.weight_decay >= 0))
      throw Error("et: SGD needs lr, momentum and weight_decay >= 0");
    if (options.nesterov && (options.momentum <= 0 || options.dampening != 0))
      throw Error("et: SGD with nesterov needs momentum > 0 and dampening 0 (as in PyTorch)");
    buffers_.resize(this->params_.size());
  }
  SGDOptions& options() noexcept { return options_; }  // e.g. a learning-rate schedule

 private:
  /// Updates every parameter k that has a gradient and chosen(k) (optimizer.hpp).
  template <class Chosen>
  void update(const Chosen& chosen) {
    const auto& params = this->params_;
    const bool momentum = options_.momentum != 0;
    std::vector<Tensor<T, 1, D>> grads(params.size());
    std::vector<char> first(params.size(), 0);
    auto arrays = [&](std::size_t k, T* (&a)[3]) {
      if (!chosen(k)) return false;
      grads[k] = params[k].grad();
      if (!grads[k].defined()) return false;
      if (momentum && !buffers_[k].defined()) {
        // A first step the device may skip (step_unless) leaves the buffer at zeros, from
        // which the next step's buf = momentum * 0 + (1 - dampening) * g is g (dampening 0).
        buffers_[k] = this->skip_ ? zeros<T>(D{}, Shape<1>{params[k].numel()})
                                  : Tensor<T, 1, D>::allocate(Shape<1>{params[k].numel()});
        first[k] = 1;
      }
      et::detail::note_stream_uses(params[k].data(), grads[k], buffers_[k]);
      a[0] = params[k].data().data();
      a[1] = grads[k].data();
      a[2] = momentum ? buffers_[k].data() : nullptr;
      return true;
    };
    // The first step initializes the buffers (buf = g): its own launch when some parameter
    // has a buffer already and others do not (a parameter that had no gradient before).
    for (const bool initial : {true, false}) {
      auto these = [&](std::size_t k, T* (&a)[3]) { return arrays(k, a) && (!momentum || bool(first[k]) == initial); };
      detail::apply_all<3>(params, these,
                           SgdUpdate<T>{T(options_.lr), T(options_.momentum), T(options_.dampening),
                                        T(options_.weight_decay), options_.nesterov, initial, this->skip_});
      if (!momentum) break;
    }
  }

  /// Without momentum, the step is p <- beta * p + alpha * g, which the backward may fold
  /// into the GEMM that computes g (optimizer.hpp): (beta, alpha).
  std::optional<std::pair<double, double>> folded_step() const {
    if (options_.momentum != 0) return std::nullopt;
    return std::pair{1 - options_.lr * options_.weight_decay, -options_.lr};
  }

  SGDOptions options_;
  std::vector<Tensor<T, 1, D>> buffers_;
};

}  // namespace et::optim
