// The modules with parameters: Linear, Conv2d and BatchNorm2d, each a template on its
// element type and device, initialized as PyTorch initializes them (weights and biases
// uniform in +-1/sqrt(fan_in), from a seed: the same values on every device).
//
//   et::nn::Linear<float, et::Cuda<0>> fc(et::cuda<0>, 784, 10, /*seed=*/1);   fc(x)  // x [N, 784] or [B, N, 784]
//   et::nn::Conv2d<float, D> conv(dev, 3, 16, 3, {.padding = {1, 1}}, 2);      conv(x)  // x [N, 3, H, W]
//   et::nn::BatchNorm2d<float, D> bn(dev, 16);                                   bn(x)    // running statistics
//   et::nn::LayerNorm<float, D> ln(dev, 768);                ln(x), ln.forward_add(x, r)  // x [..., 768]
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "et/amp/autocast.hpp"
#include "et/nn/init.hpp"
#include "et/nn/module.hpp"
#include "et/ops/index.hpp"
#include "et/ops/layer_norm.hpp"
#include "et/ops/linalg.hpp"
#include "et/derivatives/nn.hpp"
#include "et/ops/nn.hpp"
#include "et/ops/random.hpp"
#include "et/ops/reduce.hpp"

namespace et::nn {

namespace detail {

/// An independent seed for each use of one user seed.
constexpr std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  return et::detail::splitmix64(seed + 0x9E3779B97F4A7C15ull * stream);
}

/// Uniform in [-bound, bound): one kernel on the device, the same values on every device.
template <class T, int R, class D>
Tensor<T, R, D> uniform_parameter(const Shape<R>& shape, double bound, std::uint64_t seed) {
  auto out = empty<T>(D{}, shape);
  init::detail::fill_uniform(out, seed, bound);
  out.requires_grad_(true);
  return out;
}

/// A parameter of constant value (BatchNorm2d's weight and bias).
template <class T, int R, class D>
Tensor<T, R, D> constant_parameter(D dev, const Shape<R>& shape, T value) {
  auto out = full<T>(dev, shape, value);
  out.requires_grad_(true);
  return out;
}

/// Whether a module of parameters T takes activations TX: its own type, or a 16-bit one
/// when T is float (mixed precision).
template <class T, class TX>
inline constexpr bool takes_activation_v =
    std::is_same_v<TX, T> || (std::is_same_v<T, float> && et::detail::is_16bit_float_v<TX>);

/// A parameter as the activations' type TX: itself, or its cached copy under the guard.
template <class TX, class T, int R, class D>
Tensor<TX, R, D> in_type(const Tensor<T, R, D>& parameter, const char* module) {
  if constexpr (std::is_same_v<TX, T>) return parameter;
  else return amp::low_copy<TX>(parameter, module);
}

/// Whether a module of parameters T given activations TX casts them under a guard: float
/// given float (PyTorch's autocast casts the inputs of linear, conv and LSTM to its type).
template <class T, class TX>
inline constexpr bool autocasts_v = std::is_same_v<T, float> && std::is_same_v<TX, float>;

/// A float module's float activations x under et::amp::Autocast<L> (low, not none): the
/// module's L forward `run` of x cast to L, its result returned as float (the values of the
/// L result, as PyTorch's L result converted): one cast each way around the 16-bit path.
template <int R, class D, class Run>
auto autocast_float(amp::detail::Low low, const Tensor<float, R, D>& x, Run&& run) {
  const auto widen = [](const auto& y) {
    using Y = std::remove_cvref_t<decltype(y)>;
    return Tensor<float, Y::rank, D>(cast<float>(y));
  };
  if (low == amp::detail::Low::bfloat16) return widen(run(Tensor<bfloat16, R, D>(cast<bfloat16>(x))));
  return widen(run(Tensor<half, R, D>(cast<half>(x))));
}

inline double fan_in_bound(std::int64_t fan_in) { return fan_in > 0 ? 1.0 / std::sqrt(double(fan_in)) : 0.0; }

inline void require_positive(const char* module, const char* what, std::int64_t value) {
  if (value <= 0)
    throw ShapeError(std::string("et: ") + module + ": " + what + " must be positive, got " + std::to_string(value));
}

/// The product of a module's positive sizes (`what` names it, "4 * hidden_size"), checked
/// before anything uses it: ShapeError where it passes int64.
inline std::int64_t size_product(const char* module, const char* what, std::initializer_list<std::int64_t> factors) {
  std::int64_t product = 1;
  std::string text;
  bool overflow = false;
  for (const std::int64_t factor : factors) {
    text += (text.empty() ? "" : " * ") + std::to_string(factor);
    overflow = overflow || __builtin_mul_overflow(product, factor, &product);
  }
  if (overflow)
    throw ShapeError(std::string("et: ") + module + ": " + what + " = " + text + " does not fit in 64 bits");
  return product;
}

}  // namespace detail

/// y = x W^T + b: weight [out, in], bias [out] (none with bias = false). Takes [N, in] or
/// [B, N, in] tensors on its device (another device is a compile error); one GEMM.
template <class T, class D>
class Linear : public Module<Linear<T, D>> {
 public:
  Tensor<T, 2, D> weight;
  Tensor<T, 1, D> bias;

  Linear() = default;
  Linear(D, std::int64_t in, std::int64_t out, std::uint64_t seed = 0, bool with_bias = true) {
    detail::require_positive("Linear", "in", in);
    detail::require_positive("Linear", "out", out);
    const double bound = detail::fan_in_bound(in);
    weight = detail::uniform_parameter<T, 2, D>(Shape<2>{out, in}, bound, detail::derive_seed(seed, 0));
    if (with_bias) bias = detail::uniform_parameter<T, 1, D>(Shape<1>{out}, bound, detail::derive_seed(seed, 1));
  }

  auto members() { return et::nn::members("weight", weight, "bias", bias); }

  /// x of T, or of et::bfloat16 / et::half when T is float (mixed precision: under
  /// et::amp::Autocast of x's type, with the weight's cached copy in x's type, amp/autocast.hpp).
  /// The result has x's type. A float x under et::amp::Autocast<L> is cast to L and the
  /// product computed in L, as PyTorch's autocast does; the result is float (its L values).
  template <class TX, int R, class DX>
  Tensor<TX, R, D> forward(const Tensor<TX, R, DX>& x) {
    [[maybe_unused]] et::detail::same_devices<D, DX> check;  // et: operands on ... cannot meet
    static_assert(detail::takes_activation_v<T, TX>,
                  "et: Linear<T, D> takes tensors of its element type T, or et::bfloat16 / et::half ones when T is "
                  "float (mixed precision, et::amp::Autocast)");
    static_assert(R == 2 || R == 3, "et: Linear takes [N, in] or [B, N, in] tensors");
    if constexpr (std::is_same_v<D, DX> && detail::takes_activation_v<T, TX> && (R == 2 || R == 3)) {
      if constexpr (detail::autocasts_v<T, TX>) {
        if (const auto low = amp::detail::state().low; low != amp::detail::Low::none)
          return detail::autocast_float(low, x, [this](const auto& xl) { return forward(xl); });
      }
      if (!weight.defined()) throw Error("et: Linear: called before it was constructed with its sizes");
      if (x.size(R - 1) != weight.size(1))
        throw ShapeError("et: Linear(in=" + std::to_string(weight.size(1)) + ", out=" + std::to_string(weight.size(0)) +
                         "): the input has shape " + format_shape(x.shape()) + "; its last axis must be " +
                         std::to_string(weight.size(1)));
      const auto product = matmul(x, detail::in_type<TX>(weight, "Linear").transpose(0, 1));
      if (bias.defined()) return Tensor<TX, R, D>(product + detail::in_type<TX>(bias, "Linear"));
      return Tensor<TX, R, D>(product);
    } else {
      return {};
    }
  }
};

/// A table of `num_embeddings` vectors of `dim` elements (PyTorch's nn.Embedding): weight
/// [num_embeddings, dim] from N(0, 1), as PyTorch initializes it. Called with int64 indices
/// of any shape S, each in [0, num_embeddings), it returns their rows, shape S + [dim]
/// (et::embedding: an index out of range is an et::Error; the weight's gradient adds up
/// over repeated indices).
template <class T, class D>
class Embedding : public Module<Embedding<T, D>> {
 public:
  Tensor<T, 2, D> weight;

  Embedding() = default;
  Embedding(D dev, std::int64_t num_embeddings, std::int64_t dim, std::uint64_t seed = 0) {
    detail::require_positive("Embedding", "num_embeddings", num_embeddings);
    detail::require_positive("Embedding", "dim", dim);
    weight = empty<T>(dev, Shape<2>{num_embeddings, dim});
    init::detail::fill_normal(weight, detail::derive_seed(seed, 0), 1.0);
    weight.requires_grad_(true);
  }

  auto members() { return et::nn::members("weight", weight); }

  template <int R, class DI>
  Tensor<T, R + 1, D> forward(const Tensor<std::int64_t, R, DI>& indices) {
    if (!weight.defined()) throw Error("et: Embedding: called before it was constructed with its sizes");
    return et::embedding(weight, indices);  // its device check: et: operands on ... cannot meet
  }
};

/// 2-D convolution with PyTorch's Conv2d parameters: weight [out, in/groups, k, k] (with
/// Layout::nhwc [out, k, k, in/groups]), bias [out]; `options` as et::conv2d's.
template <class T, class D>
class Conv2d : public Module<Conv2d<T, D>> {
 public:
  Tensor<T, 4, D> weight;
  Tensor<T, 1, D> bias;
  Conv2dOptions options;

  Conv2d() = default;
  Conv2d(D dev, std::int64_t in, std::int64_t out, std::int64_t kernel, const Conv2dOptions& options = {},
         std::uint64_t seed = 0, bool with_bias = true)
      : Conv2d(dev, in, out, std::array<std::int64_t, 2>{kernel, kernel}, options, seed, with_bias) {}
  Conv2d(D, std::int64_t in, std::int64_t out, std::array<std::int64_t, 2> kernel, const Conv2dOptions& options = {},
         std::uint64_t seed = 0, bool with_bias = true)
      : options(options) {
    detail::require_positive("Conv2d", "in_channels", in);
    detail::require_positive("Conv2d", "out_channels", out);
    detail::require_positive("Conv2d", "the kernel's height", kernel[0]);
    detail::require_positive("Conv2d", "the kernel's width", kernel[1]);
    detail::require_positive("Conv2d", "groups", options.groups);
    if (in % options.groups != 0 || out % options.groups != 0)
      throw ShapeError("et: Conv2d: " + std::to_string(options.groups) + " groups must divide in_channels (" +
                       std::to_string(in) + ") and out_channels (" + std::to_string(out) + ")");
    const std::int64_t per_group = in / options.groups;
    const Shape<4> shape = options.layout == Layout::nhwc ? Shape<4>{out, kernel[0], kernel[1], per_group}
                                                           : Shape<4>{out, per_group, kernel[0], kernel[1]};
    const double bound = detail::fan_in_bound(
        detail::size_product("Conv2d", "in_channels / groups * kernel height * kernel width", {per_group, kernel[0], kernel[1]}));
    weight = detail::uniform_parameter<T, 4, D>(shape, bound, detail::derive_seed(seed, 0));
    if (with_bias) bias = detail::uniform_parameter<T, 1, D>(Shape<1>{out}, bound, detail::derive_seed(seed, 1));
  }

  auto members() { return et::nn::members("weight", weight, "bias", bias, "options", options); }

  /// x of T, or of et::bfloat16 / et::half when T is float (as Linear's); the result has x's type.
  template <class TX, class DX>
  Tensor<TX, 4, D> forward(const Tensor<TX, 4, DX>& x) {
    [[maybe_unused]] et::detail::same_devices<D, DX> check;
    static_assert(detail::takes_activation_v<T, TX>,
                  "et: Conv2d<T, D> takes tensors of its element type T, or et::bfloat16 / et::half ones when T is "
                  "float (mixed precision, et::amp::Autocast)");
    if constexpr (std::is_same_v<D, DX> && detail::takes_activation_v<T, TX>) {
      if constexpr (detail::autocasts_v<T, TX>) {
        if (const auto low = amp::detail::state().low; low != amp::detail::Low::none)
          return detail::autocast_float(low, x, [this](const auto& xl) { return forward(xl); });
      }
      if (!weight.defined()) throw Error("et: Conv2d: called before it was constructed with its sizes");
      const Tensor<TX, 4, D> w = detail::in_type<TX>(weight, "Conv2d");
      if (bias.defined()) return conv2d(x, w, detail::in_type<TX>(bias, "Conv2d"), options);
      return conv2d(x, w, options);
    } else {
      return {};
    }
  }
};

struct BatchNorm2dOptions {
  double eps = 1e-5;
  double momentum = 0.1;  ///< running = (1 - momentum) running + momentum * batch statistic
};

/// Batch normalization over [N, C, H, W] per channel (PyTorch's BatchNorm2d): in training
/// the batch's mean and biased variance normalize, and the running statistics move toward
/// the batch's (unbiased variance); in eval the running statistics normalize. weight (1)
/// and bias (0) are parameters; running_mean, running_var and num_batches_tracked buffers.
/// Besides bn(x), what follows a batch norm in a residual network, in the same pass:
///
///   bn.forward_relu(x)                            relu(bn(x))
///   bn.forward_add_relu(x, shortcut)              relu(bn(x) + shortcut)
///   bn.forward_add_relu(x, shortcut, offset)      shortcut [N, C', H, W] added to channels
///                                                 [offset, offset + C') only (option A)
///
/// x (and the shortcut) are of T, or, when T is float, of half or bfloat16 (mixed
/// precision, as autocast): the result has x's type, the statistics stay float.
template <class T, class D>
class BatchNorm2d : public Module<BatchNorm2d<T, D>> {
 public:
  Tensor<T, 1, D> weight, bias, running_mean, running_var;
  Tensor<std::int64_t, 0, D> num_batches_tracked;
  BatchNorm2dOptions options;

  BatchNorm2d() = default;
  BatchNorm2d(D dev, std::int64_t channels, const BatchNorm2dOptions& options = {}) : options(options) {
    detail::require_positive("BatchNorm2d", "channels", channels);
    weight = detail::constant_parameter<T, 1>(dev, Shape<1>{channels}, T(1));
    bias = detail::constant_parameter<T, 1>(dev, Shape<1>{channels}, T(0));
    running_mean = zeros<T>(dev, Shape<1>{channels});
    running_var = full<T>(dev, Shape<1>{channels}, T(1));
    num_batches_tracked = zeros<std::int64_t>(dev, Shape<0>{});
  }

  auto members() {
    return et::nn::members("weight", weight, "bias", bias, "running_mean", running_mean, "running_var", running_var,
                           "num_batches_tracked", num_batches_tracked, "options", options);
  }

  template <class TX, class DX>
  Tensor<TX, 4, D> forward(const Tensor<TX, 4, DX>& x) {
    return run(x, static_cast<const Tensor<TX, 4, DX>*>(nullptr), 0, false);
  }
  template <class TX, class DX>
  Tensor<TX, 4, D> forward_relu(const Tensor<TX, 4, DX>& x) {
    return run(x, static_cast<const Tensor<TX, 4, DX>*>(nullptr), 0, true);
  }
  template <class TX, class DX, class TR, class DR>
  Tensor<TX, 4, D> forward_add_relu(const Tensor<TX, 4, DX>& x, const Tensor<TR, 4, DR>& shortcut,
                                    std::int64_t channel_offset = 0) {
    return run(x, &shortcut, channel_offset, true);
  }

 private:
  /// x's type: T, or a 16-bit type when T is float (mixed precision).
  template <class TX>
  static constexpr bool takes_v =
      std::is_same_v<TX, T> || (std::is_same_v<T, float> && et::detail::is_16bit_float_v<TX>);

  template <class TX, class DX, class TR, class DR>
  Tensor<TX, 4, D> run(const Tensor<TX, 4, DX>& x, const Tensor<TR, 4, DR>* shortcut, std::int64_t channel_offset,
                       bool relu) {
    [[maybe_unused]] et::detail::same_devices<D, DX, DR> check;
    static_assert(takes_v<TX> && std::is_same_v<TR, TX>,
                  "et: BatchNorm2d<T, D> takes tensors of its element type T, or half/bfloat16 ones when T is float "
                  "(mixed precision)");
    if constexpr (std::is_same_v<D, DX> && std::is_same_v<D, DR> && takes_v<TX> && std::is_same_v<TR, TX>) {
      const std::int64_t c = weight.defined() ? weight.size(0) : 0;
      if (x.size(1) != c)
        throw ShapeError("et: BatchNorm2d(" + std::to_string(c) + "): the input has shape " + format_shape(x.shape()) +
                         "; [N, C, H, W] with C = " + std::to_string(c));
      const BatchNormOptions o{
          .training = this->is_training(), .momentum = options.momentum, .eps = options.eps, .relu = relu};
      // In training the count moves in the statistics' own pass.
      return et::detail::batch_norm_impl(x, shortcut, channel_offset, running_mean, running_var, weight, bias, o,
                                         &num_batches_tracked);
    } else {
      return {};
    }
  }
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  ///< false: no weight and no bias
  bool bias = true;                ///< false: a weight alone (PyTorch's bias=False)
};

/// Layer normalization over the last axis (PyTorch's LayerNorm(features)): weight (1) and
/// bias (0) are parameters of T, undefined where the options leave them out. A float
/// LayerNorm also takes half and bfloat16 inputs (its parameters stay float, as under
/// PyTorch's autocast). forward_add(x, r) is et::add_layer_norm: {h = x + r, layer_norm(h)}.
template <class T, Device D>
class LayerNorm : public Module<LayerNorm<T, D>> {
 public:
  Tensor<T, 1, D> weight, bias;
  LayerNormOptions options;
  std::int64_t features = 0;

  LayerNorm() = default;
  LayerNorm(D dev, std::int64_t features, const LayerNormOptions& options = {})
      : options(options), features(features) {
    detail::require_positive("LayerNorm", "features", features);
    if (options.elementwise_affine) {
      weight = detail::constant_parameter<T, 1>(dev, Shape<1>{features}, T(1));
      if (options.bias) bias = detail::constant_parameter<T, 1>(dev, Shape<1>{features}, T(0));
    }
  }

  auto members() { return et::nn::members("weight", weight, "bias", bias, "options", options, "features", features); }

  template <class TX, int R, class DX>
  Tensor<TX, R, D> forward(const Tensor<TX, R, DX>& x) {
    check<TX, DX>(x.defined() ? x.size(R - 1) : features, x.defined() ? format_shape(x.shape()) : "undefined");
    return et::layer_norm(x, weight, bias, options.eps);
  }
  template <class TX, int R, class DX>
  LayerNormResidual<TX, R, D> forward_add(const Tensor<TX, R, DX>& x, const Tensor<TX, R, DX>& r) {
    check<TX, DX>(x.defined() ? x.size(R - 1) : features, x.defined() ? format_shape(x.shape()) : "undefined");
    return et::add_layer_norm(x, r, weight, bias, options.eps);
  }

 private:
  template <class TX, class DX>
  void check(std::int64_t last, const std::string& shape) const {
    [[maybe_unused]] et::detail::same_devices<D, DX> devices;
    static_assert(std::is_same_v<TX, T> || (std::is_same_v<T, float> && et::detail::is_16bit_float_v<TX>),
                  "et: LayerNorm<T, D> takes tensors of its element type T, or half/bfloat16 ones when T is float "
                  "(mixed precision)");
    if (last != features)
      throw ShapeError("et: LayerNorm(" + std::to_string(features) + "): the input has shape " + shape +
                       "; its last axis must be " + std::to_string(features));
  }
};

}  // namespace et::nn
