// A x and A^T y from one pass over A: BiCG's two products (PolyBench's bicg, the
// biconjugate-gradient and QMR solvers), which two matrix-vector products compute by reading
// the matrix twice:
//
//   auto [q, s] = et::matvec_pair(A, p, r);   // q = A p, s = A^T r; A is read once
//
// A is [m, n], x [n], y [m]; any floating type (half and bfloat16 add in float). A row-major
// or column-major A (a transpose) is read in place, another layout is made contiguous first.
// The sums are added in an order fixed by the shapes: the same result every run and, on the
// CPU, at any thread count. With a gradient needed (grad mode on and an input that requires
// one), the two products are recorded matmuls instead, each with its gradient. On a GPU a
// matrix of fewer than 128 columns takes the two products as well (cuBLAS): a warp a row
// would leave most lanes idle. backend/{cpu,cuda}/matvec_pair.hpp hold the loops and kernels.
#pragma once

#include <cstdint>
#include <string>

#include "et/backend/cpu/matvec_pair.hpp"
#include "et/ops/creation.hpp"
#include "et/ops/index.hpp"
#include "et/ops/linalg.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/matvec_pair.hpp"
#endif

namespace et {

/// What matvec_pair gives: A x and A^T y.
template <class T, class D>
struct MatvecPair {
  Tensor<T, 1, D> ax;
  Tensor<T, 1, D> aty;
};

template <class T, class D>
MatvecPair<T, D> matvec_pair(const Tensor<T, 2, D>& a, const Tensor<T, 1, D>& x, const Tensor<T, 1, D>& y) {
  static_assert(detail::is_floating_v<T>, "et: matvec_pair takes floating-point tensors");
  detail::require_defined_input(a, "matvec_pair");
  detail::require_defined_input(x, "matvec_pair");
  detail::require_defined_input(y, "matvec_pair");
  const std::int64_t m = a.size(0), n = a.size(1);
  if (x.size(0) != n || y.size(0) != m)
    throw ShapeError("et: matvec_pair: A of shape " + format_shape(a.shape()) + " needs x of shape [" +
                     std::to_string(n) + "] and y of shape [" + std::to_string(m) + "]; got " +
                     format_shape(x.shape()) + " and " + format_shape(y.shape()));
#if !defined(ET_NO_AUTOGRAD)
  const bool recorded = grad_enabled() && (a.requires_grad() || x.requires_grad() || y.requires_grad());
#else
  constexpr bool recorded = false;
#endif
  if (recorded || m == 0 || n == 0 || n < detail::backend_t<D>::matvec_pair_min_columns)
    return {eval(matmul(a, x)), eval(matmul(a.transpose(0, 1), y))};
  auto ax = Tensor<T, 1, D>::allocate({m}), aty = Tensor<T, 1, D>::allocate({n});
  const Tensor<T, 1, D> xc = x.contiguous(), yc = y.contiguous();
  const auto& s = a.strides();
  if (s[1] == 1 && (s[0] >= n || m == 1)) {  // row-major, rows lda apart
    matvec_pair(detail::backend<D>, a.data(), m == 1 ? n : s[0], xc.data(), yc.data(), ax.data(), aty.data(), m, n);
  } else if (s[0] == 1 && (s[1] >= m || n == 1)) {  // column-major: A^T is row-major, and the roles swap
    matvec_pair(detail::backend<D>, a.data(), n == 1 ? m : s[1], yc.data(), xc.data(), aty.data(), ax.data(), n, m);
  } else {
    const Tensor<T, 2, D> packed = a.contiguous();
    matvec_pair(detail::backend<D>, packed.data(), n, xc.data(), yc.data(), ax.data(), aty.data(), m, n);
    detail::note_stream_uses(packed);
  }
  detail::note_stream_uses(a, xc, yc, ax, aty);
  return {ax, aty};
}

}  // namespace et
