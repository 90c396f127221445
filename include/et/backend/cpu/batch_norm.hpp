// Batch normalization in training on the CPU, as ops/batch_norm.hpp calls it through the
// backend tag (backend/backend.hpp): one pass per channel (OpenMP over the channels) that
// accumulates in double, for float and double tensors, packed nchw.
//
//   forward   mean, biased variance (two passes over the channel's values: no cancellation),
//             invstd = 1 / sqrt(var + eps); y = (x - mean) * invstd * w + b; the running
//             statistics updated in place (unbiased variance), mean and invstd saved
//   backward  xhat = (x - mean) * invstd; db = sum dy; dw = sum dy * xhat;
//             dx = w * invstd / M * (M * dy - db - xhat * dw), M = N * H * W
#pragma once

#include <cmath>
#include <cstdint>

#include "et/backend/backend.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/tensor.hpp"

namespace et::detail::cpu_backend {

/// Visits channel c's values: f(offset of a run of hw values), for each of the N images.
template <class F>
void for_each_run(const BatchNormGeometry& g, std::int64_t c, F&& f) {
  for (std::int64_t i = 0; i < g.n; ++i) f((i * g.c + c) * g.hw);
}

template <class T>
void batch_norm_forward(Backend, const BatchNormGeometry& g, const Tensor<T, 4, Cpu>& x, const Tensor<T, 1, Cpu>& w,
                        const Tensor<T, 1, Cpu>& b, const Tensor<T, 4, Cpu>& y, const Tensor<T, 1, Cpu>& running_mean,
                        const Tensor<T, 1, Cpu>& running_var, const Tensor<T, 1, Cpu>& save_mean,
                        const Tensor<T, 1, Cpu>& save_invstd) {
  const T* xs = x.data();
  T* ys = y.data();
  const double count = double(g.count());
#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.c * g.hw > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    double sum = 0, squares = 0;
    for_each_run(g, c, [&](std::int64_t at) {
      for (std::int64_t k = 0; k < g.hw; ++k) sum += double(xs[at + k]);
    });
    const double mean = sum / count;
    for_each_run(g, c, [&](std::int64_t at) {
      for (std::int64_t k = 0; k < g.hw; ++k) squares += (double(xs[at + k]) - mean) * (double(xs[at + k]) - mean);
    });
    const double variance = squares / count, invstd = 1.0 / std::sqrt(variance + g.eps);
    const double scale = double(w.data()[c]) * invstd, shift = double(b.data()[c]) - mean * scale;
    for_each_run(g, c, [&](std::int64_t at) {
      for (std::int64_t k = 0; k < g.hw; ++k) ys[at + k] = T(double(xs[at + k]) * scale + shift);
    });
    const double m = g.momentum;
    running_mean.data()[c] = T((1 - m) * double(running_mean.data()[c]) + m * mean);
    running_var.data()[c] = T((1 - m) * double(running_var.data()[c]) + m * variance * count / (count - 1));
    save_mean.data()[c] = T(mean);
    save_invstd.data()[c] = T(invstd);
  }
}

template <class T>
void batch_norm_backward(Backend, const BatchNormGeometry& g, const Tensor<T, 4, Cpu>& x, const Tensor<T, 4, Cpu>& dy,
                         const Tensor<T, 1, Cpu>& w, const Tensor<T, 1, Cpu>& save_mean,
                         const Tensor<T, 1, Cpu>& save_invstd, const Tensor<T, 4, Cpu>& dx, const Tensor<T, 1, Cpu>& dw,
                         const Tensor<T, 1, Cpu>& db) {
  const T *xs = x.data(), *dys = dy.data();
  T* dxs = dx.data();
  const double count = double(g.count());
#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.c * g.hw > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    const double mean = double(save_mean.data()[c]), invstd = double(save_invstd.data()[c]);
    double sum_dy = 0, sum_dy_xhat = 0;
    for_each_run(g, c, [&](std::int64_t at) {
      for (std::int64_t k = 0; k < g.hw; ++k) {
        sum_dy += double(dys[at + k]);
        sum_dy_xhat += double(dys[at + k]) * (double(xs[at + k]) - mean) * invstd;
      }
    });
    const double scale = double(w.data()[c]) * invstd / count;
    for_each_run(g, c, [&](std::int64_t at) {
      for (std::int64_t k = 0; k < g.hw; ++k) {
        const double xhat = (double(xs[at + k]) - mean) * invstd;
        dxs[at + k] = T(scale * (count * double(dys[at + k]) - sum_dy - xhat * sum_dy_xhat));
      }
    });
    dw.data()[c] = T(sum_dy_xhat);
    db.data()[c] = T(sum_dy);
  }
}

}  // namespace et::detail::cpu_backend
