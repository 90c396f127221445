// Matrix products: et::matmul builds a lazy node; assigning an expression that holds one
// runs the product through cuBLASLt (CUDA) or Eigen (CPU), never through etensor's own
// kernels.
//
// Lowering (what an assignment `dst = expr` does when expr holds matmul nodes):
//  1. On a CUDA device, the patterns
//         matmul(x, w) + bias      bias + matmul(x, w)
//         relu(matmul(x, w) + bias)        relu(matmul(x, w))
//         gelu_tanh(matmul(x, w) + bias)   gelu_tanh(matmul(x, w))
//     (x and w tensors or views, bias a 1-D tensor of length N, all of dst's element type,
//     dst of the product's shape with rows of unit stride) are ONE cublasLtMatmul call with
//     the matching epilogue (BIAS, RELU_BIAS, GELU_BIAS, RELU, GELU), computed in float
//     and rounded once. cuBLASLt's GELU is the tanh approximation, so only et::gelu_tanh
//     maps to it; et::gelu (exact, with erf) takes step 2.
//  2. Otherwise every matmul node runs as one GEMM into a tensor: straight into dst when
//     it has the product's shape and type and nothing else in the expression reads dst's
//     storage, else into a temporary. The rest of the expression, now elementwise only, is
//     then the usual single fused kernel (none at all when nothing is left, as in
//     `z = matmul(x, w)`). The CPU always takes this step, so both devices compute the
//     same function (the fused epilogue rounds once where step 2 rounds the product to
//     the element type first; for float the two agree to rounding).
// Operands: any tensor whose matrices have a unit stride along rows or columns (transposed
// views, row slices, batches with any batch stride, expand()ed batches) is handed to the
// library as it is, as a transpose flag and a leading dimension; other layouts (a stepped
// column slice, an expanded matrix) are made contiguous first, and non-tensor expressions
// are evaluated first (one elementwise kernel each).
//
// A matmul inside a reduction is not lowered: evaluate it first, et::sum(et::eval(p)).
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>
#include <type_traits>

#include "et/ops/matmul_node.hpp"

namespace et {
namespace detail {

// --- Lowering -----------------------------------------------------------------------

/// True when some tensor of the expression (matmul operands included) uses `storage`.
/// A node type this file does not know counts as reading it.
template <class E>
bool reads_storage(const E& e, const std::shared_ptr<void>& storage) {
  if constexpr (is_tensor_v<E>) {
    return e.storage() == storage;
  } else if constexpr (is_matmul_v<E>) {
    return reads_storage(e.lhs(), storage) || reads_storage(e.rhs(), storage);
  } else if constexpr (is_map_v<E>) {
    return std::apply([&](const auto&... children) { return (reads_storage(children, storage) || ...); },
                      e.children());
  } else if constexpr (has_no_storage_v<E>) {
    return false;
  } else {
    return true;
  }
}

/// The expression with every matmul node replaced by its product, a tensor. The first
/// product of dst's type and shape goes straight into *into (then into becomes null).
template <class T, int R, class D, class E>
auto lower(const E& e, Tensor<T, R, D>*& into);

template <class T, int R, class D, class A, class B, int S>
auto evaluate_matmul(const MatmulExpr<A, B, S>& node, Tensor<T, R, D>*& into) {
  using Node = MatmulExpr<A, B, S>;
  using V = typename Node::value_type;
  using DN = typename Node::device_type;
  const auto a = materialize(node.lhs());
  const auto b = materialize(node.rhs());
  if constexpr (std::is_same_v<V, T> && Node::rank == R && std::is_same_v<DN, D>) {
    if (into != nullptr && into->shape() == node.shape()) {
      const Tensor<T, R, D> out = *into;
      into = nullptr;
      run_gemm(a, b, product_target<S>(out), node.math_mode());
      return out;
    }
  }
  const auto out = Tensor<V, Node::rank, DN>::allocate(node.shape());
  run_gemm(a, b, product_target<S>(out), node.math_mode());
  return out;
}

template <class T, int R, class D, class Op, class... Cs>
auto lower_map(const MapExpr<Op, Cs...>& e, Tensor<T, R, D>*& into) {
  return std::apply(
      [&](const Cs&... children) {
        return MapExpr<Op, std::remove_cvref_t<decltype(lower(children, into))>...>(lower(children, into)...);
      },
      e.children());
}

template <class T, int R, class D, class E>
auto lower(const E& e, Tensor<T, R, D>*& into) {
  if constexpr (!contains_matmul_v<E>) return e;
  else if constexpr (is_matmul_v<E>) return evaluate_matmul(e, into);
  else return lower_map(e, into);
}

// --- Fused epilogues (CUDA) ----------------------------------------------------------

/// matmul(x, w) + bias or bias + matmul(x, w), bias a 1-D tensor.
template <class E>
struct BiasSum {
  static constexpr bool matches = false;
};
template <class A, class B, class V, class D>
struct BiasSum<MapExpr<Add, MatmulExpr<A, B>, Tensor<V, 1, D>>> {
  static constexpr bool matches = true;
  using Expr = MapExpr<Add, MatmulExpr<A, B>, Tensor<V, 1, D>>;
  static const MatmulExpr<A, B>& matmul(const Expr& e) { return std::get<0>(e.children()); }
  static const Tensor<V, 1, D>& bias(const Expr& e) { return std::get<1>(e.children()); }
};
template <class A, class B, class V, class D>
struct BiasSum<MapExpr<Add, Tensor<V, 1, D>, MatmulExpr<A, B>>> {
  static constexpr bool matches = true;
  using Expr = MapExpr<Add, Tensor<V, 1, D>, MatmulExpr<A, B>>;
  static const MatmulExpr<A, B>& matmul(const Expr& e) { return std::get<1>(e.children()); }
  static const Tensor<V, 1, D>& bias(const Expr& e) { return std::get<0>(e.children()); }
};

/// The cuBLASLt activation an elementwise functor is (none: it is not one).
template <class Op>
inline constexpr GemmEpilogue activation_epilogue = GemmEpilogue::none;
template <>
inline constexpr GemmEpilogue activation_epilogue<Relu> = GemmEpilogue::relu;
template <>
inline constexpr GemmEpilogue activation_epilogue<GeluTanh> = GemmEpilogue::gelu;

constexpr GemmEpilogue with_bias(GemmEpilogue activation) {
  return activation == GemmEpilogue::relu ? GemmEpilogue::relu_bias : GemmEpilogue::gelu_bias;
}

/// The expressions one cuBLASLt call with an epilogue computes (see the file comment).
template <class E>
struct EpiloguePattern {
  static constexpr bool matches = false;
};
template <class E>
  requires BiasSum<E>::matches
struct EpiloguePattern<E> {
  static constexpr bool matches = true;
  static constexpr bool has_bias = true;
  static constexpr GemmEpilogue epilogue = GemmEpilogue::bias;
  static const auto& matmul(const E& e) { return BiasSum<E>::matmul(e); }
  static const auto& bias(const E& e) { return BiasSum<E>::bias(e); }
};
template <class Op, class X>
  requires(activation_epilogue<Op> != GemmEpilogue::none && (BiasSum<X>::matches || is_matmul_v<X>))
struct EpiloguePattern<MapExpr<Op, X>> {
  static constexpr bool matches = true;
  static constexpr bool has_bias = BiasSum<X>::matches;
  static constexpr GemmEpilogue epilogue = has_bias ? with_bias(activation_epilogue<Op>) : activation_epilogue<Op>;
  static const auto& matmul(const MapExpr<Op, X>& e) {
    if constexpr (has_bias) return BiasSum<X>::matmul(std::get<0>(e.children()));
    else return std::get<0>(e.children());
  }
  static const auto& bias(const MapExpr<Op, X>& e) { return BiasSum<X>::bias(std::get<0>(e.children())); }
};

// --- alpha * matmul(a, b) + beta * dst: one GEMM with its scale factors ---------------

/// A part of a sum, `c * x`, `x * c` or `x` (c a C++ scalar): x and its factor.
template <class X>
struct Scaled {
  using Inner = X;
  static double factor(const X&) { return 1.0; }
  static const X& inner(const X& x) { return x; }
};
template <class S, class X>
  requires(!std::is_same_v<X, ScalarExpr<S>>)
struct Scaled<MapExpr<Mul, ScalarExpr<S>, X>> {
  using Inner = X;
  static double factor(const MapExpr<Mul, ScalarExpr<S>, X>& e) { return double(std::get<0>(e.children()).value); }
  static const X& inner(const MapExpr<Mul, ScalarExpr<S>, X>& e) { return std::get<1>(e.children()); }
};
template <class X, class S>
  requires(!std::is_same_v<X, ScalarExpr<S>>)
struct Scaled<MapExpr<Mul, X, ScalarExpr<S>>> {
  using Inner = X;
  static double factor(const MapExpr<Mul, X, ScalarExpr<S>>& e) { return double(std::get<1>(e.children()).value); }
  static const X& inner(const MapExpr<Mul, X, ScalarExpr<S>>& e) { return std::get<0>(e.children()); }
};

/// True when t is dst itself: the same storage, first element and layout.
template <class U, int R, class DU, class T, int Rank, class D>
bool is_destination(const Tensor<U, R, DU>& t, const Tensor<T, Rank, D>& dst) {
  if constexpr (!std::is_same_v<U, T> || R != Rank) return false;
  else return t.storage() == dst.storage() && t.data() == dst.data() && t.strides() == dst.strides() && t.shape() == dst.shape();
}

/// One GEMM with alpha and beta (BLAS's own update, C = alpha A B + beta C, cuBLASLt or the
/// CPU BLAS) for dst = alpha * matmul(a, b) +/- beta * dst in any order (a factor may be
/// left out; `dst += alpha * matmul(a, b)` is this form too), the product of dst's type and
/// shape, its operands not reading dst. Returns false, having done nothing, otherwise.
template <class P, class Y, class T, int Rank, class D>
bool run_scaled_update(const Tensor<T, Rank, D>& dst, const P& product_part, const Y& dst_part, double sign) {
  using Product = typename Scaled<P>::Inner;
  using Target = typename Scaled<Y>::Inner;
  if constexpr (!is_matmul_v<Product> || !is_tensor_v<Target>) {
    return false;
  } else if constexpr (!std::is_same_v<typename Product::value_type, T> || Product::rank != Rank ||
                       !std::is_same_v<typename Product::device_type, D>) {
    return false;
  } else {
    const Product& node = Scaled<P>::inner(product_part);
    if (!is_destination(Scaled<Y>::inner(dst_part), dst) || node.shape() != dst.shape()) return false;
    if (reads_storage(node.lhs(), dst.storage()) || reads_storage(node.rhs(), dst.storage())) return false;
    const auto target = product_target<Product::squeeze>(dst);
    if (!matrix_view(target)) return false;
    run_gemm(materialize(node.lhs()), materialize(node.rhs()), target, node.math_mode(), GemmEpilogue::none, {},
             GemmScale{Scaled<P>::factor(product_part), sign * Scaled<Y>::factor(dst_part)});
    return true;
  }
}
template <class T, int Rank, class D, class E>
bool try_scaled_update(const Tensor<T, Rank, D>&, const E&) {
  return false;
}
template <class T, int Rank, class D, class L, class R>
bool try_scaled_update(const Tensor<T, Rank, D>& dst, const MapExpr<Add, L, R>& e) {
  const auto& [left, right] = e.children();
  return run_scaled_update(dst, left, right, 1.0) || run_scaled_update(dst, right, left, 1.0);
}
template <class T, int Rank, class D, class L, class R>
bool try_scaled_update(const Tensor<T, Rank, D>& dst, const MapExpr<Sub, L, R>& e) {
  const auto& [left, right] = e.children();
  return run_scaled_update(dst, left, right, -1.0);
}

/// Runs dst = expr as one GEMM with an epilogue when expr is such a pattern and the
/// operands allow it; returns false (having done nothing) otherwise. Precondition: dst
/// has a BLAS layout and nothing in expr reads its storage.
template <class T, int R, class D, class E>
bool try_fused_epilogue(const Tensor<T, R, D>& dst, const E& expr) {
  using Pattern = EpiloguePattern<E>;
  if constexpr (!Pattern::matches) {
    return false;
  } else {
    const auto& node = Pattern::matmul(expr);
    using Node = std::remove_cvref_t<decltype(node)>;
    constexpr bool tensors = is_tensor_v<std::remove_cvref_t<decltype(node.lhs())>> &&
                             is_tensor_v<std::remove_cvref_t<decltype(node.rhs())>>;
    if constexpr (!tensors || !std::is_same_v<typename Node::value_type, T> || Node::rank != R) {
      return false;
    } else {
      if (node.shape() != dst.shape()) return false;
      EpilogueBuffers<T> buffers;
      if constexpr (Pattern::has_bias) {
        const auto& vector = Pattern::bias(expr);
        if constexpr (!std::is_same_v<typename std::remove_cvref_t<decltype(vector)>::value_type, T>) {
          return false;
        } else {
          if (vector.size(0) != dst.shape()[R - 1] || (vector.strides()[0] != 1 && vector.size(0) != 1)) return false;
          buffers.bias = vector.data();
        }
      }
      return run_gemm(node.lhs(), node.rhs(), dst, node.math_mode(), Pattern::epilogue, buffers);
    }
  }
}

/// dst = expr for an expression holding matmul nodes. Called by assign() once dst is
/// allocated, checked against expr's shape and known to be non-empty.
template <class T, int Rank, class D, class E>
void assign_with_matmul(Tensor<T, Rank, D>& dst, const E& expr) {
  if (try_scaled_update(dst, expr)) return;  // alpha * a @ b + beta * dst: one GEMM
  // A GEMM cannot write where it (or anything else in the expression) reads.
  bool dst_is_free = !reads_storage(expr, dst.storage());
  if constexpr (Rank == 2 || Rank == 3) dst_is_free = dst_is_free && matrix_view(dst).has_value();
  else if constexpr (Rank != 1) dst_is_free = false;  // a vector (a matrix-vector product's) always has one
  if constexpr (backend_t<D>::fuses_gemm_epilogues) {
    if (dst_is_free && try_fused_epilogue(dst, expr)) return;
  }
  Tensor<T, Rank, D>* into = dst_is_free ? &dst : nullptr;
  const auto lowered = lower(expr, into);
  if (is_matmul_v<E> && dst_is_free && into == nullptr) return;  // the product went straight into dst
  assign(dst, lowered);
}

}  // namespace detail

/// The matrix product a @ b (torch.matmul for ranks 1, 2 and 3):
///   [M, K] @ [K, N] -> [M, N];  [B, M, K] @ [B, K, N] -> [B, M, N];
///   [B, M, K] @ [K, N] and [M, K] @ [B, K, N] -> [B, M, N] (the matrix is shared);
///   batch extents of 1 broadcast;
///   [M, K] @ [K] -> [M] and [K] @ [K, N] -> [N] (a vector, as torch.matmul: one GEMV-shaped
///   GEMM, the vector read in place as a column or a row), [B, M, K] @ [K] -> [B, M].
/// Preconditions (else et::ShapeError naming both shapes): the inner dimensions agree and
/// the batch extents broadcast. Both operands have one element type (float, double, half
/// or bfloat16) and one device, rank 1, 2 or 3, not both 1 (a dot product is
/// et::sum(x * y)); else a compile error. Lazy: nothing runs until the result is assigned
/// or evaluated (`Tensor z = et::matmul(a, b);`, `et::eval(...)`), and then through
/// cuBLASLt on CUDA or the CPU BLAS (see the top of this file for what fuses with what;
/// `y = alpha * et::matmul(A, x) + beta * y` is one GEMM with its alpha and beta). `mode`
/// governs float32 products on CUDA (backend/math_mode.hpp); it defaults to the calling
/// thread's mode, read here.
template <Expression A, Expression B>
auto matmul(const A& a, const B& b, MathMode mode = math_mode()) {
  [[maybe_unused]] detail::same_devices<typename A::device_type, typename B::device_type> check;
  constexpr bool devices_ok = detail::devices_agree_v<typename A::device_type, typename B::device_type>;
  using TA = typename A::value_type;
  using TB = typename B::value_type;
  constexpr bool ranks_ok =
      A::rank >= 1 && A::rank <= 3 && B::rank >= 1 && B::rank <= 3 && (A::rank != 1 || B::rank != 1);
  constexpr bool types_ok = std::is_same_v<TA, TB> && detail::is_matmul_element_v<TA>;
  static_assert(ranks_ok, "et: matmul takes vectors (rank 1), matrices (rank 2) or batches of matrices (rank 3), not "
                          "two vectors (their dot product is et::sum(x * y))");
  static_assert(!ranks_ok || std::is_same_v<TA, TB>,
                "et: matmul needs both operands of one element type; convert one with et::cast<T>(x)");
  static_assert(!ranks_ok || !std::is_same_v<TA, TB> || detail::is_matmul_element_v<TA>,
                "et: matmul needs floating-point operands (float, double, half or bfloat16); convert with "
                "et::cast<float>(x)");
  if constexpr (devices_ok && ranks_ok && types_ok) {
    if constexpr (A::rank == 1) {  // a row [1, K] (a tensor's view: its gradient reaches it)
      const auto row = detail::materialize(a).unsqueeze(0);
      return detail::MatmulExpr<std::remove_cvref_t<decltype(row)>, B, B::rank - 2>(row, b, mode);
    } else if constexpr (B::rank == 1) {  // a column [K, 1]
      const auto column = detail::materialize(b).unsqueeze(1);
      return detail::MatmulExpr<A, std::remove_cvref_t<decltype(column)>, A::rank - 1>(a, column, mode);
    } else {
      return detail::MatmulExpr<A, B>(a, b, mode);
    }
  } else {
    return a;  // after a failed check, report nothing more
  }
}

}  // namespace et
