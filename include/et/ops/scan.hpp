// cumsum, sort and topk along an axis. The axis is moved last and made contiguous (a copy
// unless it already is), the rows are scanned or sorted, and the result is laid out like
// the input again. On the CPU: OpenMP over rows (backend/cpu/index.hpp). On a CUDA device:
// CUB (backend/cuda/scan.hpp), whose headers cost about 6 s of nvcc time per file, so they
// come only where the file asks for them: `#define ET_WITH_CUB 1` before including
// etensor (or -DET_WITH_CUB=1); without it, a CUDA cumsum, sort or topk is a compile
// error saying so.
//
//   auto c = et::cumsum(x, 1);                       // c[i][j] = x[i][0] + ... + x[i][j]
//   auto [values, indices] = et::sort(x, -1);        // ascending, stable; NaN last
//   auto [top, at] = et::topk(x, 5, -1);             // the 5 largest, largest first
//
// Each is recorded for autograd (derivatives/index.hpp): cumsum's gradient is the reversed
// cumulative sum of the output's, sort's and topk's values send theirs back to the
// positions they came from.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "et/backend/cpu/index.hpp"
#include "et/ops/index.hpp"

#if defined(ET_DEVICE_COMPILER) && defined(ET_WITH_CUB)
#include "et/backend/cuda/scan.hpp"
#elif defined(ET_DEVICE_COMPILER)
namespace et::detail::cuda_backend {
template <class D>
struct scan_needs_cub {
  static_assert(never<D>,
                "et: cumsum, sort and topk on a CUDA device use CUB, whose headers et/et.hpp leaves out "
                "(about 6 s of nvcc time per file): #define ET_WITH_CUB 1 before including etensor");
};
template <int I, class... Operands>
void cumsum_rows(Backend<I>, const Operands&...) {
  [[maybe_unused]] scan_needs_cub<Cuda<I>> report;
}
template <int I, class... Operands>
void sort_rows(Backend<I>, const Operands&...) {
  [[maybe_unused]] scan_needs_cub<Cuda<I>> report;
}
}  // namespace et::detail::cuda_backend
#endif

namespace et {

/// What sort and topk give: the values and, for each, its position along the axis.
template <class T, int R, class D>
struct Sorted {
  Tensor<T, R, D> values;
  Tensor<std::int64_t, R, D> indices;
};

namespace detail {

/// x with axis a moved last, contiguous, as [rows, length].
template <class T, int R, class D>
Tensor<T, 2, D> as_rows(const Tensor<T, R, D>& x, int a) {
  const Tensor<T, R, D> moved = x.transpose(a, R - 1).contiguous();
  const std::int64_t length = x.size(a);
  return moved.reshape(std::array<std::int64_t, 2>{length > 0 ? moved.numel() / length : 0, length});
}

/// Rows back in x's layout: the inverse of as_rows, contiguous.
template <int R, class T, class D>
Tensor<T, R, D> from_rows(const Tensor<T, 2, D>& rows, const Shape<R>& shape, int a) {
  Shape<R> moved = shape;
  std::swap(moved[a], moved[R - 1]);
  const Tensor<T, R, D> laid = rows.reshape(moved).transpose(a, R - 1);
  return a == R - 1 ? laid : laid.contiguous();
}

template <class T, class D>
Tensor<cumsum_t<T>, 2, D> cumsum_of_rows(const Tensor<T, 2, D>& rows) {
  auto out = Tensor<cumsum_t<T>, 2, D>::allocate(rows.shape());
  if (out.numel() > 0) cumsum_rows(backend<D>, rows.data(), out.data(), rows.size(0), rows.size(1));
  note_stream_uses(rows, out);
  return out;
}

/// The rows sorted: where each value comes from (the backend), then the values read there.
template <class T, class D>
Sorted<T, 2, D> sort_of_rows(const Tensor<T, 2, D>& rows, bool descending) {
  auto indices = Tensor<std::int64_t, 2, D>::allocate(rows.shape());
  if (rows.numel() > 0) sort_rows(backend<D>, rows.data(), indices.data(), rows.size(0), rows.size(1), descending);
  note_stream_uses(rows, indices);
  return {gather_unchecked(rows, 1, indices), indices};
}

}  // namespace detail

/// The inclusive cumulative sum along `axis`: floating types keep their type (half and
/// bfloat16 add in float, float and double in double on the CPU), integers and bool give
/// int64. Differentiable.
template <class T, int R, class D>
Tensor<detail::cumsum_t<T>, R, D> cumsum(const Tensor<T, R, D>& x, int axis) {
  static_assert(R >= 1, "et: cumsum runs along an axis, which a 0-d tensor lacks");
  detail::require_defined_input(x, "cumsum");
  const int a = detail::normalize_axis(axis, R, "cumsum", format_shape(x.shape()));
  const Tensor<T, 2, D> in = detail::as_rows(x, a);
  Tensor<detail::cumsum_t<T>, 2, D> rows = detail::cumsum_of_rows(in);
  if constexpr (std::is_same_v<detail::cumsum_t<T>, T>) detail::record_cumsum(rows, in);
  return detail::from_rows<R>(rows, x.shape(), a);
}

/// x sorted along `axis` (ascending unless `descending`; stable; NaN greater than every
/// number), with each value's position along the axis. Differentiable in the values.
template <class T, int R, class D>
Sorted<T, R, D> sort(const Tensor<T, R, D>& x, int axis = -1, bool descending = false) {
  static_assert(R >= 1, "et: sort runs along an axis, which a 0-d tensor lacks");
  detail::require_defined_input(x, "sort");
  const int a = detail::normalize_axis(axis, R, "sort", format_shape(x.shape()));
  const Tensor<T, 2, D> in = detail::as_rows(x, a);
  Sorted<T, 2, D> rows = detail::sort_of_rows(in, descending);
  detail::record_sort(rows.values, in, rows.indices);
  return {detail::from_rows<R>(rows.values, x.shape(), a), detail::from_rows<R>(rows.indices, x.shape(), a)};
}

/// The k largest (or, with largest = false, smallest) values along `axis`, in order, with
/// their positions; 0 <= k <= the axis' extent. Differentiable in the values.
template <class T, int R, class D>
Sorted<T, R, D> topk(const Tensor<T, R, D>& x, std::int64_t k, int axis = -1, bool largest = true) {
  static_assert(R >= 1, "et: topk runs along an axis, which a 0-d tensor lacks");
  detail::require_defined_input(x, "topk");
  const int a = detail::normalize_axis(axis, R, "topk", format_shape(x.shape()));
  if (k < 0 || k > x.size(a))
    throw ShapeError("et: topk: k = " + std::to_string(k) + " outside [0, " + std::to_string(x.size(a)) +
                     "] for axis " + std::to_string(a) + " of a tensor of shape " + format_shape(x.shape()));
  Sorted<T, R, D> all = sort(x, a, largest);
  return {all.values.slice(a, 0, k).contiguous(), all.indices.slice(a, 0, k).contiguous()};
}

}  // namespace et
