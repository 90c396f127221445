// Weight initialization (namespace et::nn::init): PyTorch's torch.nn.init formulas, filled
// in place from a seed, so that a weight gets the same values on every device. Each runs
// under et::NoGradGuard (as torch.nn.init does: filling a parameter is not recorded) and
// returns its tensor; a tensor without elements is left as it is.
//
//   et::nn::init::xavier_uniform_(fc.weight, /*seed=*/3);          // U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
//   et::nn::init::kaiming_normal_(conv.weight, 4);                 // N(0, std^2), std = gain / sqrt(fan_in), gain sqrt(2)
//   et::nn::init::kaiming_normal_(conv.weight, 4, {.mode = et::nn::init::FanMode::fan_out,
//                                                  .nonlinearity = et::nn::init::Nonlinearity::relu});
//
// Fans are PyTorch's: a weight of shape [out, in, k...] has fan_in = in * k..., fan_out =
// out * k... (Conv2d's Layout::nhwc weights, [out, k, k, in], are not in that order: give the
// fans' shape yourself there). Tensors of rank 0 or 1 have no fans: et::ShapeError.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "et/autograd/graph.hpp"
#include "et/ops/random.hpp"
#include "et/tensor.hpp"

namespace et::nn::init {

/// The nonlinearity a weight feeds, for calculate_gain (PyTorch's names).
enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };

/// PyTorch's recommended gain for `nonlinearity`; `param` is leaky_relu's negative slope.
inline double calculate_gain(Nonlinearity nonlinearity, double param = 0.01) {
  switch (nonlinearity) {
    case Nonlinearity::linear:
    case Nonlinearity::conv:
    case Nonlinearity::sigmoid: return 1.0;
    case Nonlinearity::tanh: return 5.0 / 3.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1.0 + param * param));
    case Nonlinearity::selu: return 3.0 / 4.0;
  }
  throw Error("et: calculate_gain: unknown nonlinearity " + std::to_string(static_cast<int>(nonlinearity)));
}

/// Which fan Kaiming's formulas divide by: fan_in keeps the forward pass's variance,
/// fan_out the backward pass's.
enum class FanMode { fan_in, fan_out };

struct KaimingOptions {
  double a = 0;  ///< the negative slope of the leaky_relu that follows (PyTorch's default 0)
  FanMode mode = FanMode::fan_in;
  Nonlinearity nonlinearity = Nonlinearity::leaky_relu;
};

namespace detail {

/// In double: an expanded view's fans (and their sum) may pass int64 while it has elements.
struct Fans {
  double in, out;
};

template <class T, int R, class D>
Fans fans(const char* name, const Tensor<T, R, D>& t) {
  static_assert(et::detail::is_floating_v<T>, "et: nn::init fills floating-point tensors");
  if (!t.defined()) throw Error("et: nn::init::" + std::string(name) + ": the tensor is undefined");
  if constexpr (R < 2) {
    throw ShapeError("et: nn::init::" + std::string(name) +
                     ": fan in and fan out need a tensor of rank 2 or more, got shape " + format_shape(t.shape()));
  } else {
    double receptive = 1;
    for (int axis = 2; axis < R; ++axis) receptive *= double(t.size(axis));
    return {double(t.size(1)) * receptive, double(t.size(0)) * receptive};
  }
}

/// Writes `values` (an expression of t's shape) into t's storage, unrecorded.
template <class T, int R, class D, class E>
void write_unrecorded(const Tensor<T, R, D>& t, const E& values) {
  NoGradGuard no_grad;
  Tensor<T, R, D> out = t;  // the same storage: assigning an expression writes into it
  out = values;
}

/// U(-bound, bound) from `seed` (also the modules' own initialization, nn/layers.hpp).
template <class T, int R, class D>
void fill_uniform(const Tensor<T, R, D>& t, std::uint64_t seed, double bound) {
  using Gen = et::detail::UniformGenerator<T>;
  write_unrecorded(t, (et::detail::GeneratorExpr<Gen, R, D>(Gen{seed}, t.shape()) * T(2) - T(1)) * T(bound));
}

/// N(0, std^2) from `seed`.
template <class T, int R, class D>
void fill_normal(const Tensor<T, R, D>& t, std::uint64_t seed, double std) {
  using Gen = et::detail::NormalGenerator<T>;
  write_unrecorded(t, et::detail::GeneratorExpr<Gen, R, D>(Gen{seed}, t.shape()) * T(std));
}

/// Kaiming's standard deviation; called for tensors with elements only, whose fans are > 0.
inline double kaiming_std(Fans f, const KaimingOptions& options) {
  const double fan = options.mode == FanMode::fan_in ? f.in : f.out;
  return calculate_gain(options.nonlinearity, options.a) / std::sqrt(fan);
}

}  // namespace detail

/// Glorot & Bengio (2010): U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out)).
template <class T, int R, class D>
const Tensor<T, R, D>& xavier_uniform_(const Tensor<T, R, D>& t, std::uint64_t seed, double gain = 1.0) {
  const detail::Fans f = detail::fans("xavier_uniform_", t);
  if (t.numel() > 0) detail::fill_uniform(t, seed, gain * std::sqrt(6.0 / (f.in + f.out)));
  return t;
}

/// Glorot & Bengio (2010): N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
template <class T, int R, class D>
const Tensor<T, R, D>& xavier_normal_(const Tensor<T, R, D>& t, std::uint64_t seed, double gain = 1.0) {
  const detail::Fans f = detail::fans("xavier_normal_", t);
  if (t.numel() > 0) detail::fill_normal(t, seed, gain * std::sqrt(2.0 / (f.in + f.out)));
  return t;
}

/// He et al. (2015): U(-b, b), b = gain * sqrt(3 / fan).
template <class T, int R, class D>
const Tensor<T, R, D>& kaiming_uniform_(const Tensor<T, R, D>& t, std::uint64_t seed, const KaimingOptions& options = {}) {
  const detail::Fans f = detail::fans("kaiming_uniform_", t);
  if (t.numel() > 0) detail::fill_uniform(t, seed, std::sqrt(3.0) * detail::kaiming_std(f, options));
  return t;
}

/// He et al. (2015): N(0, std^2), std = gain / sqrt(fan).
template <class T, int R, class D>
const Tensor<T, R, D>& kaiming_normal_(const Tensor<T, R, D>& t, std::uint64_t seed, const KaimingOptions& options = {}) {
  const detail::Fans f = detail::fans("kaiming_normal_", t);
  if (t.numel() > 0) detail::fill_normal(t, seed, detail::kaiming_std(f, options));
  return t;
}

/// Every element `value` (PyTorch's nn.init.constant_); zeros_ and ones_ are the usual two.
template <class T, int R, class D>
const Tensor<T, R, D>& constant_(const Tensor<T, R, D>& t, double value) {
  if (!t.defined()) throw Error("et: constant_: the tensor is undefined");
  if (t.numel() > 0) detail::write_unrecorded(t, et::detail::ScalarExpr<T>(T(value)));
  return t;
}
template <class T, int R, class D>
const Tensor<T, R, D>& zeros_(const Tensor<T, R, D>& t) {
  return constant_(t, 0.0);
}
template <class T, int R, class D>
const Tensor<T, R, D>& ones_(const Tensor<T, R, D>& t) {
  return constant_(t, 1.0);
}

}  // namespace et::nn::init
