// Options and shape arithmetic of convolution and pooling: the layouts, the output
// extents, and the checks (with their messages) of bad input; the geometries of batch
// normalization and the LSTM. Host code, but for ResidualPlanes, which the batch-norm
// kernels read too; ops/nn.hpp is the public entry, and both backends read the geometry
// worked out here.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "et/config.hpp"
#include "et/layout.hpp"
#include "et/runtime/error.hpp"

namespace et {

/// Where the channels are. nchw: input [N, C, H, W], weight [K, C/groups, R, S], output
/// [N, K, P, Q] (PyTorch's default). nhwc: input [N, H, W, C], weight [K, R, S, C/groups],
/// output [N, P, Q, K] (PyTorch's channels_last, TensorFlow's default), the layout whose
/// convolutions run fastest on tensor cores.
enum class Layout { nchw, nhwc };

/// conv2d's options, in PyTorch's terms (two values: height, then width).
struct Conv2dOptions {
  std::array<std::int64_t, 2> stride{1, 1};    ///< >= 1
  std::array<std::int64_t, 2> padding{0, 0};   ///< zeros on each side, >= 0
  std::array<std::int64_t, 2> dilation{1, 1};  ///< >= 1
  std::int64_t groups = 1;                     ///< divides C and K; groups == C is depthwise
  Layout layout = Layout::nchw;
  /// float tensors on CUDA may use TF32 tensor cores (10-bit mantissa products, float
  /// accumulation), as PyTorch's default torch.backends.cudnn.allow_tf32 = True. False
  /// keeps full float precision. Other element types and the CPU ignore it.
  bool allow_tf32 = true;
};

/// max_pool2d's and avg_pool2d's options (two values: height, then width). Output
/// extents round down (PyTorch's ceil_mode=False); there is no dilation.
struct Pool2dOptions {
  std::array<std::int64_t, 2> kernel{0, 0};   ///< >= 1; must be set
  std::array<std::int64_t, 2> stride{0, 0};   ///< >= 1, or 0 for the kernel's extent (PyTorch's default)
  std::array<std::int64_t, 2> padding{0, 0};  ///< >= 0 and at most half the kernel, as in PyTorch
  /// avg_pool2d only: divide by the whole window, padding included (PyTorch's default),
  /// or only by the input elements inside it. Max pooling never picks padding.
  bool count_include_pad = true;
  Layout layout = Layout::nchw;
};

namespace detail {

/// extent + 2 * padding, false when it does not fit in 64 bits.
inline bool padded_extent(std::int64_t extent, std::int64_t padding, std::int64_t& out) {
  return !__builtin_mul_overflow(padding, 2, &out) && !__builtin_add_overflow(out, extent, &out);
}
/// dilation * (kernel - 1) + 1, the input extent a kernel covers; false past 64 bits.
inline bool span_of(std::int64_t kernel, std::int64_t dilation, std::int64_t& out) {
  return !__builtin_mul_overflow(dilation, kernel - 1, &out) && !__builtin_add_overflow(out, 1, &out);
}


inline const char* layout_name(Layout layout) { return layout == Layout::nhwc ? "nhwc" : "nchw"; }

/// A convolution's extents in the usual letters, whatever the layout: input [N, C, H, W],
/// weight [K, C/groups, R, S], output [N, K, P, Q]; stride, padding and dilation resolved.
struct ConvGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t k = 0, r = 0, s = 0;
  std::int64_t p = 0, q = 0;
  std::int64_t groups = 1;
  std::array<std::int64_t, 2> stride{1, 1}, padding{0, 0}, dilation{1, 1};
  Layout layout = Layout::nchw;

  std::int64_t c_per_group() const { return c / groups; }
  std::int64_t k_per_group() const { return k / groups; }
  bool nhwc() const { return layout == Layout::nhwc; }
  /// Extents in the layout's axis order.
  Shape<4> input_shape() const { return nhwc() ? Shape<4>{n, h, w, c} : Shape<4>{n, c, h, w}; }
  Shape<4> weight_shape() const {
    return nhwc() ? Shape<4>{k, r, s, c_per_group()} : Shape<4>{k, c_per_group(), r, s};
  }
  Shape<4> output_shape() const { return nhwc() ? Shape<4>{n, p, q, k} : Shape<4>{n, k, p, q}; }
};

/// Checks a convolution of an input of shape `input` with a weight of shape `weight`
/// (both in options.layout's axis order) and works out its geometry. Throws ShapeError,
/// naming `operation` and both shapes, for a non-positive stride, dilation or group count,
/// negative padding, an empty channel or spatial extent, channels that do not fit the
/// groups, and a kernel larger than the padded input.
inline ConvGeometry conv_geometry(const char* operation, const Shape<4>& input, const Shape<4>& weight,
                                  const Conv2dOptions& options) {
  const std::string shapes = "; input " + format_shape(input) + ", weight " + format_shape(weight) + " (" +
                             layout_name(options.layout) + ")";
  const auto fail = [&](const std::string& what) {
    return ShapeError(std::string("et: ") + operation + ": " + what + shapes);
  };
  for (int d = 0; d < 2; ++d) {
    if (options.stride[d] < 1) throw fail("stride must be positive, got " + format_shape(options.stride));
    if (options.dilation[d] < 1) throw fail("dilation must be positive, got " + format_shape(options.dilation));
    if (options.padding[d] < 0) throw fail("padding must be non-negative, got " + format_shape(options.padding));
  }
  if (options.groups < 1) throw fail("groups must be positive, got " + std::to_string(options.groups));
  bool positive = input[0] >= 0;
  for (int d = 1; d < 4; ++d) positive = positive && input[d] > 0;
  for (int d = 0; d < 4; ++d) positive = positive && weight[d] > 0;
  if (!positive) throw fail("input and weight extents must be positive (the batch may be 0)");

  ConvGeometry g;
  g.layout = options.layout;
  g.groups = options.groups;
  g.stride = options.stride;
  g.padding = options.padding;
  g.dilation = options.dilation;
  const bool nhwc = options.layout == Layout::nhwc;
  g.n = input[0];
  g.c = nhwc ? input[3] : input[1];
  g.h = nhwc ? input[1] : input[2];
  g.w = nhwc ? input[2] : input[3];
  g.k = weight[0];
  const std::int64_t weight_channels = nhwc ? weight[3] : weight[1];
  g.r = nhwc ? weight[1] : weight[2];
  g.s = nhwc ? weight[2] : weight[3];
  if (g.c % g.groups != 0)
    throw fail("input channels (" + std::to_string(g.c) + ") are not divisible by groups (" +
               std::to_string(g.groups) + ")");
  if (g.k % g.groups != 0)
    throw fail("output channels (" + std::to_string(g.k) + ") are not divisible by groups (" +
               std::to_string(g.groups) + ")");
  if (weight_channels != g.c / g.groups)
    throw fail("the weight has " + std::to_string(weight_channels) + " input channel(s) per group, but " +
               std::to_string(g.c) + " input channels in " + std::to_string(g.groups) + " group(s) need " +
               std::to_string(g.c / g.groups));
  std::int64_t span_h = 0, span_w = 0, padded_h = 0, padded_w = 0;
  if (!span_of(g.r, g.dilation[0], span_h) || !span_of(g.s, g.dilation[1], span_w) ||
      !padded_extent(g.h, g.padding[0], padded_h) || !padded_extent(g.w, g.padding[1], padded_w))
    throw fail("padding " + format_shape(g.padding) + " and dilation " + format_shape(g.dilation) +
               " make extents past 64 bits");
  if (span_h > padded_h || span_w > padded_w)
    throw fail("the kernel spans " + std::to_string(span_h) + " x " + std::to_string(span_w) + " (dilation " +
               format_shape(g.dilation) + ") but the padded input is only " + std::to_string(padded_h) + " x " +
               std::to_string(padded_w) + " (padding " + format_shape(g.padding) + ")");
  g.p = (padded_h - span_h) / g.stride[0] + 1;
  g.q = (padded_w - span_w) / g.stride[1] + 1;
  return g;
}

/// A pooling's extents: input [N, C, H, W], output [N, C, P, Q], window R x S, whatever
/// the layout; the stride resolved (0 -> the kernel's extent).
struct PoolGeometry {
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t p = 0, q = 0;
  std::array<std::int64_t, 2> kernel{1, 1}, stride{1, 1}, padding{0, 0};
  bool count_include_pad = true;
  Layout layout = Layout::nchw;

  bool nhwc() const { return layout == Layout::nhwc; }
  Shape<4> input_shape() const { return nhwc() ? Shape<4>{n, h, w, c} : Shape<4>{n, c, h, w}; }
  Shape<4> output_shape() const { return nhwc() ? Shape<4>{n, p, q, c} : Shape<4>{n, c, p, q}; }
};

/// Batch normalization over [N, C, H, W] (nchw, packed) per channel, and what it adds
/// after normalizing (its fused epilogue):
///
///   y = relu?((x - mean) * invstd * weight + bias + residual)
///
/// In training the batch's statistics normalize (`count` = N * H * W values a channel) and
/// the running ones move by `momentum` (PyTorch's meaning: running = (1 - momentum) running +
/// momentum batch), the variance biased in the normalization and unbiased in running_var; in
/// eval the running statistics normalize. The residual, when there is one, is added to
/// channels [residual_first, residual_first + residual_channels) of y alone (ResNet's
/// option-A shortcut: the other channels are its zero padding, never made); ReLU comes last.
struct BatchNormGeometry {
  std::int64_t n = 0, c = 0, hw = 0;
  double eps = 1e-5, momentum = 0.1;
  bool training = true;
  bool relu = false;
  std::int64_t residual_first = 0, residual_channels = 0;  ///< no residual: 0 channels

  std::int64_t count() const { return n * hw; }
  bool has_residual() const { return residual_channels > 0; }
};

/// Where a batch norm's residual lies (forward), or its gradient goes (backward), in both
/// backends: channels [first, first + count) of the output, image i's channel first + k
/// starting at i * image + k * channel, its plane of H * W values packed.
template <class T>
struct ResidualPlanes {
  T* data;  ///< null: no residual
  std::int64_t first, count, image, channel;

  ET_HD bool covers(std::int64_t c) const { return data && c >= first && c < first + count; }
  ET_HD T* plane(std::int64_t i, std::int64_t c) const { return data + i * image + (c - first) * channel; }
};

/// An LSTM call's sizes (derivatives/rnn.hpp, backend/cuda/cudnn_rnn.hpp): S steps of B
/// sequences, `layers` layers of `hidden` units over inputs of `input` values.
struct LstmGeometry {
  std::int64_t seq = 0, batch = 0, input = 0, hidden = 0, layers = 0;
  bool bias = true;
  /// Elements of layer l's weights in PyTorch's order: weight_ih [4H, in], weight_hh
  /// [4H, H], then bias_ih and bias_hh [4H] when there are biases.
  std::int64_t layer_elements(std::int64_t l) const {
    return 4 * hidden * ((l == 0 ? input : hidden) + hidden) + (bias ? 8 * hidden : 0);
  }
  /// Elements of every layer's weights, layer after layer.
  std::int64_t weight_elements() const {
    std::int64_t n = 0;
    for (std::int64_t l = 0; l < layers; ++l) n += layer_elements(l);
    return n;
  }
  std::int64_t output_elements() const { return seq * batch * hidden; }   ///< y [S, B, H]
  std::int64_t state_elements() const { return layers * batch * hidden; }  ///< h or c [L, B, H]
};

/// Checks a pooling of an input of shape `input` (options.layout's axis order) and works
/// out its geometry. Throws ShapeError, naming `operation` and the shape, for an unset or
/// non-positive kernel, a negative stride, padding outside [0, kernel / 2], an empty
/// channel or spatial extent, and a kernel larger than the padded input.
inline PoolGeometry pool_geometry(const char* operation, const Shape<4>& input, const Pool2dOptions& options) {
  const std::string shape = "; input " + format_shape(input) + " (" + layout_name(options.layout) + ")";
  const auto fail = [&](const std::string& what) {
    return ShapeError(std::string("et: ") + operation + ": " + what + shape);
  };
  for (int d = 0; d < 2; ++d) {
    if (options.kernel[d] < 1)
      throw fail("kernel must be positive, got " + format_shape(options.kernel) + " (set .kernel)");
  }
  for (int d = 0; d < 2; ++d) {
    if (options.stride[d] < 0)
      throw fail("stride must be positive, or 0 for the kernel's extent, got " + format_shape(options.stride));
    if (options.padding[d] < 0 || options.padding[d] > options.kernel[d] / 2)  // 2 * padding may overflow
      throw fail("padding must be non-negative and at most half the kernel, got padding " +
                 format_shape(options.padding) + " for kernel " + format_shape(options.kernel));
  }
  bool positive = input[0] >= 0;
  for (int d = 1; d < 4; ++d) positive = positive && input[d] > 0;
  if (!positive) throw fail("input extents must be positive (the batch may be 0)");

  PoolGeometry g;
  g.layout = options.layout;
  g.count_include_pad = options.count_include_pad;
  g.kernel = options.kernel;
  g.padding = options.padding;
  for (int d = 0; d < 2; ++d) g.stride[d] = options.stride[d] == 0 ? options.kernel[d] : options.stride[d];
  const bool nhwc = options.layout == Layout::nhwc;
  g.n = input[0];
  g.c = nhwc ? input[3] : input[1];
  g.h = nhwc ? input[1] : input[2];
  g.w = nhwc ? input[2] : input[3];
  std::int64_t padded_h = 0, padded_w = 0;
  if (!padded_extent(g.h, g.padding[0], padded_h) || !padded_extent(g.w, g.padding[1], padded_w))
    throw fail("padding " + format_shape(g.padding) + " makes extents past 64 bits");
  if (g.kernel[0] > padded_h || g.kernel[1] > padded_w)
    throw fail("the kernel " + format_shape(g.kernel) + " is larger than the padded input (" +
               std::to_string(padded_h) + " x " + std::to_string(padded_w) + " with padding " +
               format_shape(g.padding) + ")");
  g.p = (padded_h - g.kernel[0]) / g.stride[0] + 1;
  g.q = (padded_w - g.kernel[1]) / g.stride[1] + 1;
  return g;
}

}  // namespace detail

/// The output shape of et::conv2d for these input and weight shapes (in options.layout's
/// axis order). Throws ShapeError as conv2d does.
inline Shape<4> conv2d_output_shape(const Shape<4>& input, const Shape<4>& weight, const Conv2dOptions& options = {}) {
  return detail::conv_geometry("conv2d", input, weight, options).output_shape();
}

/// The output shape of et::max_pool2d and et::avg_pool2d for this input shape. Throws
/// ShapeError as they do.
inline Shape<4> pool2d_output_shape(const Shape<4>& input, const Pool2dOptions& options) {
  return detail::pool_geometry("pool2d", input, options).output_shape();
}

}  // namespace et

namespace et::detail {

/// Layer normalization over the last axis: `rows` rows of `cols` values each, packed (row
/// r's values at r * cols). y = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var + eps),
/// var biased, per row. The residual form first makes h = x + residual (rounded to T) and
/// normalizes h.
struct LayerNormGeometry {
  std::int64_t rows = 0, cols = 0;
  double eps = 1e-5;
};

/// What layer_norm_forward reads and writes (T the activations' type, P weight's and bias's,
/// C the compute type of the saved statistics). A null pointer: not there (no residual, no
/// weight or bias, h not wanted; mean and rstd not saved).
template <class T, class P, class C>
struct LayerNormForward {
  const T* x;
  const T* residual;
  const P* weight;
  const P* bias;
  T* h;
  T* y;
  C* mean;
  C* rstd;
};

/// What layer_norm_backward reads and writes: x the normalized input (h in the residual
/// form), dy y's gradient, dh a gradient that reached h by another path (added to dx; null:
/// none). dx = rstd * (w dy - mean(w dy) - xhat * mean(w dy xhat)) + dh; dweight = the
/// column sums of dy xhat, dbias of dy (null: not wanted).
template <class T, class P, class C>
struct LayerNormBackward {
  const T* x;
  const T* dy;
  const P* weight;
  const C* mean;
  const C* rstd;
  const T* dh;
  T* dx;
  P* dweight;
  P* dbias;
};

}  // namespace et::detail
