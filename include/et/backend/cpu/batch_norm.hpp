// Batch normalization on the CPU, as ops/batch_norm.hpp calls it through the backend tag
// (backend/backend.hpp), with the epilogue backend/nn_shapes.hpp describes (a residual on a
// range of channels, then ReLU): one pass per channel (OpenMP over the channels), packed
// nchw. Each run of a channel's values (one image's plane) is a vectorized loop in the
// compute type (float for float and the 16-bit types, double for double), its sums
// reassociated within the run; the runs' sums and the statistics are double. The same contract as
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

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

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
  using A = compute_t<T>;  // within a run: float for the 16-bit types and float, double for double
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
        const T* __restrict xr = xs + at;  // locals: through the closure's references nothing vectorizes
        const std::int64_t hw = g.hw;
        A run = 0;
#pragma omp simd reduction(+ : run)
        for (std::int64_t k = 0; k < hw; ++k) run += A(xr[k]);
        sum += run;
      });
      mean = sum / count;
      for_each_run(g, c, [&](std::int64_t, std::int64_t at) {
        const T* __restrict xr = xs + at;
        const std::int64_t hw = g.hw;
        const A mu = A(mean);
        A run = 0;
#pragma omp simd reduction(+ : run)
        for (std::int64_t k = 0; k < hw; ++k) run += (A(xr[k]) - mu) * (A(xr[k]) - mu);
        squares += run;
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
    const A floor = g.relu ? A(0) : -std::numeric_limits<A>::infinity();  // ReLU as a max
    for_each_run(g, c, [&](std::int64_t i, std::int64_t at) {
      const T* __restrict xr = xs + at;
      T* __restrict yr = ys + at;
      const std::int64_t hw = g.hw;
      const A a = A(scale), b = A(shift), low = floor;
      if (const T* __restrict r = rs.covers(c) ? rs.plane(i, c) : nullptr) {
#pragma omp simd
        for (std::int64_t k = 0; k < hw; ++k) yr[k] = T(std::max(A(xr[k]) * a + b + A(r[k]), low));
      } else {
#pragma omp simd
        for (std::int64_t k = 0; k < hw; ++k) yr[k] = T(std::max(A(xr[k]) * a + b, low));
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
  using A = compute_t<T>;
  const T *xs = x.data(), *dys = dy.data(), *ys = g.relu ? y.data() : nullptr;
  T* dxs = dx.defined() ? dx.data() : nullptr;
  const ResidualPlanes<T> drs{dresidual ? dresidual->data() : nullptr, g.residual_first, g.residual_channels,
                              g.residual_channels * g.hw, g.hw};  // packed
  const double count = double(g.count());
  const std::int64_t hw = g.hw;
  // dy, or 0 where ReLU's output was not positive; on the run's own pointers (locals: through
  // a closure's references the loops do not vectorize).
  auto gradient = [](const T* __restrict yr, const T* __restrict dyr, std::int64_t k) {
    return yr && !(A(yr[k]) > A(0)) ? A(0) : A(dyr[k]);
  };
#pragma omp parallel for schedule(static) if (g.c > 1 && g.n * g.c * g.hw > 32768)
  for (std::int64_t c = 0; c < g.c; ++c) {
    const double mean = double(save_mean.data()[c]), invstd = double(save_invstd.data()[c]);
    double sum_g = 0, sum_g_xhat = 0;
    for_each_run(g, c, [&](std::int64_t i, std::int64_t at) {
      const T* __restrict xr = xs + at;
      const T* __restrict dyr = dys + at;
      const T* __restrict yr = ys ? ys + at : nullptr;
      const A mu = A(mean), s = A(invstd);
      A run_g = 0, run_g_xhat = 0;
#pragma omp simd reduction(+ : run_g, run_g_xhat)
      for (std::int64_t k = 0; k < hw; ++k) {
        const A gk = gradient(yr, dyr, k);
        run_g += gk;
        run_g_xhat += gk * (A(xr[k]) - mu) * s;
      }
      sum_g += run_g;
      sum_g_xhat += run_g_xhat;
      if (T* __restrict dr = drs.covers(c) ? drs.plane(i, c) : nullptr) {
#pragma omp simd
        for (std::int64_t k = 0; k < hw; ++k) dr[k] = T(gradient(yr, dyr, k));
      }
    });
    const double scale = as_double(w.data()[c]) * invstd;
    if (dxs) {
      // training: scale / M * (M g - sum_g - xhat sum_g_xhat) = scale g - b - xhat d; eval: scale g
      const A a = A(scale), b = A(g.training ? scale / count * sum_g : 0.0),
              d = A(g.training ? scale / count * sum_g_xhat : 0.0);
      for_each_run(g, c, [&](std::int64_t, std::int64_t at) {
        const T* __restrict xr = xs + at;
        const T* __restrict dyr = dys + at;
        const T* __restrict yr = ys ? ys + at : nullptr;
        T* __restrict dxr = dxs + at;
        const A mu = A(mean), s = A(invstd);
#pragma omp simd
        for (std::int64_t k = 0; k < hw; ++k) dxr[k] = T(a * gradient(yr, dyr, k) - b - (A(xr[k]) - mu) * s * d);
      });
    }
    if (dw.defined()) dw.data()[c] = from_double<P>(sum_g_xhat);
    if (db.defined()) db.data()[c] = from_double<P>(sum_g);
  }
}

}  // namespace et::detail::cpu_backend
