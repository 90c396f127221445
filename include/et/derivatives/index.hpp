// Recording the indexing operations and scans (ops/index.hpp, ops/scan.hpp), one node each:
//   gather, index_select  dx = scatter_add of g into zeros at the positions read
//   scatter_add           dx = g; dsrc = gather of g at the positions written (zeros
//                         outside the index's shape)
//   flip                  dx = flip(g) along the same axes
//   cumsum                dx = the sums of g from the end: flip(cumsum(flip(g)))
//   sort, topk            dx = g's values sent back to the positions they came from
// Each runs on the device's own generator or scatter kernels, like the forward.
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "et/autograd/graph.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/index.hpp"
#include "et/ops/scan.hpp"

namespace et::detail {

/// Attaches to `out` the node of an operation on `in` (when it needs a gradient).
template <class T, int RO, class D, int RI, class Backward, class... Saved>
void record_index_op([[maybe_unused]] Tensor<T, RO, D>& out, [[maybe_unused]] const char* name,
                     [[maybe_unused]] const Tensor<T, RI, D>& in, [[maybe_unused]] Backward backward,
                     [[maybe_unused]] const Saved&... saved) {
  if constexpr (records_on<D>) {
    if (records(in)) record_op(out, name, std::tie(in), std::move(backward), saved...);
  }
}

/// Records out = gather(x, a, index) for autograd: x's gradient is the output's, added
/// back at the positions it was read from.
template <class T, int R, class D>
void record_gather(Tensor<T, R, D>& out, const char* name, const Tensor<T, R, D>& x, int a,
                   const Tensor<std::int64_t, R, D>& index) {
  record_index_op(
      out, name, x,
      [a, shape = x.shape()](const auto& g, const auto&, const auto& idx) {
        return std::tuple{scatter_add_unchecked(zeros<T>(D{}, shape), a, idx, g)};
      },
      index.detach());
}

/// Records out = scatter_add(x, a, index, src) for autograd.
template <class T, int R, class D>
void record_scatter_add([[maybe_unused]] Tensor<T, R, D>& out, [[maybe_unused]] const Tensor<T, R, D>& x,
                        [[maybe_unused]] const Tensor<T, R, D>& src, [[maybe_unused]] int a,
                        [[maybe_unused]] const Tensor<std::int64_t, R, D>& index) {
  if constexpr (records_on<D>) {
    if (!records(x, src)) return;
    auto backward = [a, src_shape = src.shape()](const auto& g, const auto& needs, const auto& idx) {
      Tensor<T, R, D> dsrc;
      if (needs[1]) {  // src's elements outside index's shape took no part
        dsrc = zeros<T>(D{}, src_shape);
        Tensor<T, R, D> part = dsrc;
        for (int d = 0; d < R; ++d) part = part.slice(d, 0, idx.size(d));
        std::move(part) = gather_unchecked(g, a, idx);
      }
      return std::tuple{g, dsrc};
    };
    record_op(out, "scatter_add", std::tie(x, src), backward, index.detach());
  }
}

/// Records out = flip(x) along the (normalized) axes for autograd.
template <class T, int R, class D>
void record_flip(Tensor<T, R, D>& out, const Tensor<T, R, D>& x, const std::vector<int>& axes) {
  record_index_op(out, "flip", x, [axes](const auto& g, const auto&) { return std::tuple{flip_unchecked(g, axes)}; });
}

/// Records the rows' cumulative sums `out` of `in` ([rows, length]) for autograd.
template <class T, class D>
void record_cumsum(Tensor<T, 2, D>& out, const Tensor<T, 2, D>& in) {
  record_index_op(out, "cumsum", in, [](const auto& g, const auto&) {
    // d/dx_j of sum_k>=j: the sums of g from the end.
    return std::tuple{flip(cumsum_of_rows(flip(g, 1)), 1)};
  });
}

/// Records the sorted rows `values` of `in` ([rows, length]) for autograd; `at` holds where
/// each came from.
template <class T, class D>
void record_sort(Tensor<T, 2, D>& values, const Tensor<T, 2, D>& in, const Tensor<std::int64_t, 2, D>& at) {
  record_index_op(
      values, "sort", in,
      [shape = in.shape()](const auto& g, const auto&, const auto& positions) {
        return std::tuple{scatter_add_unchecked(zeros<T>(D{}, shape), 1, positions, g)};
      },
      at);
}

}  // namespace et::detail
