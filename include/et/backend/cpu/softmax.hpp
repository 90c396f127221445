// softmax, log_softmax and logsumexp on the CPU (ops/softmax.hpp): OpenMP over rows, each
// row read once for its statistics (ops/softmax_ops.hpp) and once for its output while it
// is still in cache. Rows accumulate in double whatever the element type.
#pragma once

#include <cstdint>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/elementwise.hpp"
#include "et/ops/softmax_ops.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

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
    for (std::int64_t j = 0; j < length; j += block) {
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

}  // namespace et::detail::cpu_backend
