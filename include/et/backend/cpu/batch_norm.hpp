// Batch normalization on the CPU, as ops/batch_norm.hpp calls it through the backend tag
// (backend/backend.hpp), with the epilogue backend/nn_shapes.hpp describes (a residual on a
// range of channels, then ReLU): one pass per channel (OpenMP over the channels) that
// accumulates in double, for every floating type, packed nchw. The same contract as
// backend/cuda/batch_norm.hpp:
//
//   forward   training: mean, biased variance (two passes over the channel's values: no
//             cancellation), invstd = 1 / sqrt(var + eps), saved; the running statistics
//             updated in place (unbiased variance). eval: the running statistics, saved
//             where the caller passes tensors for them. Then y = relu?((x - mean) * invstd *
//             w + b + residual).
//   backward  g = dy where y > 0 (ReLU) or dy; xhat = (x - mean) * invstd; db = sum g;
//             dw = sum g * xhat; dx = w * invstd / M * (M * g - db - xhat * dw) in training
//             (M = N * H * W), w * invstd * g in eval; the residual's gradient is g.
//
// T is the activations' type (x, y, the residual and their gradients), P the per-channel
// arrays' (weight, bias, the running statistics, dweight, dbias): T, or float for a 16-bit
// T (mixed precision).
#pragma once

#include <cmath>
#include <cstdint>

#include "et/backend/backend.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/tensor.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

/// Visits channel c's values: f(image, offset of its run of hw values).
template <class F>
void for_each_run(const BatchNormGeometry& g, std::int64_t c, F&& f) {
  for (std::int64_t i = 0; i < g.n; ++i) f(i, (i * g.c + c) * g.hw);
}

template <class T, class P>
void batch_norm_forward(Backend, const BatchNormGeometry& g, const Tensor<T, 4, Cpu>& x, const Tensor<P, 1, Cpu>& w,
                        const Tensor<P, 1, Cpu>& b, const Tensor<P, 1, Cpu>& running_mean,
                        const Tensor<P, 1, Cpu>& running_var, const Tensor<T, 4, Cpu>* residual,
                        const Tensor<T, 4, Cpu>& y, const Tensor<compute_t<T>, 1, Cpu>& save_mean,
                        const Tensor<compute_t<T>, 1, Cpu>& save_invstd,
                        const Tensor<std::int64_t, 0, Cpu>* batches_tracked) {
  const T* xs = x.data();
  T* ys = y.data();
  const ResidualPlanes<const T> rs{residual ? residual->data() : nullptr, g.residual_first, g.residual_channels,
                                   residual ? residual->strides()[0] : 0, residual ? residual->strides()[1] : 0};
  const double count = double(g.count());
#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.c * g.hw > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    double mean = 0, invstd = 0;
    if (g.training) {
      double sum = 0, squares = 0;
      for_each_run(g, c, [&](std::int64_t, std::int64_t at) {
        for (std::int64_t k = 0; k < g.hw; ++k) sum += as_double(xs[at + k]);
      });
      mean = sum / count;
      for_each_run(g, c, [&](std::int64_t, std::int64_t at) {
        for (std::int64_t k = 0; k < g.hw; ++k) squares += (as_double(xs[at + k]) - mean) * (as_double(xs[at + k]) - mean);
      });
      const double variance = squares / count, m = g.momentum;
      invstd = 1.0 / std::sqrt(variance + g.eps);
      running_mean.data()[c] = from_double<P>((1 - m) * as_double(running_mean.data()[c]) + m * mean);
      running_var.data()[c] = from_double<P>((1 - m) * as_double(running_var.data()[c]) + m * variance * count / (count - 1));
    } else {
      mean = as_double(running_mean.data()[c]);
      invstd = 1.0 / std::sqrt(as_double(running_var.data()[c]) + g.eps);
    }
    if (save_mean.defined()) {
      save_mean.data()[c] = static_cast<compute_t<T>>(mean);
      save_invstd.data()[c] = static_cast<compute_t<T>>(invstd);
    }
    const double scale = as_double(w.data()[c]) * invstd, shift = as_double(b.data()[c]) - mean * scale;
    for_each_run(g, c, [&](std::int64_t i, std::int64_t at) {
      const T* r = rs.covers(c) ? rs.plane(i, c) : nullptr;
      for (std::int64_t k = 0; k < g.hw; ++k) {
        double v = as_double(xs[at + k]) * scale + shift + (r ? as_double(r[k]) : 0.0);
        if (g.relu && v < 0) v = 0;
        ys[at + k] = from_double<T>(v);
      }
    });
  }
  if (batches_tracked) ++*batches_tracked->data();
}

template <class T, class P>
void batch_norm_backward(Backend, const BatchNormGeometry& g, const Tensor<T, 4, Cpu>& x, const Tensor<T, 4, Cpu>& y,
                         const Tensor<T, 4, Cpu>& dy, const Tensor<P, 1, Cpu>& w,
                         const Tensor<compute_t<T>, 1, Cpu>& save_mean,
                         const Tensor<compute_t<T>, 1, Cpu>& save_invstd, const Tensor<T, 4, Cpu>& dx,
                         const Tensor<P, 1, Cpu>& dw, const Tensor<P, 1, Cpu>& db, const Tensor<T, 4, Cpu>* dresidual) {
  const T *xs = x.data(), *dys = dy.data(), *ys = g.relu ? y.data() : nullptr;
  T* dxs = dx.defined() ? dx.data() : nullptr;
  const ResidualPlanes<T> drs{dresidual ? dresidual->data() : nullptr, g.residual_first, g.residual_channels,
                              g.residual_channels * g.hw, g.hw};  // packed
  const double count = double(g.count());
  auto gradient = [&](std::int64_t at) { return ys && !(as_double(ys[at]) > 0) ? 0.0 : as_double(dys[at]); };
#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.c * g.hw > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    const double mean = double(save_mean.data()[c]), invstd = double(save_invstd.data()[c]);
    double sum_g = 0, sum_g_xhat = 0;
    for_each_run(g, c, [&](std::int64_t i, std::int64_t at) {
      T* dr = drs.covers(c) ? drs.plane(i, c) : nullptr;
      for (std::int64_t k = 0; k < g.hw; ++k) {
        const double gk = gradient(at + k);
        sum_g += gk;
        sum_g_xhat += gk * (as_double(xs[at + k]) - mean) * invstd;
        if (dr) dr[k] = from_double<T>(gk);
      }
    });
    const double scale = as_double(w.data()[c]) * invstd;
    if (dxs) {
      for_each_run(g, c, [&](std::int64_t, std::int64_t at) {
        for (std::int64_t k = 0; k < g.hw; ++k) {
          const double xhat = (as_double(xs[at + k]) - mean) * invstd;
          dxs[at + k] = from_double<T>(g.training ? scale / count * (count * gradient(at + k) - sum_g - xhat * sum_g_xhat)
                                                  : scale * gradient(at + k));
        }
      });
    }
    if (dw.defined()) dw.data()[c] = from_double<P>(sum_g_xhat);
    if (db.defined()) db.data()[c] = from_double<P>(sum_g);
  }
}

}  // namespace et::detail::cpu_backend
