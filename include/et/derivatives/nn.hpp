// Recording convolution, pooling and batch normalization. `y = conv2d(x, w[, bias])` is
// one node whose backward runs the backend's data and filter gradients (cuDNN / im2col) and
// sums dy for the bias; max pooling's backward reads the saved input and output (the
// positions of the maxima), average pooling's only the input's shape; batch_norm's reads x,
// the weight, the statistics that normalized x (and y, after a fused ReLU), and gives dx,
// dweight, dbias and a fused residual's gradient from one backend call. The gradients
// themselves are public operations (ops/nn.hpp: conv2d_backward_data,
// conv2d_backward_filter, max_pool2d_backward, avg_pool2d_backward).
#pragma once

#include <cstdint>
#include <tuple>

#include "et/autograd/graph.hpp"
#include "et/ops/batch_norm.hpp"
#include "et/ops/layer_norm.hpp"
#include "et/ops/nn.hpp"
#include "et/ops/reduce.hpp"

namespace et::detail {

/// Records y = conv2d(x, w[, bias]) for autograd: one node whose backward runs the
/// backend's data and filter gradients (cuDNN / im2col) and sums dy for the bias.
template <class T, class D, class TB, int RB, class DB>
void record_conv([[maybe_unused]] Tensor<T, 4, D>& y, const Tensor<T, 4, D>& x, const Tensor<T, 4, D>& w,
                 const Tensor<TB, RB, DB>* bias, const Conv2dOptions& options) {
  if constexpr (records_on<D>) {
    if (!(records(x, w) || (bias && records(*bias)))) return;
    auto data_and_filter = [options](const auto& g, const auto& needs, const auto& x, const auto& w) {
      Tensor<T, 4, D> dx, dw;
      if (needs[0]) dx = conv2d_backward_data(g, w, x.shape(), options);
      if (needs[1]) dw = conv2d_backward_filter(x, g, w.shape(), options);
      return std::tuple{dx, dw};
    };
    if (bias == nullptr) {
      record_op(y, "conv2d", std::tie(x, w), data_and_filter, x, w);
    } else {
      auto with_bias = [data_and_filter, nhwc = options.layout == Layout::nhwc](const auto& g, const auto& needs,
                                                                                const auto& x, const auto& w) {
        auto [dx, dw] = data_and_filter(g, needs, x, w);
        Tensor<TB, 1, D> db;
        const std::int64_t k = g.size(nhwc ? 3 : 1);
        if (needs[2]) db = nhwc ? sum_to(g, Shape<1>{k}) : sum_to(g, Shape<3>{k, 1, 1}).view(Shape<1>{k});
        return std::tuple{dx, dw, db};
      };
      record_op(y, "conv2d", std::tie(x, w, *bias), with_bias, x, w);
    }
  }
}

/// Records y = batch_norm(x, ..., weight, bias[, residual]) for autograd: one node whose
/// backward is the backend's (two kernels on CUDA, one CPU pass per channel), giving dx,
/// dweight, dbias and the residual's gradient at once. It saves `packed`, the contiguous x
/// the forward pass read (x itself when it already was), the statistics that normalized it
/// and, for ReLU's mask, y. dx and the residual's gradient are of x's type T, dweight and
/// dbias of the weight's P (float for a 16-bit T in mixed precision).
template <class T, class P, class D>
void record_batch_norm([[maybe_unused]] Tensor<T, 4, D>& y, [[maybe_unused]] const Tensor<T, 4, D>& x,
                       [[maybe_unused]] const Tensor<T, 4, D>& packed, [[maybe_unused]] const Tensor<P, 1, D>& weight,
                       [[maybe_unused]] const Tensor<P, 1, D>& bias, [[maybe_unused]] const Tensor<T, 4, D>* residual,
                       [[maybe_unused]] const Tensor<compute_t<T>, 1, D>& save_mean,
                       [[maybe_unused]] const Tensor<compute_t<T>, 1, D>& save_invstd,
                       [[maybe_unused]] const BatchNormGeometry& geometry) {
  if constexpr (records_on<D>) {
    if (!(records(x, weight, bias) || (residual && records(*residual)))) return;
    Tensor<T, 4, D> output;  // ReLU's mask; it shares y's version counter
    if (geometry.relu) {
      y.meta();
      output = y.detach();
    }
    auto gradients = [geometry](const auto& g, const auto& needs, const auto& x, const auto& y, const auto& w,
                                const auto& mean, const auto& invstd) {
      Tensor<T, 4, D> dx, dresidual;
      Tensor<P, 1, D> dw, db;
      if (needs[0]) dx = Tensor<T, 4, D>::allocate(x.shape());
      if (needs[1]) dw = Tensor<P, 1, D>::allocate(w.shape());
      if (needs[2]) db = Tensor<P, 1, D>::allocate(w.shape());
      const bool residual = geometry.has_residual() && needs.next.size() > 3 && needs[3];
      if (residual)
        dresidual = Tensor<T, 4, D>::allocate(Shape<4>{geometry.n, geometry.residual_channels, x.size(2), x.size(3)});
      batch_norm_backward(backend<D>, geometry, x, y, g.contiguous(), w, mean, invstd, dx, dw, db,
                          residual ? &dresidual : nullptr);
      return std::tuple{dx, dw, db, dresidual};
    };
    const Tensor<P, 1, D> w = weight.contiguous();
    if (residual == nullptr) {
      auto three = [gradients](const auto& g, const auto& needs, const auto&... saved) {
        auto [dx, dw, db, unused] = gradients(g, needs, saved...);
        return std::tuple{dx, dw, db};
      };
      record_op(y, "batch_norm", std::tie(x, weight, bias), three, packed, output, w, save_mean, save_invstd);
    } else {
      record_op(y, "batch_norm", std::tie(x, weight, bias, *residual), gradients, packed, output, w, save_mean,
                save_invstd);
    }
  }
}

/// Records y = layer_norm(x, weight, bias) for autograd: one node whose backward gives dx,
/// dweight and dbias from one backend call (and the small kernel of the column sums), from
/// x (packed), the weight and the rows' mean and rstd saved by the forward.
template <class T, int R, class D, class P, class C>
void record_layer_norm([[maybe_unused]] Tensor<T, R, D>& y, [[maybe_unused]] const Tensor<T, R, D>& x,
                       [[maybe_unused]] const Tensor<T, R, D>& packed, [[maybe_unused]] const Tensor<P, 1, D>& weight,
                       [[maybe_unused]] const Tensor<P, 1, D>& bias, [[maybe_unused]] const Tensor<P, 1, D>& w,
                       [[maybe_unused]] const Tensor<C, 1, D>& mean, [[maybe_unused]] const Tensor<C, 1, D>& rstd,
                       [[maybe_unused]] const LayerNormGeometry& geometry) {
  if constexpr (records_on<D>) {
    auto backward = [geometry](const auto& g, const auto& needs, const auto& x, const auto& w, const auto& mean,
                               const auto& rstd) {
      Tensor<T, R, D> dx;
      Tensor<P, 1, D> dw, db;
      if (needs[0]) dx = Tensor<T, R, D>::allocate(x.shape());
      if (needs[1]) dw = Tensor<P, 1, D>::allocate({geometry.cols});
      if (needs[2]) db = Tensor<P, 1, D>::allocate({geometry.cols});
      const Tensor<T, R, D> dy = g.contiguous();
      if (geometry.rows == 0) {  // no rows: the column sums are zeros
        if (dw.defined()) evaluate(dw, ScalarExpr<P>(P(0)));
        if (db.defined()) evaluate(db, ScalarExpr<P>(P(0)));
        return std::tuple{dx, dw, db};
      }
      layer_norm_backward(backend<D>, geometry,
                          LayerNormBackward<T, P, C>{x.data(), dy.data(), pointer_of(w), mean.data(), rstd.data(),
                                                     nullptr, pointer_of(dx), pointer_of(dw), pointer_of(db)});
      note_stream_uses(x, dy, w, mean, rstd, dx, dw, db);
      return std::tuple{dx, dw, db};
    };
    record_op(y, "layer_norm", std::tie(x, weight, bias), backward, packed, w, mean, rstd);
  }
}

/// Records y = max_pool2d(x) or avg_pool2d(x) for autograd.
template <class T, class D>
void record_pool([[maybe_unused]] Tensor<T, 4, D>& y, [[maybe_unused]] const Tensor<T, 4, D>& x,
                 [[maybe_unused]] const Pool2dOptions& options, [[maybe_unused]] bool max) {
  if constexpr (records_on<D>) {
    if (!records(x)) return;
    if (max) {
      y.meta();  // its version counter, shared by the saved handle (which holds no graph)
      const Tensor<T, 4, D> saved = y.detach();
      auto backward = [options](const auto& g, const auto&, const auto& x, const auto& y) {
        return std::tuple{max_pool2d_backward(g, x, y, options)};
      };
      record_op(y, "max_pool2d", std::tie(x), backward, x, saved);
    } else {
      auto backward = [options, shape = x.shape()](const auto& g, const auto&) {
        return std::tuple{avg_pool2d_backward(g, shape, options)};
      };
      record_op(y, "avg_pool2d", std::tie(x), backward);
    }
  }
}

}  // namespace et::detail
