// softmax, log_softmax and logsumexp along one axis, each ONE kernel (one parallel loop on
// the CPU) that reads every row once for its maximum and sum and, for softmax and
// log_softmax, writes it once (backend/softmax_ops.hpp; rows too long for registers are read
// twice). Any layout and any axis; rows along a unit-stride axis read and write 16 bytes
// at a time on the GPU. An expression argument is evaluated into a tensor first.
//
// Recorded for autograd as one node each (derivatives/softmax.hpp has the gradients).
#pragma once

#include <string>
#include <tuple>

#include "et/backend/cpu/softmax.hpp"
#include "et/backend/softmax_ops.hpp"
#include "et/exec/assign.hpp"
#include "et/ops/reduce.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/softmax.hpp"
#endif

namespace et {

namespace detail {

/// The geometry of the rows of x along axis a, written into y (rank R, or R - 1 / R with
/// the axis dropped / kept for logsumexp).
template <class T, int R, class D, int RO>
RowsGeometry<R - 1> rows_geometry(const Tensor<T, R, D>& x, int a, const Tensor<T, RO, D>& y) {
  RowsGeometry<R - 1> g;
  g.length = x.shape()[static_cast<std::size_t>(a)];
  g.in_step = x.strides()[static_cast<std::size_t>(a)];
  if constexpr (RO == R) g.out_step = y.strides()[static_cast<std::size_t>(a)];
  for (int d = 0, o = 0, yd = 0; d < R; ++d) {
    if (d == a) {
      if constexpr (RO == R) ++yd;  // y keeps the axis (or has it with extent 1)
      continue;
    }
    g.extents[o] = x.shape()[static_cast<std::size_t>(d)];
    g.in_strides[o] = x.strides()[static_cast<std::size_t>(d)];
    g.out_strides[o] = y.strides()[static_cast<std::size_t>(yd)];
    g.rows *= g.extents[o];
    ++o;
    ++yd;
  }
  return g;
}

/// Kind's operation on the rows of e along `axis`, into a new tensor of rank RO.
template <class Kind, int RO, class E>
auto row_operation(const E& e, int axis) {
  require_device_expression<E>();
  require_defined_operand(e);
  using T = typename E::value_type;
  static_assert(is_floating_v<T>, "et: softmax, log_softmax and logsumexp need a floating-point expression; "
                                  "convert with et::cast<float>(...)");
  using D = expression_device_t<E>;
  constexpr int R = E::rank;
  static_assert(R >= 1, "et: softmax, log_softmax and logsumexp need an expression of rank 1 or more");
  const Tensor<T, R, D> x = [&] {
    if constexpr (is_tensor_v<E>) return e;
    else return eval(e);
  }();
  const int a = normalize_axis(axis, R, Kind::name, format_shape(x.shape()));
  if (a < 0 || a >= R) __builtin_unreachable();  // normalize_axis threw; tells g++ (-Warray-bounds)
  Shape<RO> out_shape{};
  for (int d = 0, o = 0; d < R; ++d) {
    if (d != a) out_shape[static_cast<std::size_t>(o++)] = x.shape()[static_cast<std::size_t>(d)];
    else if (RO == R) out_shape[static_cast<std::size_t>(o++)] = Kind::per_element ? x.shape()[static_cast<std::size_t>(d)] : 1;
  }
  auto y = Tensor<T, RO, D>::allocate(out_shape);
  const RowsGeometry<R - 1> g = rows_geometry(x, a, y);
  if (y.numel() > 0) softmax_rows_into(backend<D>, Kind{}, x, y, g);  // backend/backend.hpp
  record_row_op<Kind>(y, x, a);
  return y;
}

}  // namespace detail

/// exp(e) / sum(exp(e)) along `axis`, with the maximum subtracted first (never overflows).
/// Rank R; one kernel.
template <Expression E>
auto softmax(const E& e, int axis) {
  return detail::row_operation<detail::SoftmaxKind, E::rank>(e, axis);
}

/// log(softmax(e)) along `axis`, computed as e - logsumexp(e): accurate where softmax
/// underflows to 0. Rank R; one kernel.
template <Expression E>
auto log_softmax(const E& e, int axis) {
  return detail::row_operation<detail::LogSoftmaxKind, E::rank>(e, axis);
}

/// log(sum(exp(e))) along `axis`, as m + log(sum(exp(e - m))) with m the (finite) maximum,
/// so large inputs neither overflow nor lose precision; a slice of all -inf gives -inf.
/// Rank R - 1, or R with `true` (keepdim); one kernel.
template <Expression E>
auto logsumexp(const E& e, int axis) {
  return detail::row_operation<detail::LogSumExpKind, E::rank - 1>(e, axis);
}
template <Expression E>
auto logsumexp(const E& e, int axis, KeepDim) {
  return detail::row_operation<detail::LogSumExpKind, E::rank>(e, axis);
}

}  // namespace et
