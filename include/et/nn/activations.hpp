// The modules without parameters, and Sequential:
//
//   et::nn::ReLU  Sigmoid  Tanh  GELU({.approximate = "tanh"})  Dropout(p, seed)  Flatten  MaxPool2d(k, stride)  AvgPool2d(k, stride)
//   et::nn::AdaptiveAvgPool2d({1, 1})   (global average pooling; any output size)
//   et::nn::Sequential seq(et::nn::Linear<float, D>(dev, 64, 32, 1), et::nn::ReLU{}, ...);   seq(x)
//
// Each takes a tensor of any element type and device and returns one tensor (one kernel for
// the elementwise ones). Dropout draws its mask from a counter-based generator (Philox, keyed
// by the seed and the call count, counted by element index), so the CPU and a GPU drop the
// same elements.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "et/nn/layers.hpp"
#include "et/ops/creation.hpp"

namespace et::nn {

#define ET_NN_ELEMENTWISE_MODULE(NAME, FUNCTION)                 \
  struct NAME : Module<NAME> {                                   \
    auto members() { return std::tuple<>{}; }                    \
    template <class T, int R, class D>                           \
    Tensor<T, R, D> forward(const Tensor<T, R, D>& x) {          \
      return Tensor<T, R, D>(FUNCTION(x));                       \
    }                                                            \
  };
/// max(x, 0)
ET_NN_ELEMENTWISE_MODULE(ReLU, relu)
/// 1 / (1 + exp(-x))
ET_NN_ELEMENTWISE_MODULE(Sigmoid, sigmoid)
ET_NN_ELEMENTWISE_MODULE(Tanh, tanh)
#undef ET_NN_ELEMENTWISE_MODULE

struct GeluOptions {
  std::string approximate = "none";  ///< "none": x Phi(x); "tanh": GPT-2's tanh approximation
};

/// GELU as PyTorch's nn.GELU(approximate=...): exact, x Phi(x), by default; with
/// {.approximate = "tanh"}, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
class GELU : public Module<GELU> {
 public:
  GELU() = default;
  explicit GELU(const GeluOptions& options) : tanh_(options.approximate == "tanh") {
    if (options.approximate != "none" && options.approximate != "tanh")
      throw Error("et: GELU: approximate must be \"none\" or \"tanh\", got \"" + options.approximate + "\"");
  }
  auto members() { return et::nn::members("approximate_tanh", tanh_); }
  /// True for the tanh approximation.
  bool approximates() const noexcept { return tanh_; }

  template <class T, int R, class D>
  Tensor<T, R, D> forward(const Tensor<T, R, D>& x) {
    return tanh_ ? Tensor<T, R, D>(gelu_tanh(x)) : Tensor<T, R, D>(gelu(x));
  }

 private:
  bool tanh_ = false;
};

/// In training, zeroes each element with probability p and scales the others by 1/(1 - p);
/// in eval returns its input. Each call draws a new mask.
class Dropout : public Module<Dropout> {
 public:
  Dropout() = default;
  explicit Dropout(double p, std::uint64_t seed = 0) : p_(p), seed_(seed) {
    if (!(p >= 0.0 && p <= 1.0)) throw Error("et: Dropout: p must be in [0, 1], got " + std::to_string(p));
  }
  auto members() { return et::nn::members("p", p_, "seed", seed_, "calls", calls_); }
  double p() const noexcept { return p_; }

  template <class T, int R, class D>
  Tensor<T, R, D> forward(const Tensor<T, R, D>& x) {
    if (!is_training() || p_ == 0.0) return x;
    if (p_ == 1.0) return Tensor<T, R, D>(x * T(0));
    return et::detail::dropout(x, p_, detail::derive_seed(seed_, calls_++));
  }

 private:
  double p_ = 0.5;
  std::uint64_t seed_ = 0;
  std::uint64_t calls_ = 0;
};

/// [N, d1, d2, ...] -> [N, d1 * d2 * ...] (a view when the layout allows, else a copy).
struct Flatten : Module<Flatten> {
  auto members() { return std::tuple<>{}; }
  template <class T, int R, class D>
  Tensor<T, 2, D> forward(const Tensor<T, R, D>& x) {
    static_assert(R >= 1, "et: Flatten takes tensors of rank 1 or more, [N, ...]");
    std::int64_t rest = 1;
    for (int axis = 1; axis < R; ++axis) rest *= x.size(axis);
    return x.reshape(std::array<std::int64_t, 2>{x.size(0), rest});
  }
};

namespace detail {

inline Pool2dOptions pool_options(std::int64_t kernel, std::int64_t stride, std::int64_t padding) {
  return {.kernel = {kernel, kernel}, .stride = {stride, stride}, .padding = {padding, padding}};
}

}  // namespace detail

/// max_pool2d (Max) or avg_pool2d with a square kernel; stride 0 (the default) is the
/// kernel's extent. Spelled MaxPool2d and AvgPool2d.
template <bool Max>
struct Pool2d : Module<Pool2d<Max>> {
  Pool2dOptions options;
  Pool2d() = default;
  explicit Pool2d(std::int64_t kernel, std::int64_t stride = 0, std::int64_t padding = 0)
      : options(detail::pool_options(kernel, stride, padding)) {}
  explicit Pool2d(const Pool2dOptions& options) : options(options) {}
  auto members() { return et::nn::members("options", options); }
  template <class T, class D>
  Tensor<T, 4, D> forward(const Tensor<T, 4, D>& x) {
    if constexpr (Max) return max_pool2d(x, options);
    else return avg_pool2d(x, options);
  }
};
using MaxPool2d = Pool2d<true>;
using AvgPool2d = Pool2d<false>;

namespace detail {
/// The matrix [out, in] that averages PyTorch's adaptive windows along one axis: row i is
/// 1 / (end - start) over columns [start, end), start = floor(i * in / out) and
/// end = ceil((i + 1) * in / out). A generator: made on the device, no copy from the host.
template <class T>
struct AdaptiveWindows {
  using value_type = T;
  std::int64_t in, out;
  ET_HD T operator()(std::int64_t k) const {
    const std::int64_t i = k / in, j = k % in, start = i * in / out, end = ((i + 1) * in + out - 1) / out;
    return j >= start && j < end ? T(1.0 / double(end - start)) : T(0.0);
  }
};
}  // namespace detail

/// PyTorch's AdaptiveAvgPool2d on [N, C, H, W] tensors: output element (i, j) of each plane
/// averages rows [floor(i H / OH), ceil((i + 1) H / OH)) and columns likewise. Where OH
/// divides H and OW divides W (global pooling, {1, 1}, among them) the windows tile the
/// plane: avg_pool2d with kernel and stride {H / OH, W / OW}. Otherwise they differ in size
/// or overlap, and each plane is A_h X A_w^T with the averaging matrices
/// (detail::AdaptiveWindows): two matrix products. Differentiable either way.
struct AdaptiveAvgPool2d : Module<AdaptiveAvgPool2d> {
  std::array<std::int64_t, 2> output_size{1, 1};
  AdaptiveAvgPool2d() = default;
  explicit AdaptiveAvgPool2d(const std::array<std::int64_t, 2>& size) : output_size(size) {
    detail::require_positive("AdaptiveAvgPool2d", "output height", size[0]);
    detail::require_positive("AdaptiveAvgPool2d", "output width", size[1]);
  }
  auto members() { return et::nn::members("output_size", output_size); }  // a setting: to() copies it
  template <class T, class D>
  Tensor<T, 4, D> forward(const Tensor<T, 4, D>& x) {
    static_assert(et::detail::is_floating_v<T>, "et: AdaptiveAvgPool2d takes floating-point tensors");
    const std::int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const auto [oh, ow] = output_size;
    if (h == 0 || w == 0)
      throw ShapeError("et: AdaptiveAvgPool2d: the input " + format_shape(x.shape()) +
                       " has no elements to average in its planes (H and W must be >= 1)");
    if (h % oh == 0 && w % ow == 0) return avg_pool2d(x, Pool2dOptions{.kernel = {h / oh, w / ow}});
    const auto rows = et::detail::generate<T, 2, D>(Shape<2>{oh, h}, detail::AdaptiveWindows<T>{h, oh});
    const auto cols = et::detail::generate<T, 2, D>(Shape<2>{ow, w}, detail::AdaptiveWindows<T>{w, ow});
    // Averages, in the input's precision whatever the math mode (pooling is not a product to
    // round: PyTorch's autocast leaves it in its input's type too).
    const Tensor<T, 2, D> across = matmul(x.reshape(Shape<2>{n * c * h, w}), cols.transpose(0, 1), MathMode::exact);
    const Tensor<T, 3, D> pooled =
        matmul(rows.expand(Shape<3>{n * c, oh, h}), across.reshape(Shape<3>{n * c, h, ow}), MathMode::exact);
    return pooled.reshape(Shape<4>{n, c, oh, ow});
  }
};

/// Modules applied in order: seq(x) = mN(...m2(m1(x))). Its members are named "0", "1", ...
/// (PyTorch's names, so saved weights line up). seq.get<I>() is the I-th module.
template <class... Ms>
class Sequential : public Module<Sequential<Ms...>> {
 public:
  Sequential() = default;
  explicit Sequential(Ms... modules) : layers_(std::move(modules)...) {}

  auto members() {
    return [this]<std::size_t... I>(std::index_sequence<I...>) {
      return std::tuple{Member<Ms>{std::to_string(I), std::get<I>(layers_)}...};
    }(std::index_sequence_for<Ms...>{});
  }
  template <std::size_t I>
  auto& get() {
    return std::get<I>(layers_);
  }
  template <std::size_t I>
  const auto& get() const {
    return std::get<I>(layers_);
  }

  template <class X>
  auto forward(const X& x) {
    return apply<0>(x);
  }

 private:
  template <std::size_t I, class X>
  auto apply(const X& x) {
    if constexpr (I == sizeof...(Ms)) return x;
    else return apply<I + 1>(std::get<I>(layers_)(x));
  }

  std::tuple<Ms...> layers_;
};

template <class... Ms>
Sequential(Ms...) -> Sequential<Ms...>;

}  // namespace et::nn
