// Convolution and pooling: et::conv2d (optionally with a bias), et::max_pool2d and
// et::avg_pool2d, and their gradients, which the autograd calls:
//
//   y  = et::conv2d(x, w, {.stride = {1, 1}, .padding = {1, 1}});     // nchw
//   y  = et::conv2d(x, w, b, {.padding = {1, 1}, .layout = et::Layout::nhwc});
//   dx = et::conv2d_backward_data(dy, w, x.shape(), options);
//   dw = et::conv2d_backward_filter(x, dy, w.shape(), options);
//   p  = et::max_pool2d(x, {.kernel = {2, 2}});                        // stride = kernel
//   dx = et::max_pool2d_backward(dp, x, p, {.kernel = {2, 2}});
//   a  = et::avg_pool2d(x, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}});
//   dx = et::avg_pool2d_backward(da, x.shape(), options);
//
// Shapes and options: backend/nn_shapes.hpp (et::Layout, et::Conv2dOptions, et::Pool2dOptions).
// Element types: float, double, et::half, et::bfloat16; half and bfloat16 compute in float,
// double in double. Operands of one call share their element type and device (checked at
// compile time, like expressions); any strides are accepted (non-contiguous operands are
// packed first); results are new contiguous tensors in the options' layout.
//
// This file checks and shapes; the device's backend computes (backend/backend.hpp). CPU:
// backend/cpu/nn.hpp and conv.hpp (im2col + Eigen GEMM, OpenMP). CUDA: backend/cuda/nn.hpp
// and cudnn.hpp (cuDNN 9, with a timed algorithm search per new configuration); it needs
// nvcc (packing and the bias run etensor kernels) and cuDNN found at configure time
// (ET_WITH_CUDNN).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "et/backend/cpu/nn.hpp"
#include "et/backend/cuda/nn.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/exec/assign.hpp"
#include "et/tensor.hpp"

namespace et {
namespace detail {

template <class T>
inline constexpr bool is_nn_element_v = std::is_same_v<T, float> || std::is_same_v<T, double> || is_16bit_float_v<T>;

/// Static checks of an operation's tensors: element types (one of the four, all alike).
/// True when they hold; the caller compiles its body only then, so a failed check is the
/// one error the user reads.
template <class T, class... Others>
constexpr bool check_nn_elements() {
  constexpr bool supported = is_nn_element_v<T>;
  constexpr bool alike = (std::is_same_v<T, Others> && ...);
  static_assert(supported, "et: conv2d and pooling support float, double, et::half and et::bfloat16 tensors");
  static_assert(alike, "et: conv2d and pooling need all their tensors of one element type; convert with et::cast<T>(...)");
  return supported && alike;
}

/// Throws ShapeError unless a gradient (or saved output) has the shape the forward
/// operation gives.
inline void check_shape(const char* operation, const char* name, const Shape<4>& got, const Shape<4>& expected,
                        const std::string& forward) {
  if (got != expected)
    throw ShapeError(std::string("et: ") + operation + ": " + name + " has shape " + format_shape(got) + ", but " +
                     forward + " gives " + format_shape(expected));
}

inline std::string describe_convolution(const ConvGeometry& g) {
  return "the convolution of input " + format_shape(g.input_shape()) + " with weight " + format_shape(g.weight_shape()) +
         " (" + layout_name(g.layout) + ")";
}

inline std::string describe_pooling(const PoolGeometry& g) {
  return "pooling input " + format_shape(g.input_shape()) + " (" + layout_name(g.layout) + ")";
}

template <class TX, int RX, class DX, class TW, int RW, class DW, class TB, int RB, class DB>
Tensor<TX, 4, DX> conv2d_impl(const Tensor<TX, RX, DX>& x, const Tensor<TW, RW, DW>& w, const Tensor<TB, RB, DB>* bias,
                              const Conv2dOptions& options) {
  static_assert(RX == 4 && RW == 4,
                "et: conv2d needs a rank-4 input and weight: [N, C, H, W] and [K, C/groups, R, S], or with Layout::nhwc [N, H, W, C] and [K, R, S, C/groups]");
  static_assert(RB == 1, "et: conv2d's bias is a rank-1 tensor of the output channels, [K]");
  constexpr bool no_pinned = !std::is_same_v<DX, Pinned> && !std::is_same_v<DW, Pinned> && !std::is_same_v<DB, Pinned>;
  static_assert(no_pinned, "et: conv2d takes Cpu or CUDA tensors; a Pinned tensor is a staging buffer: use p.to(et::cpu) or copy it to the GPU");
  using D = common_device_t<DX, DW, DB>;
  constexpr bool one_device = std::is_same_v<DX, DW> && std::is_same_v<DX, DB>;
  if constexpr (RX == 4 && RW == 4 && RB == 1 && one_device && no_pinned && check_nn_elements<TX, TW, TB>()) {
    const ConvGeometry g = conv_geometry("conv2d", x.shape(), w.shape(), options);
    if (bias != nullptr && bias->shape() != Shape<1>{g.k})
      throw ShapeError("et: conv2d: bias must have shape [" + std::to_string(g.k) + "] (one value per output channel), got " +
                       format_shape(bias->shape()) + "; input " + format_shape(x.shape()) + ", weight " +
                       format_shape(w.shape()) + " (" + layout_name(g.layout) + ")");
    auto y = Tensor<TX, 4, D>::allocate(g.output_shape());
    // An empty batch computes nothing but still records: its weight and bias get zero
    // gradients, as PyTorch gives them.
    if (y.numel() != 0) conv_forward(backend<D>, g, options.allow_tf32, x, w, bias, y);
    record_conv(y, x, w, bias, options);
    return y;
  } else {
    return {};
  }
}

template <class T, int R, class D>
Tensor<T, 4, D> pool2d_impl(const char* operation, const Tensor<T, R, D>& x, const Pool2dOptions& options, bool max) {
  static_assert(R == 4, "et: pooling needs a rank-4 input: [N, C, H, W], or with Layout::nhwc [N, H, W, C]");
  static_assert(!std::is_same_v<D, Pinned>,
                "et: pooling takes Cpu or CUDA tensors; a Pinned tensor is a staging buffer: use p.to(et::cpu) or copy it to the GPU");
  if constexpr (R == 4 && !std::is_same_v<D, Pinned> && check_nn_elements<T>()) {
    const PoolGeometry g = pool_geometry(operation, x.shape(), options);
    auto y = Tensor<T, 4, D>::allocate(g.output_shape());
    if (y.numel() != 0) pool_forward(backend<D>, g, max, x, y);
    record_pool(y, x, options, max);  // empty too: its input's gradient is then empty, as it is

    return y;
  } else {
    return {};
  }
}

}  // namespace detail

/// 2-D convolution (cross-correlation, as PyTorch's conv2d): y[n, k, p, q] =
/// sum over c in k's group, r, s of x[n, c, p*stride + r*dilation - padding, ...] * w[k, c, r, s].
/// x: [N, C, H, W], w: [K, C/groups, R, S] -> [N, K, P, Q] with P = (H + 2*padding -
/// dilation*(R-1) - 1) / stride + 1 (likewise Q); with options.layout = Layout::nhwc, x:
/// [N, H, W, C], w: [K, R, S, C/groups] -> [N, P, Q, K]. Throws ShapeError (naming both
/// shapes) for a non-positive stride, dilation or group count, negative padding, channels
/// that do not fit the groups, or a kernel larger than the padded input.
template <class TX, int RX, class DX, class TW, int RW, class DW>
Tensor<TX, 4, DX> conv2d(const Tensor<TX, RX, DX>& x, const Tensor<TW, RW, DW>& w, const Conv2dOptions& options = {}) {
  [[maybe_unused]] detail::same_devices<DX, DW> check;  // here, not in conv2d_impl: the shortest report
  return detail::conv2d_impl(x, w, static_cast<const Tensor<TX, 1, DX>*>(nullptr), options);
}

/// conv2d(x, w, options) plus bias[k] on output channel k; bias: [K].
template <class TX, int RX, class DX, class TW, int RW, class DW, class TB, int RB, class DB>
Tensor<TX, 4, DX> conv2d(const Tensor<TX, RX, DX>& x, const Tensor<TW, RW, DW>& w, const Tensor<TB, RB, DB>& bias,
                         const Conv2dOptions& options = {}) {
  [[maybe_unused]] detail::same_devices<DX, DW, DB> check;
  return detail::conv2d_impl(x, w, &bias, options);
}

/// The gradient of conv2d with respect to its input: dx of shape `input_shape`, from
/// grad_output (dy, the shape conv2d gives) and the weight. Same options as the forward
/// call; throws ShapeError as conv2d does, and when grad_output has another shape.
template <class TY, int RY, class DY, class TW, int RW, class DW>
Tensor<TY, 4, DY> conv2d_backward_data(const Tensor<TY, RY, DY>& grad_output, const Tensor<TW, RW, DW>& w,
                                       const Shape<4>& input_shape, const Conv2dOptions& options = {}) {
  static_assert(RY == 4 && RW == 4, "et: conv2d_backward_data needs a rank-4 grad_output and weight");
  [[maybe_unused]] detail::same_devices<DY, DW> check;
  using D = detail::common_device_t<DY, DW>;
  if constexpr (RY == 4 && RW == 4 && std::is_same_v<DY, DW> && detail::check_nn_elements<TY, TW>()) {
    const auto g = detail::conv_geometry("conv2d_backward_data", input_shape, w.shape(), options);
    detail::check_shape("conv2d_backward_data", "grad_output", grad_output.shape(), g.output_shape(),
                        detail::describe_convolution(g));
    auto dx = Tensor<TY, 4, D>::allocate(input_shape);
    if (dx.numel() == 0) return dx;
    conv_backward_data(detail::backend<D>, g, options.allow_tf32, grad_output, w, dx);
    return dx;
  } else {
    return {};
  }
}

/// The gradient of conv2d with respect to its weight: dw of shape `weight_shape`, from the
/// forward input x and grad_output (dy). Same options as the forward call; throws
/// ShapeError as conv2d does, and when grad_output has another shape. An empty batch
/// gives zeros.
template <class TX, int RX, class DX, class TY, int RY, class DY>
Tensor<TX, 4, DX> conv2d_backward_filter(const Tensor<TX, RX, DX>& x, const Tensor<TY, RY, DY>& grad_output,
                                         const Shape<4>& weight_shape, const Conv2dOptions& options = {}) {
  static_assert(RX == 4 && RY == 4, "et: conv2d_backward_filter needs a rank-4 input and grad_output");
  [[maybe_unused]] detail::same_devices<DX, DY> check;
  using D = detail::common_device_t<DX, DY>;
  if constexpr (RX == 4 && RY == 4 && std::is_same_v<DX, DY> && detail::check_nn_elements<TX, TY>()) {
    const auto g = detail::conv_geometry("conv2d_backward_filter", x.shape(), weight_shape, options);
    detail::check_shape("conv2d_backward_filter", "grad_output", grad_output.shape(), g.output_shape(),
                        detail::describe_convolution(g));
    auto dw = Tensor<TX, 4, D>::allocate(weight_shape);
    conv_backward_filter(detail::backend<D>, g, options.allow_tf32, x, grad_output, dw);
    return dw;
  } else {
    return {};
  }
}

/// 2-D max pooling: each output is the maximum of its kernel window (padding never wins;
/// NaN propagates). x: [N, C, H, W] (or [N, H, W, C] with Layout::nhwc) -> [N, C, P, Q]
/// with P = (H + 2*padding - kernel) / stride + 1 (rounded down). options.kernel must be
/// set; stride 0 means the kernel's extent. Throws ShapeError for a bad kernel, stride or
/// padding (at most half the kernel) and for a kernel larger than the padded input.
template <class T, int R, class D>
Tensor<T, 4, D> max_pool2d(const Tensor<T, R, D>& x, const Pool2dOptions& options) {
  return detail::pool2d_impl("max_pool2d", x, options, true);
}

/// 2-D average pooling; as max_pool2d, with options.count_include_pad choosing the divisor
/// (true, PyTorch's default: the whole kernel area; false: the input elements in the window).
template <class T, int R, class D>
Tensor<T, 4, D> avg_pool2d(const Tensor<T, R, D>& x, const Pool2dOptions& options) {
  return detail::pool2d_impl("avg_pool2d", x, options, false);
}

/// The gradient of max_pool2d with respect to its input: each output's gradient goes to
/// the input element that was its window's maximum (the first maximum in row-major window
/// order on the CPU; on CUDA, cuDNN's choice among exact ties). x is the forward input,
/// y = max_pool2d(x, options) its output, grad_output (dy) the gradient of y.
template <class TG, int RG, class DG, class TX, int RX, class DX, class TO, int RO, class DO>
Tensor<TX, 4, DX> max_pool2d_backward(const Tensor<TG, RG, DG>& grad_output, const Tensor<TX, RX, DX>& x,
                                      const Tensor<TO, RO, DO>& y, const Pool2dOptions& options) {
  static_assert(RG == 4 && RX == 4 && RO == 4, "et: max_pool2d_backward needs rank-4 grad_output, x and y");
  [[maybe_unused]] detail::same_devices<DG, DX, DO> check;
  using D = detail::common_device_t<DG, DX, DO>;
  constexpr bool one_device = std::is_same_v<DG, DX> && std::is_same_v<DX, DO>;
  if constexpr (RG == 4 && RX == 4 && RO == 4 && one_device && detail::check_nn_elements<TX, TG, TO>()) {
    const auto g = detail::pool_geometry("max_pool2d_backward", x.shape(), options);
    detail::check_shape("max_pool2d_backward", "grad_output", grad_output.shape(), g.output_shape(),
                        detail::describe_pooling(g));
    detail::check_shape("max_pool2d_backward", "y", y.shape(), g.output_shape(), detail::describe_pooling(g));
    auto dx = Tensor<TX, 4, D>::allocate(x.shape());
    if (dx.numel() == 0) return dx;
    max_pool_backward(detail::backend<D>, g, grad_output, x, y, dx);
    return dx;
  } else {
    return {};
  }
}

/// The gradient of avg_pool2d with respect to its input, of shape `input_shape`: each
/// output's gradient is shared equally by its window's input elements (divided by the
/// same divisor as the forward pass).
template <class T, int R, class D>
Tensor<T, 4, D> avg_pool2d_backward(const Tensor<T, R, D>& grad_output, const Shape<4>& input_shape,
                                    const Pool2dOptions& options) {
  static_assert(R == 4, "et: avg_pool2d_backward needs a rank-4 grad_output");
  if constexpr (R == 4 && detail::check_nn_elements<T>()) {
    const auto g = detail::pool_geometry("avg_pool2d_backward", input_shape, options);
    detail::check_shape("avg_pool2d_backward", "grad_output", grad_output.shape(), g.output_shape(),
                        detail::describe_pooling(g));
    auto dx = Tensor<T, 4, D>::allocate(input_shape);
    if (dx.numel() == 0) return dx;
    avg_pool_backward(detail::backend<D>, g, grad_output, dx);
    return dx;
  } else {
    return {};
  }
}

}  // namespace et

