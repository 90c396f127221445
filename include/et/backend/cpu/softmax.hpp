// softmax, log_softmax and logsumexp on the CPU (ops/softmax.hpp): OpenMP over rows, each
// row read once for its statistics (backend/softmax_ops.hpp) and once for its output while it
// is still in cache. Rows accumulate in double whatever the element type (a contiguous float
// row's terms in float first: float_row_stats). Also
// cross_entropy's forward (nn/loss.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/elementwise.hpp"
#include "et/backend/softmax_ops.hpp"
#include "et/runtime/error.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

/// A contiguous float row's statistics in two vectorized passes: its maximum, then the sum
/// of exp(x - shift) in float (libmvec's expf, 4 ulp) added up in double a block at a time,
/// at about 20x the speed of the double loop below. False, having done nothing, where the
/// shift is not finite (a row of -inf or NaN alone under a kind that shifts by them): the
/// double loop handles those.
template <class Kind>
bool float_row_stats(const float* x, std::int64_t length, RowStats<Kind, double>& stats) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (std::int64_t j = 0; j < length; ++j) m = x[j] > m ? x[j] : m;  // NaN ignored, as fmax
  const double shift = RowStats<Kind, double>::shift(m);
  if (!(shift - shift == 0)) return false;
  const float s = static_cast<float>(shift);
  double total = 0;
  constexpr std::int64_t block = 1024;
  for (std::int64_t first = 0; first < length; first += block) {
    const std::int64_t last = std::min(length, first + block);
    float part = 0;
#pragma omp simd reduction(+ : part)
    for (std::int64_t j = first; j < last; ++j) part += ::expf(x[j] - s);
    total += part;
  }
  stats.max = m;
  stats.sum = total;
  return true;
}

template <class Kind, class T, int R, int RO, class D, int R1>  // D: Cpu or Pinned
void softmax_rows_into(Backend, Kind, const Tensor<T, R, D>& input, const Tensor<T, RO, D>& output,
                       const RowsGeometry<R1>& g) {
  const T* in = input.data();
  T* out = output.data();
  using Acc = double;
  constexpr int block = 16;
  const std::int64_t length = g.length, step = g.in_step;
  auto value = [](T x) { return static_cast<Acc>(static_cast<compute_t<T>>(x)); };
#pragma omp parallel for schedule(static) if (g.rows * g.length >= parallel_threshold)
  for (std::int64_t row = 0; row < g.rows; ++row) {
    std::int64_t in_offset = 0, out_offset = 0;
    g.offsets(row, in_offset, out_offset);
    const T* x = in + in_offset;
    RowStats<Kind, Acc> stats;
    bool done = false;
    if constexpr (std::is_same_v<T, float>) done = step == 1 && float_row_stats(x, length, stats);
    for (std::int64_t j = 0; !done && j < length; j += block) {
      Acc values[block];
      for (int k = 0; k < block; ++k)
        values[k] = j + k < length ? value(x[(j + k) * step]) : -std::numeric_limits<Acc>::infinity();
      stats.add(values);
    }
    const auto output = stats.output();
    if constexpr (Kind::per_element) {
      T* y = out + out_offset;
      for (std::int64_t j = 0; j < length; ++j)
        y[j * g.out_step] = static_cast<T>(static_cast<compute_t<T>>(output(value(x[j * step]))));
    } else {
      out[out_offset] = static_cast<T>(static_cast<compute_t<T>>(output.log_sum));
    }
  }
}

/// cross_entropy's forward: lse[i] = logsumexp of row i of x (rows as `g` says), and loss
/// = mean(lse - x[i][labels[i]]), summed in double in the rows' order. Throws et::Error for
/// a label outside [0, C), checked before anything is computed.
template <class T, class D>
void cross_entropy_into(Backend, const Tensor<T, 2, D>& x, const Tensor<std::int64_t, 1, D>& labels,
                        const Tensor<T, 1, D>& lse, const Tensor<T, 0, D>& loss, const RowsGeometry<1>& g) {
  const std::int64_t* label = labels.data();
  const std::int64_t label_stride = labels.strides()[0];
  for (std::int64_t i = 0; i < g.rows; ++i)
    if (label[i * label_stride] < 0 || label[i * label_stride] >= g.length)
      throw Error("et: cross_entropy: a label is outside [0, " + std::to_string(g.length) + ")");
  softmax_rows_into(Backend{}, LogSumExpKind{}, x, lse, g);
  double total = 0;
  for (std::int64_t i = 0; i < g.rows; ++i) {
    const T picked = x.data()[i * g.in_strides[0] + label[i * label_stride] * g.in_step];
    total += static_cast<double>(static_cast<compute_t<T>>(lse.data()[i * g.out_strides[0]])) -
             static_cast<double>(static_cast<compute_t<T>>(picked));
  }
  *loss.data() = static_cast<T>(static_cast<compute_t<T>>(total / static_cast<double>(g.rows)));
}

}  // namespace et::detail::cpu_backend
