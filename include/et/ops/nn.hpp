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
// Shapes and options: ops/nn_shapes.hpp (et::Layout, et::Conv2dOptions, et::Pool2dOptions).
// Element types: float, double, et::half, et::bfloat16; half and bfloat16 compute in float,
// double in double. Operands of one call share their element type and device (checked at
// compile time, like expressions); any strides are accepted (non-contiguous operands are
// packed first); results are new contiguous tensors in the options' layout.
//
// CPU: backend/cpu/conv.hpp (im2col + Eigen GEMM, OpenMP). CUDA: backend/cuda/cudnn.hpp
// (cuDNN 9, with a timed algorithm search per new configuration); it needs nvcc (packing
// and the bias run etensor kernels) and cuDNN found at configure time (ET_WITH_CUDNN).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "et/backend/cpu/conv.hpp"
#include "et/expr/assign.hpp"
#include "et/ops/nn_shapes.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUDNN)
#include "et/backend/cuda/cudnn.hpp"
#define ET_NN_ON_CUDA 1
#endif

namespace et {
namespace detail {

template <class T>
inline constexpr bool is_nn_element_v = std::is_same_v<T, float> || std::is_same_v<T, double> || is_16bit_float_v<T>;

/// What convolution and pooling compute in: double for double, float for the others.
template <class T>
using nn_compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

#if !defined(ET_DEVICE_COMPILER)
template <class D>
struct nn_on_cuda_unavailable {
  static_assert(never<D>,
                "et: conv2d, pooling and their gradients on a CUDA device need nvcc: compile this file as CUDA (a .cu file, or LANGUAGE CUDA)");
};
#elif !defined(ET_WITH_CUDNN)
template <class D>
struct nn_on_cuda_unavailable {
  static_assert(never<D>,
                "et: conv2d and pooling on a CUDA device need cuDNN, which was not found when etensor was configured; install cuDNN 9 and configure again");
};
#endif

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

/// A CPU tensor's elements in row-major order as the compute type: the tensor's own
/// buffer when it already is that, else a converted copy.
template <class Acc>
class HostInput {
 public:
  template <class T, int R>
  explicit HostInput(const Tensor<T, R, Cpu>& t) {
    if constexpr (std::is_same_v<T, Acc>) {
      if (t.is_contiguous()) {
        data_ = t.data();
        return;
      }
    }
    const std::vector<T> values = t.to_vector();
    copy_.resize(values.size());
    std::transform(values.begin(), values.end(), copy_.begin(), [](T v) { return static_cast<Acc>(v); });
    data_ = copy_.data();
  }
  const Acc* data() const { return data_; }

 private:
  std::vector<Acc> copy_;
  const Acc* data_ = nullptr;
};

/// A new contiguous CPU tensor written through a compute-type buffer: the tensor itself
/// when T is the compute type, else a buffer rounded into it by finish().
template <class T, class Acc>
class HostOutput {
 public:
  explicit HostOutput(const Tensor<T, 4, Cpu>& t) : tensor_(t) {
    if constexpr (!std::is_same_v<T, Acc>) buffer_.resize(static_cast<std::size_t>(t.numel()));
  }
  Acc* data() {
    if constexpr (std::is_same_v<T, Acc>) return tensor_.data();
    else return buffer_.data();
  }
  void finish() {
    if constexpr (!std::is_same_v<T, Acc>)
      std::transform(buffer_.begin(), buffer_.end(), tensor_.data(), [](Acc v) { return static_cast<T>(v); });
  }

 private:
  Tensor<T, 4, Cpu> tensor_;
  std::vector<Acc> buffer_;
};

/// Runs a CPU kernel on the compute-type buffers of `inputs` and rounds its result into
/// `out`: kernel(inputs' data..., out's data), each pointer an Acc array (HostInput,
/// HostOutput).
template <class T, class Kernel, class... Inputs>
void run_on_host(const Tensor<T, 4, Cpu>& out, Kernel&& kernel, const Inputs&... inputs) {
  using Acc = nn_compute_t<T>;
  HostOutput<T, Acc> result(out);
  kernel(HostInput<Acc>(inputs).data()..., result.data());
  result.finish();
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

#if defined(ET_NN_ON_CUDA)
// cuDNN runs an operation in the caller's layout, except double, which runs in nchw as in
// PyTorch (which never hands cuDNN nhwc double tensors): cuDNN's nhwc engines target the
// tensor-core types. Such operands are transposed on the way in and the result on the way out.

/// A packed copy of [N, H, W, C] as [N, C, H, W] (likewise a weight [K, R, S, C] as [K, C, R, S]).
template <class T, int I>
Tensor<T, 4, Cuda<I>> nhwc_to_nchw(const Tensor<T, 4, Cuda<I>>& t) {
  return t.permute({0, 3, 1, 2}).contiguous();
}

/// Runs one cuDNN convolution. x, w and y are its operands by role, packed in g's layout;
/// `direction` writes one of them (y forward, x backward data, w backward filter), a fresh
/// tensor, and reads the other two.
template <class T, int I>
void cudnn_convolution(cudnn_backend::Direction direction, const ConvGeometry& g, bool allow_tf32,
                       Tensor<T, 4, Cuda<I>> x, Tensor<T, 4, Cuda<I>> w, Tensor<T, 4, Cuda<I>> y) {
  using cudnn_backend::Direction;
  using Operand = Tensor<T, 4, Cuda<I>>;
  if constexpr (std::is_same_v<T, double>) {
    if (g.nhwc()) {
      ConvGeometry nchw = g;
      nchw.layout = Layout::nchw;
      Operand& written = direction == Direction::forward ? y : direction == Direction::backward_data ? x : w;
      Operand target = written;  // the caller's tensor; `written` is rebound below
      x = direction == Direction::backward_data ? Operand::allocate(nchw.input_shape()) : nhwc_to_nchw(x);
      w = direction == Direction::backward_filter ? Operand::allocate(nchw.weight_shape()) : nhwc_to_nchw(w);
      y = direction == Direction::forward ? Operand::allocate(nchw.output_shape()) : nhwc_to_nchw(y);
      cudnn_backend::convolution(I, direction, CUDNN_DATA_DOUBLE, nchw, allow_tf32, {x.data(), w.data(), y.data()});
      target.copy_(written.permute({0, 2, 3, 1}));
      return;
    }
  }
  note_stream_uses(x, w, y);
  cudnn_backend::convolution(I, direction, cudnn_backend::data_type<T>(), g, allow_tf32, {x.data(), w.data(), y.data()});
}

/// y = max or average pooling of x, both packed in g's layout.
template <class T, int I>
void cudnn_pooling_forward(const PoolGeometry& g, bool max, const Tensor<T, 4, Cuda<I>>& x, Tensor<T, 4, Cuda<I>> y) {
  if constexpr (std::is_same_v<T, double>) {
    if (g.nhwc()) {
      PoolGeometry nchw = g;
      nchw.layout = Layout::nchw;
      const auto x_nchw = nhwc_to_nchw(x);
      const auto y_nchw = Tensor<T, 4, Cuda<I>>::allocate(nchw.output_shape());
      cudnn_backend::pooling_forward(I, CUDNN_DATA_DOUBLE, nchw, max, x_nchw.data(), y_nchw.data());
      y.copy_(y_nchw.permute({0, 2, 3, 1}));
      return;
    }
  }
  note_stream_uses(x, y);
  cudnn_backend::pooling_forward(I, cudnn_backend::data_type<T>(), g, max, x.data(), y.data());
}

/// dx from dy (and, for max pooling, the forward input x and output y), all packed in g's layout.
template <class T, int I>
void cudnn_pooling_backward(const PoolGeometry& g, bool max, const Tensor<T, 4, Cuda<I>>& y,
                            const Tensor<T, 4, Cuda<I>>& dy, const Tensor<T, 4, Cuda<I>>& x, Tensor<T, 4, Cuda<I>> dx) {
  if constexpr (std::is_same_v<T, double>) {
    if (g.nhwc()) {
      PoolGeometry nchw = g;
      nchw.layout = Layout::nchw;
      const auto y_nchw = nhwc_to_nchw(y), dy_nchw = nhwc_to_nchw(dy), x_nchw = nhwc_to_nchw(x);
      const auto dx_nchw = Tensor<T, 4, Cuda<I>>::allocate(nchw.input_shape());
      cudnn_backend::pooling_backward(I, CUDNN_DATA_DOUBLE, nchw, max, y_nchw.data(), dy_nchw.data(), x_nchw.data(),
                                      dx_nchw.data());
      dx.copy_(dx_nchw.permute({0, 2, 3, 1}));
      return;
    }
  }
  note_stream_uses(y, dy, x, dx);
  cudnn_backend::pooling_backward(I, cudnn_backend::data_type<T>(), g, max, y.data(), dy.data(), x.data(), dx.data());
}
#endif

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
    if (y.numel() == 0) return y;
    if constexpr (!D::is_cuda) {
      std::optional<HostInput<nn_compute_t<TX>>> b_in;
      if (bias != nullptr) b_in.emplace(*bias);
      run_on_host(y, [&](auto x_data, auto w_data, auto y_data) {
        cpu_backend::nn::conv2d_forward(g, x_data, w_data, b_in ? b_in->data() : nullptr, y_data);
      }, x, w);
    } else {
#if defined(ET_NN_ON_CUDA)
      cudnn_convolution(cudnn_backend::Direction::forward, g, options.allow_tf32, x.contiguous(), w.contiguous(), y);
      if (bias != nullptr) {
        if (g.nhwc()) y += *bias;  // broadcasts along the trailing channel axis
        else y += bias->view(Shape<4>{1, g.k, 1, 1});
      }
#else
      [[maybe_unused]] nn_on_cuda_unavailable<D> report;
#endif
    }
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
    if (y.numel() == 0) return y;
    if constexpr (!D::is_cuda) {
      run_on_host(y, [&](auto x_data, auto y_data) {
        if (max) cpu_backend::nn::max_pool2d_forward(g, x_data, y_data);
        else cpu_backend::nn::avg_pool2d_forward(g, x_data, y_data);
      }, x);
    } else {
#if defined(ET_NN_ON_CUDA)
      cudnn_pooling_forward(g, max, x.contiguous(), y);
#else
      [[maybe_unused]] nn_on_cuda_unavailable<D> report;
#endif
    }
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
    if constexpr (!D::is_cuda) {
      detail::run_on_host(dx, [&](auto dy_data, auto w_data, auto dx_data) {
        detail::cpu_backend::nn::conv2d_backward_data(g, dy_data, w_data, dx_data);
      }, grad_output, w);
    } else {
#if defined(ET_NN_ON_CUDA)
      detail::cudnn_convolution(detail::cudnn_backend::Direction::backward_data, g, options.allow_tf32, dx,
                                w.contiguous(), grad_output.contiguous());
#else
      [[maybe_unused]] detail::nn_on_cuda_unavailable<D> report;
#endif
    }
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
    if constexpr (!D::is_cuda) {
      detail::run_on_host(dw, [&](auto x_data, auto dy_data, auto dw_data) {
        detail::cpu_backend::nn::conv2d_backward_filter(g, x_data, dy_data, dw_data);
      }, x, grad_output);
    } else {
#if defined(ET_NN_ON_CUDA)
      if (g.n == 0) {
        dw = 0;
        return dw;
      }
      detail::cudnn_convolution(detail::cudnn_backend::Direction::backward_filter, g, options.allow_tf32,
                                x.contiguous(), dw, grad_output.contiguous());
#else
      [[maybe_unused]] detail::nn_on_cuda_unavailable<D> report;
#endif
    }
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
    if constexpr (!D::is_cuda) {
      detail::run_on_host(dx, [&](auto dy_data, auto x_data, auto dx_data) {
        detail::cpu_backend::nn::max_pool2d_backward(g, dy_data, x_data, dx_data);
      }, grad_output, x);
    } else {
#if defined(ET_NN_ON_CUDA)
      detail::cudnn_pooling_backward(g, true, y.contiguous(), grad_output.contiguous(), x.contiguous(), dx);
#else
      [[maybe_unused]] detail::nn_on_cuda_unavailable<D> report;
#endif
    }
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
    if constexpr (!D::is_cuda) {
      detail::run_on_host(dx, [&](auto dy_data, auto dx_data) {
        detail::cpu_backend::nn::avg_pool2d_backward(g, dy_data, dx_data);
      }, grad_output);
    } else {
#if defined(ET_NN_ON_CUDA)
      // cuDNN's call takes the forward input and output, which average pooling never reads:
      // grad_output stands in for y, and an unwritten buffer of x's shape for x.
      const auto dy_packed = grad_output.contiguous();
      detail::cudnn_pooling_backward(g, false, dy_packed, dy_packed, Tensor<T, 4, D>::allocate(input_shape), dx);
#else
      [[maybe_unused]] detail::nn_on_cuda_unavailable<D> report;
#endif
    }
    return dx;
  } else {
    return {};
  }
}

}  // namespace et

#undef ET_NN_ON_CUDA  // internal to this file
