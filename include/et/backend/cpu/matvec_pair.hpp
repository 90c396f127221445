// et::matvec_pair on the CPU (ops/matvec_pair.hpp): A x and A^T y from one pass over a
// row-major A. The rows are cut into at most 64 runs, a fixed number for the problem (not
// the thread count), each run's partial of A^T y kept apart and the partials added in run
// order: the result is the same at any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/elementwise.hpp"
#include "et/types.hpp"

namespace et::detail::cpu_backend {

template <class T>
void matvec_pair(Backend, const T* a, std::int64_t lda, const T* x, const T* y, T* ax, T* aty, std::int64_t m,
                 std::int64_t n) {
  using C = compute_t<T>;
  const std::int64_t runs = std::clamp<std::int64_t>(m * n / (std::int64_t{1} << 16), 1, std::min<std::int64_t>(64, m));
  const std::int64_t rows_per_run = (m + runs - 1) / runs;
  std::vector<C> xs(static_cast<std::size_t>(n)), partial(static_cast<std::size_t>(runs * n), C(0));
  for (std::int64_t j = 0; j < n; ++j) xs[std::size_t(j)] = static_cast<C>(x[j]);
#pragma omp parallel for schedule(static) if (runs > 1 && m * n >= parallel_threshold)
  for (std::int64_t run = 0; run < runs; ++run) {
    C* s = partial.data() + run * n;
    const C* xv = xs.data();
    for (std::int64_t i = run * rows_per_run; i < std::min(m, (run + 1) * rows_per_run); ++i) {
      const T* row = a + i * lda;
      const C yi = static_cast<C>(y[i]);
      C q = C(0);
#pragma omp simd reduction(+ : q)
      for (std::int64_t j = 0; j < n; ++j) {
        const C v = static_cast<C>(row[j]);
        q += v * xv[j];
        s[j] += v * yi;
      }
      ax[i] = static_cast<T>(q);
    }
  }
  for (std::int64_t j = 0; j < n; ++j) {
    C total = C(0);
    for (std::int64_t run = 0; run < runs; ++run) total += partial[std::size_t(run * n + j)];
    aty[j] = static_cast<T>(total);
  }
}

}  // namespace et::detail::cpu_backend
