// Recording matrix products. `z = matmul(a, b)` is one node whose backward is two GEMMs
// (cuBLASLt / Eigen, transposes read in place): da = dz @ b^T, db = a^T @ dz, each summed
// over the batch axes its operand was broadcast along. An expression that holds products
// (`relu(matmul(x, w) + bias)`) records each product as such a node and the elementwise
// rest as one fused node (autograd/fused.hpp).
#pragma once

#include <memory>
#include <tuple>
#include <utility>

#include "et/autograd/fused.hpp"
#include "et/ops/linalg.hpp"

namespace et::detail {

template <class T, int R, class D, class A, class B>
void record_matmul_into(Tensor<T, R, D>& dst, const MatmulExpr<A, B>& product);

template <class T, int R, class D, class A, class B>
void record_matmul(Tensor<T, R, D>& dst, const MatmulExpr<A, B>& product) {
  using Product = MatmulExpr<A, B>;
  if constexpr (!std::is_same_v<typename Product::value_type, T> || Product::rank != R) {
    assign(dst, eval(product));  // the product in its own type, then converted (recorded too)
    return;
  } else {
    record_matmul_into(dst, product);
  }
}

/// True when t's last two axes are stored transposed (column-major), as a weight w used as
/// w.transpose(0, 1) is.
template <class T, int R, class D>
bool transposed_layout(const Tensor<T, R, D>& t) {
  const auto& n = t.shape();
  const auto& s = t.strides();
  return n[R - 2] > 1 && n[R - 1] > 1 && s[R - 2] == 1 && s[R - 1] == n[R - 2];
}

/// matmul(l, r), laid out as `like` (an operand of the same rank, whose gradient this is):
/// for a transposed operand, computed as (r^T l^T)^T, so that the gradient of a weight used
/// as w.transpose(0, 1) reaches w contiguous, with no transposing copy of it.
template <class Like, class L, class R>
auto product_laid_like(const Like& like, const L& l, const R& r, MathMode mode) {
  using P = decltype(eval(matmul(l, r, mode)));
  if constexpr (P::rank == Like::rank && P::rank >= 2) {
    if (transposed_layout(like)) return P(eval(matmul(r.transpose(-2, -1), l.transpose(-2, -1), mode)).transpose(-2, -1));
  }
  return eval(matmul(l, r, mode));
}

template <class T, int R, class D, class A, class B>
void record_matmul_into(Tensor<T, R, D>& dst, const MatmulExpr<A, B>& product) {
  const auto a = materialize(product.lhs());  // operand expressions are recorded evaluations
  const auto b = materialize(product.rhs());
  const MathMode mode = product.math_mode();
  auto backward = [mode](const auto& g, const auto& needs, const auto& a, const auto& b) {
    using GA = std::remove_cvref_t<decltype(a)>;
    using GB = std::remove_cvref_t<decltype(b)>;
    GA da;
    GB db;
    if (needs[0]) da = sum_to(product_laid_like(a, g, b.transpose(-2, -1), mode), a.shape());
    if (needs[1]) db = sum_to(product_laid_like(b, a.transpose(-2, -1), g, mode), b.shape());
    return std::tuple{da, db};
  };
  const Tensor<T, R, D>* overwritten = dst.defined() ? &dst : nullptr;  // `a = matmul(a, b)`
  auto node = make_op_node<Tensor<T, R, D>>("matmul", std::tie(a, b), backward, saved_before_write(a, overwritten),
                                            saved_before_write(b, overwritten));
  evaluate(dst, MatmulExpr<std::remove_cvref_t<decltype(a)>, std::remove_cvref_t<decltype(b)>>(a, b, mode));
  attach(dst, std::move(node));
}

/// The expression with every matmul node replaced by its recorded product.
template <class E>
auto lower_recorded(const E& e) {
  if constexpr (is_matmul_v<E>) return eval(e);
  else return e;
}
template <class Op, class... Cs>
auto lower_recorded(const MapExpr<Op, Cs...>& e) {
  return std::apply(
      [](const Cs&... children) {
        return MapExpr<Op, std::remove_cvref_t<decltype(lower_recorded(children))>...>(lower_recorded(children)...);
      },
      e.children());
}

}  // namespace et::detail
