// Layer normalization on the CPU, as ops/layer_norm.hpp calls it through the backend tag
// (backend/backend.hpp), with the contract backend/nn_shapes.hpp states: OpenMP over the
// rows; each row's statistics in double (two passes: no cancellation), its values in the
// compute type. The column sums of the backward (dweight, dbias) are added up in a fixed
// number of row runs (at most 64, set by the shape, not the thread count) whose double
// partials are then added in run order: the same bits at any thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/elementwise.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

template <class T, class P, class C>
void layer_norm_forward(Backend, const LayerNormGeometry& g, const LayerNormForward<T, P, C>& b) {
  const std::int64_t cols = g.cols;
#pragma omp parallel for schedule(static) if (g.rows > 1 && g.rows * cols >= parallel_threshold)
  for (std::int64_t r = 0; r < g.rows; ++r) {
    const T* x = b.x + r * cols;
    const T* in = x;
    if (b.residual) {  // h = x + residual, rounded to T: what a separate addition would store
      const T* res = b.residual + r * cols;
      T* h = b.h + r * cols;
      for (std::int64_t j = 0; j < cols; ++j)
        h[j] = static_cast<T>(static_cast<compute_t<T>>(x[j]) + static_cast<compute_t<T>>(res[j]));
      in = h;
    }
    double sum = 0;
    for (std::int64_t j = 0; j < cols; ++j) sum += static_cast<double>(static_cast<compute_t<T>>(in[j]));
    const double mean = sum / double(cols);
    double squares = 0;
    for (std::int64_t j = 0; j < cols; ++j) {
      const double d = static_cast<double>(static_cast<compute_t<T>>(in[j])) - mean;
      squares += d * d;
    }
    const double rstd = 1.0 / std::sqrt(squares / double(cols) + g.eps);
    const C m = static_cast<C>(mean), s = static_cast<C>(rstd);
    T* y = b.y + r * cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      C v = (static_cast<C>(in[j]) - m) * s;
      if (b.weight) v *= static_cast<C>(b.weight[j]);
      if (b.bias) v += static_cast<C>(b.bias[j]);
      y[j] = static_cast<T>(v);
    }
    if (b.mean) b.mean[r] = m, b.rstd[r] = s;
  }
}

template <class T, class P, class C>
void layer_norm_backward(Backend, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  const std::int64_t rows = g.rows, cols = g.cols;
  const bool columns = b.dweight || b.dbias;
  const std::int64_t runs = columns ? std::clamp<std::int64_t>(rows * cols / 32768, 1, std::min<std::int64_t>(64, rows)) : 1;
  const std::int64_t per_run = (rows + runs - 1) / runs;
  std::vector<double> partial(columns ? static_cast<std::size_t>(runs * 2 * cols) : 0, 0.0);
  const auto w = [&](std::int64_t j) { return b.weight ? static_cast<C>(b.weight[j]) : C(1); };
#pragma omp parallel for schedule(static) if (runs > 1 || (rows > 1 && rows * cols >= parallel_threshold))
  for (std::int64_t run = 0; run < (columns ? runs : rows); ++run) {
    const std::int64_t first = columns ? run * per_run : run;
    const std::int64_t last = columns ? std::min(rows, first + per_run) : run + 1;
    double* dw = columns ? partial.data() + run * 2 * cols : nullptr;
    for (std::int64_t r = first; r < last; ++r) {
      const T* x = b.x + r * cols;
      const T* dy = b.dy + r * cols;
      const C m = b.mean[r], s = b.rstd[r];
      if (b.dx) {
        double a = 0, c = 0;
        for (std::int64_t j = 0; j < cols; ++j) {
          const C xhat = (static_cast<C>(x[j]) - m) * s, wdy = w(j) * static_cast<C>(dy[j]);
          a += double(wdy);
          c += double(wdy) * double(xhat);
        }
        const C mean_wdy = static_cast<C>(a / double(cols)), mean_wdy_xhat = static_cast<C>(c / double(cols));
        T* dx = b.dx + r * cols;
        for (std::int64_t j = 0; j < cols; ++j) {
          const C xhat = (static_cast<C>(x[j]) - m) * s, wdy = w(j) * static_cast<C>(dy[j]);
          C v = s * (wdy - mean_wdy - xhat * mean_wdy_xhat);
          if (b.dh) v += static_cast<C>(b.dh[r * cols + j]);
          dx[j] = static_cast<T>(v);
        }
      }
      if (columns)
        for (std::int64_t j = 0; j < cols; ++j) {
          const double d = double(static_cast<C>(dy[j]));
          dw[j] += d * double((static_cast<C>(x[j]) - m) * s);
          dw[cols + j] += d;
        }
    }
  }
  if (!columns) return;
  for (std::int64_t j = 0; j < cols; ++j) {
    double dw = 0, db = 0;
    for (std::int64_t run = 0; run < runs; ++run) {
      dw += partial[static_cast<std::size_t>(run * 2 * cols + j)];
      db += partial[static_cast<std::size_t>(run * 2 * cols + cols + j)];
    }
    if (b.dweight) b.dweight[j] = static_cast<P>(dw);
    if (b.dbias) b.dbias[j] = static_cast<P>(db);
  }
}

}  // namespace et::detail::cpu_backend
