// Convolution and pooling on a CUDA device, as ops/nn.hpp calls them through the backend tag
// (backend/backend.hpp): cuDNN (backend/cuda/cudnn_conv.hpp, cudnn_pooling.hpp) on packed
// operands. This needs nvcc (packing and the bias run etensor kernels, through this
// backend's own elementwise call) and cuDNN found at configure time (ET_WITH_CUDNN);
// otherwise backend/cuda/unavailable.hpp's stand-ins stop compilation with an et: message
// saying which of the two is missing.
#pragma once

#include "et/backend/backend.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/expr/operators.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUDNN)
#include "et/backend/cuda/cudnn_conv.hpp"
#include "et/backend/cuda/cudnn_pooling.hpp"
#include "et/backend/cuda/elementwise.hpp"
#else
#include "et/backend/cuda/unavailable.hpp"
#endif

namespace et::detail::cuda_backend {

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUDNN)

// cuDNN runs an operation in the caller's layout, except double, which runs in nchw as in
// PyTorch (which never hands cuDNN nhwc double tensors): cuDNN's nhwc engines target the
// tensor-core types. Such operands are transposed on the way in and the result on the way out.

/// dst = expr, one kernel of this backend (backend/cuda/elementwise.hpp). The packing and
/// the bias below write fresh or caller-checked tensors of known shapes, so the executor's
/// checks and autograd recording (exec/assign.hpp) have nothing to do here.
template <class T, int I, class E>
void write(const Tensor<T, 4, Cuda<I>>& dst, const E& expr) {
  if (dst.numel() != 0) run_elementwise(Backend<I>{}, dst, expr);
}

/// t packed row-major: t itself when it already is, else a packed copy.
template <class T, int I>
Tensor<T, 4, Cuda<I>> packed(const Tensor<T, 4, Cuda<I>>& t) {
  if (t.is_contiguous()) return t;
  auto out = Tensor<T, 4, Cuda<I>>::allocate(t.shape());
  write(out, t);
  return out;
}

/// A packed copy of [N, H, W, C] as [N, C, H, W] (likewise a weight [K, R, S, C] as [K, C, R, S]).
template <class T, int I>
Tensor<T, 4, Cuda<I>> nhwc_to_nchw(const Tensor<T, 4, Cuda<I>>& t) {
  return packed(t.permute({0, 3, 1, 2}));
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
      write(target, written.permute({0, 2, 3, 1}));
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
      write(y, y_nchw.permute({0, 2, 3, 1}));
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
      // Average pooling reads neither y nor x (avg_pool_backward passes unwritten stand-ins):
      // they are passed on as they are, not transposed, which would read them.
      const auto dy_nchw = nhwc_to_nchw(dy);
      const auto y_nchw = max ? nhwc_to_nchw(y) : dy_nchw;
      const auto x_nchw = max ? nhwc_to_nchw(x) : x;
      const auto dx_nchw = Tensor<T, 4, Cuda<I>>::allocate(nchw.input_shape());
      cudnn_backend::pooling_backward(I, CUDNN_DATA_DOUBLE, nchw, max, y_nchw.data(), dy_nchw.data(), x_nchw.data(),
                                      dx_nchw.data());
      write(dx, dx_nchw.permute({0, 2, 3, 1}));
      return;
    }
  }
  note_stream_uses(y, dy, x, dx);
  cudnn_backend::pooling_backward(I, cudnn_backend::data_type<T>(), g, max, y.data(), dy.data(), x.data(), dx.data());
}

template <int I, class T>
void conv_forward(Backend<I>, const ConvGeometry& g, bool allow_tf32, const Tensor<T, 4, Cuda<I>>& x,
                  const Tensor<T, 4, Cuda<I>>& w, const Tensor<T, 1, Cuda<I>>* bias, Tensor<T, 4, Cuda<I>> y) {
  cudnn_convolution(cudnn_backend::Direction::forward, g, allow_tf32, packed(x), packed(w), y);
  if (bias != nullptr) {
    if (g.nhwc()) write(y, y + *bias);  // broadcasts along the trailing channel axis
    else write(y, y + bias->view(Shape<4>{1, g.k, 1, 1}));
  }
}

template <int I, class T>
void conv_backward_data(Backend<I>, const ConvGeometry& g, bool allow_tf32, const Tensor<T, 4, Cuda<I>>& dy,
                        const Tensor<T, 4, Cuda<I>>& w, const Tensor<T, 4, Cuda<I>>& dx) {
  cudnn_convolution(cudnn_backend::Direction::backward_data, g, allow_tf32, dx, packed(w), packed(dy));
}

template <int I, class T>
void conv_backward_filter(Backend<I>, const ConvGeometry& g, bool allow_tf32, const Tensor<T, 4, Cuda<I>>& x,
                          const Tensor<T, 4, Cuda<I>>& dy, Tensor<T, 4, Cuda<I>> dw) {
  if (g.n == 0) {  // an empty batch: no contribution (cuDNN refuses N = 0)
    write(dw, ScalarExpr<T>(T(0)));
    return;
  }
  cudnn_convolution(cudnn_backend::Direction::backward_filter, g, allow_tf32, packed(x), dw, packed(dy));
}

template <int I, class T>
void pool_forward(Backend<I>, const PoolGeometry& g, bool max, const Tensor<T, 4, Cuda<I>>& x,
                  const Tensor<T, 4, Cuda<I>>& y) {
  cudnn_pooling_forward(g, max, packed(x), y);
}

template <int I, class T>
void max_pool_backward(Backend<I>, const PoolGeometry& g, const Tensor<T, 4, Cuda<I>>& dy,
                       const Tensor<T, 4, Cuda<I>>& x, const Tensor<T, 4, Cuda<I>>& y,
                       const Tensor<T, 4, Cuda<I>>& dx) {
  cudnn_pooling_backward(g, true, packed(y), packed(dy), packed(x), dx);
}

template <int I, class T>
void avg_pool_backward(Backend<I>, const PoolGeometry& g, const Tensor<T, 4, Cuda<I>>& dy,
                       const Tensor<T, 4, Cuda<I>>& dx) {
  // cuDNN's call takes the forward input and output, which average pooling never reads:
  // dy stands in for y, and an unwritten buffer of x's shape for x.
  const auto dy_packed = packed(dy);
  cudnn_pooling_backward(g, false, dy_packed, dy_packed, Tensor<T, 4, Cuda<I>>::allocate(g.input_shape()), dx);
}

#endif

}  // namespace et::detail::cuda_backend
