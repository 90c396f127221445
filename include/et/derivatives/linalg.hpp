// Recording matrix products. `z = matmul(a, b)` is one node whose backward is two GEMMs
// (cuBLASLt / Eigen, transposes read in place): da = dz @ b^T, db = a^T @ dz, each summed
// over the batch axes its operand was broadcast along. An expression that holds products
// (`relu(matmul(x, w) + bias)`) records each product as such a node and the elementwise
// rest as one fused node (derivatives/fused.hpp). Where an optimizer folds its step into the
// backward (optim/optimizer.hpp), a weight's gradient GEMM updates the weight in place.
#pragma once

#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "et/derivatives/fused.hpp"
#include "et/ops/linalg.hpp"

namespace et::detail {

template <class T, int R, class D, class A, class B>
void record_matmul_into(Tensor<T, R, D>& dst, const MatmulExpr<A, B>& product);

template <class T, int R, class D, class A, class B, int S>
void record_matmul(Tensor<T, R, D>& dst, const MatmulExpr<A, B, S>& product) {
  using Product = MatmulExpr<A, B, S>;
  if constexpr (S >= 0) {  // a matrix-vector product: the matrix product recorded, then read as a vector
    const auto full = eval(MatmulExpr<A, B>(product.lhs(), product.rhs(), product.math_mode()));
    assign(dst, full.squeeze(S));
  } else if constexpr (!std::is_same_v<typename Product::value_type, T> || Product::rank != R) {
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

/// The update of `input` with its gradient, l @ r, folded in (FoldedUpdate), when its
/// optimizer offers one and one GEMM can apply it (input <- beta * input + alpha * l @ r):
/// for a matrix that is not broadcast, read in place (a weight, or its transpose).
template <class Needs, class In, class L, class Rt>
std::optional<FoldedUpdate> fold_offer(const Needs& needs, std::size_t k, const In& input, const L& l, const Rt& r) {
  if constexpr (In::rank != 2 || L::rank != 2 || Rt::rank != 2) {
    return std::nullopt;
  } else {
    if (!matrix_view(input) || input.storage() == l.storage() || input.storage() == r.storage()) return std::nullopt;
    return needs.fold(k, input);
  }
}

template <class In, class L, class Rt>
void fold_product(const FoldedUpdate& update, const In& input, const L& l, const Rt& r, MathMode mode) {
  run_gemm(l, r, input, mode, GemmEpilogue::none, {}, GemmScale{update.alpha, update.beta});
  update.done();
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
    const auto a_t = a.transpose(-2, -1);
    const auto b_t = b.transpose(-2, -1);
    auto grad_b = [&] { return sum_to(product_laid_like(b, a_t, g, mode), b.shape()); };
    // An operand its optimizer updates in place comes last: the other's gradient reads it.
    if (needs[0]) {
      if (const auto update = fold_offer(needs, 0, a, g, b_t)) {
        if (needs[1]) db = grad_b();
        fold_product(*update, a, g, b_t, mode);
        return std::tuple{da, db};
      }
      da = sum_to(product_laid_like(a, g, b_t, mode), a.shape());
    }
    if (needs[1]) {
      if (const auto update = fold_offer(needs, 1, b, a_t, g)) fold_product(*update, b, a_t, g, mode);
      else db = grad_b();
    }
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
