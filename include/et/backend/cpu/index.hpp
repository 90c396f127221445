// scatter_add, cumsum and sort on the CPU (ops/index.hpp, ops/scan.hpp). cumsum and sort
// take rows of unit stride (the operations move the axis last) and run OpenMP over rows;
// scatter_add runs in one thread, in index order, so repeated indices add up in the same
// order every run.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>

#include "et/backend/backend.hpp"
#include "et/backend/cpu/elementwise.hpp"
#include "et/backend/index_ops.hpp"

namespace et::detail::cpu_backend {

/// a + b; signed integers wrap around on overflow as PyTorch's sums do, through unsigned
/// arithmetic (a signed overflow is undefined behaviour).
template <class A>
A wrapping_add(A a, A b) {
  if constexpr (std::is_integral_v<A> && std::is_signed_v<A>) {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <class T, int R>
void scatter_add_into(Backend, T* out, const std::int64_t* index, const T* src, const ScatterGeometry<R>& g) {
  for (std::int64_t i = 0; i < g.count; ++i) {
    std::int64_t at_index = 0, at_src = 0, at_out = 0;
    g.offsets(i, at_index, at_src, at_out);
    T& target = out[at_out + index[at_index] * g.axis_stride];
    target = static_cast<T>(wrapping_add(static_cast<compute_t<T>>(target), static_cast<compute_t<T>>(src[at_src])));
  }
}

/// Inclusive sums along each of `rows` rows of `length` elements (contiguous), added in
/// double (floating types) or int64 (wrapping around).
template <class T, class Out>
void cumsum_rows(Backend, const T* in, Out* out, std::int64_t rows, std::int64_t length) {
  using Acc = std::conditional_t<is_floating_v<T>, double, std::int64_t>;
#pragma omp parallel for schedule(static) if (rows * length >= parallel_threshold)
  for (std::int64_t r = 0; r < rows; ++r) {
    Acc sum = 0;
    for (std::int64_t j = r * length; j < (r + 1) * length; ++j) {
      sum = wrapping_add(sum, static_cast<Acc>(static_cast<compute_t<T>>(in[j])));
      out[j] = static_cast<Out>(static_cast<compute_t<Out>>(sum));
    }
  }
}

/// Where each value of each row comes from when the row is sorted (stable; NaN greatest).
template <class T>
void sort_rows(Backend, const T* in, std::int64_t* indices, std::int64_t rows, std::int64_t length, bool descending) {
#pragma omp parallel for schedule(static) if (rows * length >= parallel_threshold)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * length;
    std::int64_t* order = indices + r * length;
    std::iota(order, order + length, std::int64_t{0});
    std::stable_sort(order, order + length, [&](std::int64_t a, std::int64_t b) {
      return sorts_before(static_cast<compute_t<T>>(row[a]), static_cast<compute_t<T>>(row[b]), descending);
    });
  }
}

}  // namespace et::detail::cpu_backend
