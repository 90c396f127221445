// How an elementwise assignment runs on the CPU: one OpenMP-parallel loop over the
// output. The contiguous path is a plain `parallel for simd` loop the compiler
// vectorizes; other layouts split the index range per thread and walk coordinates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "et/expr/evaluator.hpp"

namespace et::detail::cpu_backend {

/// Below this many elements a parallel region costs more than it saves.
inline constexpr std::int64_t parallel_threshold = std::int64_t{1} << 15;

template <class Index, class T, int R, class E>
void run_loop(const Tensor<T, R, Cpu>& dst, const E& expr, bool linear) {
  const auto reader = make_reader<R, Index>(expr, dst.shape());
  const auto writer = make_writer<Index>(dst);
  const Index n = static_cast<Index>(dst.numel());
  if (linear) {
#pragma omp parallel for simd if (n >= parallel_threshold) schedule(static)
    for (Index i = 0; i < n; ++i) writer.linear(i, reader.linear(i));
    return;
  }
  const auto extents = to_coord<Index>(dst.shape());
#pragma omp parallel if (n >= parallel_threshold)
  {
    Index threads = 1, thread = 0;
#if defined(_OPENMP)
    threads = static_cast<Index>(omp_get_num_threads());
    thread = static_cast<Index>(omp_get_thread_num());
#endif
    const Index chunk = (n + threads - 1) / threads;
    const Index begin = std::min<Index>(n, chunk * thread);
    const Index end = std::min<Index>(n, begin + chunk);
    Coord<R, Index> c = unravel<R, Index>(begin, extents);
    for (Index i = begin; i < end; ++i) {
      writer.strided(c, reader.strided(i, c));
      for (int d = R - 1; d >= 0; --d) {  // advance the coordinate like an odometer
        if (++c.c[d] < extents.c[d]) break;
        c.c[d] = 0;
      }
    }
  }
}

template <class T, int R, class E>
void run_elementwise(const Tensor<T, R, Cpu>& dst, const E& expr) {
  const ElementwisePlan plan = plan_elementwise(dst, expr);
  if (plan.max_index <= std::numeric_limits<std::int32_t>::max()) run_loop<std::int32_t>(dst, expr, plan.linear);
  else run_loop<std::int64_t>(dst, expr, plan.linear);
}

}  // namespace et::detail::cpu_backend
