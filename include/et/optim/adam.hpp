// Adam and AdamW (namespace et::optim; optimizers.hpp includes this file), PyTorch's rules,
// with parameter groups and a capturable form:
//
//   et::optim::AdamW<float, D> opt({{.params = decay, .weight_decay = 0.1},
//                                   {.params = no_decay, .weight_decay = 0.0}},
//                                  {.lr = 6e-4, .betas = {0.9, 0.95}, .capturable = true});
//
// A group's .lr and .weight_decay, where given, replace the options' for its parameters
// (options().lr still sets the others: a schedule). Each parameter counts its own steps, as
// PyTorch's state["step"]; one launch per group and count. `capturable`: the counts live on
// the device (one tensor of them) and each thread finds its bias corrections there, so a step
// can be captured in a CUDA graph and replayed (the learning rate is the one at capture);
// without it the counts are the host's and a captured step throws et::Error.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/expr/functors.hpp"
#include "et/ops/creation.hpp"
#include "et/optim/optimizer.hpp"
#include "et/runtime/allocator.hpp"

namespace et::optim {

/// Adam (PyTorch's torch.optim.Adam; AdamW with decoupled weight decay): m = b1 m +
/// (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t)
/// + eps). Adam adds weight_decay * p to g; AdamW multiplies p by 1 - lr * weight_decay.
struct AdamOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0;
  bool capturable = false;  ///< the step counts on the device (see above)
};

/// Some of an optimizer's parameters, with the learning rate and weight decay that replace
/// the optimizer's options for them where given (PyTorch's param_groups).
template <class T, class D>
struct ParamGroup {
  std::vector<Parameter<T, D>> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

template <class T>
struct AdamUpdate {
  T beta1, beta2, step_size, bias2_sqrt, eps, weight_decay, decay_factor;
  ET_HD void apply(T* const* a, std::int64_t i, T step, T bias2) const {  // a: parameter, gradient, m, v
    T p = a[0][i] * decay_factor;
    const T g = a[1][i] + weight_decay * p;
    const T m = beta1 * a[2][i] + (T(1) - beta1) * g;
    const T v = beta2 * a[3][i] + (T(1) - beta2) * g * g;
    a[2][i] = m;
    a[3][i] = v;
    a[0][i] = p - step * m / (et::detail::math::sqrt(v) / bias2 + eps);
  }
  ET_HD void operator()(T* const* a, std::int64_t i) const { apply(a, i, step_size, bias2_sqrt); }
};

/// The capturable form: a[4] points to the parameter's step count on the device (already
/// counted for this step), from which the bias corrections are found.
template <class T>
struct AdamDeviceCountUpdate {
  AdamUpdate<T> rule;
  T lr;
  ET_HD void operator()(T* const* a, std::int64_t i) const {
    const T t = a[4][0];
    const T bias1 = T(1) - et::detail::math::pow(rule.beta1, t), bias2 = T(1) - et::detail::math::pow(rule.beta2, t);
    rule.apply(a, i, lr / bias1, et::detail::math::sqrt(bias2));
  }
};

template <class T, class D>
class Adam : public Optimizer<Adam<T, D>, T, D> {
  using Base = Optimizer<Adam<T, D>, T, D>;
  friend Base;

 public:
  using Options = AdamOptions;
  static constexpr bool skips_on_device = false;  // stepped by GradScaler after it reads the flag
  Adam(std::vector<Parameter<T, D>> params, AdamOptions options, bool decoupled = false)
      : Adam(std::vector<ParamGroup<T, D>>{{std::move(params), std::nullopt, std::nullopt}}, options, decoupled) {}
  /// Throws et::Error for a negative lr, eps or weight decay (the options' or a group's) and
  /// for betas outside [0, 1).
  Adam(std::vector<ParamGroup<T, D>> groups, AdamOptions options, bool decoupled = false)
      : Base(flatten(groups)), options_(options), decoupled_(decoupled) {
    const auto [b1, b2] = options.betas;
    if (!(options.lr >= 0) || !(options.eps >= 0) || !(options.weight_decay >= 0) || !(b1 >= 0 && b1 < 1) ||
        !(b2 >= 0 && b2 < 1))
      throw Error("et: Adam needs lr, eps, weight_decay >= 0 and betas in [0, 1)");
    for (std::size_t g = 0; g != groups.size(); ++g) {
      if (!(groups[g].lr.value_or(0) >= 0) || !(groups[g].weight_decay.value_or(0) >= 0))
        throw Error("et: Adam: parameter group " + std::to_string(g) + " needs lr and weight_decay >= 0");
      groups_.push_back({groups[g].lr, groups[g].weight_decay});
      group_of_.insert(group_of_.end(), groups[g].params.size(), g);
    }
    state_.resize(this->params_.size());
    if (options.capturable) counts_ = zeros<T>(D{}, Shape<1>{static_cast<std::int64_t>(this->params_.size())});
  }
  AdamOptions& options() noexcept { return options_; }
  std::size_t groups() const noexcept { return groups_.size(); }
  /// Parameter k's step count (the host's; read from the device when capturable).
  std::int64_t step_count(std::size_t k) const {
    if (!options_.capturable) return state_.at(k).step;
    return static_cast<std::int64_t>(counts_.to_vector().at(k));
  }

 private:
  static std::vector<Parameter<T, D>> flatten(const std::vector<ParamGroup<T, D>>& groups) {
    std::vector<Parameter<T, D>> all;
    for (const auto& g : groups) all.insert(all.end(), g.params.begin(), g.params.end());
    return all;
  }

  /// Updates every parameter k that has a gradient and chosen(k) (optimizer.hpp).
  template <class Chosen>
  void update(const Chosen& chosen) {
#if defined(ET_HAS_CUDA_RUNTIME)
    if (!options_.capturable && et::detail::capture_arena())
      throw Error("et: Adam and AdamW count their steps on the host, so a step captured in a CUDA graph would "
                  "replay the bias correction of the step it was captured at: construct the optimizer with "
                  ".capturable = true, or step it outside the graph");
#endif
    const auto& params = this->params_;
    std::vector<Tensor<T, 1, D>> grads(params.size());
    // One launch per (group, step count); the capturable form's counts are all "on the device".
    std::vector<std::pair<std::size_t, std::int64_t>> launches;
    for (std::size_t k = 0; k != params.size(); ++k) {
      if (!chosen(k)) continue;
      grads[k] = params[k].grad();
      if (!grads[k].defined()) continue;
      State& s = state_[k];
      if (!s.m.defined()) {
        s.m = zeros<T>(D{}, Shape<1>{params[k].numel()});
        s.v = zeros<T>(D{}, Shape<1>{params[k].numel()});
      }
      if (!options_.capturable) ++s.step;
      et::detail::note_stream_uses(params[k].data(), grads[k], s.m, s.v);
      const std::pair<std::size_t, std::int64_t> launch{group_of_[k], s.step};
      if (std::find(launches.begin(), launches.end(), launch) == launches.end()) launches.push_back(launch);
    }
    if (options_.capturable) count_on_device(grads);
    const auto [b1, b2] = options_.betas;
    for (const auto& [group, t] : launches) {
      const double lr = groups_[group].lr.value_or(options_.lr);
      const double wd = groups_[group].weight_decay.value_or(options_.weight_decay);
      const double bias1 = 1 - std::pow(b1, double(t)), bias2 = 1 - std::pow(b2, double(t));
      const AdamUpdate<T> rule{T(b1),  T(b2), T(lr / bias1), T(std::sqrt(bias2)), T(options_.eps),
                               T(decoupled_ ? 0.0 : wd), T(decoupled_ ? 1 - lr * wd : 1.0)};
      auto arrays = [&, group = group, t = t](std::size_t k, auto& a) {
        if (!grads[k].defined() || group_of_[k] != group || state_[k].step != t) return false;
        a[0] = params[k].data().data();
        a[1] = grads[k].data();
        a[2] = state_[k].m.data();
        a[3] = state_[k].v.data();
        if constexpr (std::extent_v<std::remove_reference_t<decltype(a)>> == 5) a[4] = counts_.data() + k;
        return true;
      };
      if (options_.capturable) detail::apply_all<5>(params, arrays, AdamDeviceCountUpdate<T>{rule, T(lr)});
      else detail::apply_all<4>(params, arrays, rule);
    }
  }

  /// Adds one to the device counts of the parameters updated now: one launch per run of
  /// consecutive ones (all of them, usually: one launch).
  void count_on_device(const std::vector<Tensor<T, 1, D>>& grads) {
    for (std::size_t k = 0; k != grads.size();) {
      if (!grads[k].defined()) {
        ++k;
        continue;
      }
      std::size_t end = k;
      while (end != grads.size() && grads[end].defined()) ++end;
      Tensor<T, 1, D> run = counts_.slice(0, static_cast<std::int64_t>(k), static_cast<std::int64_t>(end));
      run += T(1);
      k = end;
    }
  }

  struct State {
    Tensor<T, 1, D> m, v;
    std::int64_t step = 0;  // the host's count (0 throughout when capturable)
  };
  struct GroupOptions {
    std::optional<double> lr, weight_decay;
  };
  AdamOptions options_;
  bool decoupled_;
  std::vector<GroupOptions> groups_;
  std::vector<std::size_t> group_of_;  // parameter k's group
  std::vector<State> state_;
  Tensor<T, 1, D> counts_;  // capturable: parameter k's step count
};

/// AdamW (torch.optim.AdamW): Adam with decoupled weight decay, 0.01 by default.
struct AdamWOptions {
  double lr = 1e-3;
  std::array<double, 2> betas{0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool capturable = false;
};

template <class T, class D>
class AdamW : public Adam<T, D> {
 public:
  using Options = AdamWOptions;
  AdamW(std::vector<Parameter<T, D>> params, AdamWOptions o)
      : Adam<T, D>(std::move(params), AdamOptions{o.lr, o.betas, o.eps, o.weight_decay, o.capturable}, true) {}
  AdamW(std::vector<ParamGroup<T, D>> groups, AdamWOptions o)
      : Adam<T, D>(std::move(groups), AdamOptions{o.lr, o.betas, o.eps, o.weight_decay, o.capturable}, true) {}
};

}  // namespace et::optim
