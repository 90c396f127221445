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

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>

#include "et/backend/cpu/gemm.hpp"
#include "et/backend/gemm_problem.hpp"
#include "et/backend/math_mode.hpp"
#include "et/exec/assign.hpp"
#include "et/exec/lowering.hpp"
#include "et/expr/operators.hpp"
#include "et/tensor.hpp"

#if defined(ET_DEVICE_COMPILER)
#include "et/backend/cuda/cublas.hpp"
#endif

namespace et {
namespace detail {

/// float, double, half and bfloat16: the element types cuBLAS multiplies.
template <class T>
inline constexpr bool is_matmul_element_v = is_floating_v<T>;

/// The shape of a @ b: [M, K] @ [K, N] -> [M, N]; with a batch axis on either side the
/// batches broadcast (an extent of 1 or a missing axis stretches). Throws ShapeError
/// naming both shapes.
template <std::size_t RA, std::size_t RB>
std::array<std::int64_t, (RA > RB ? RA : RB)> matmul_shape(const std::array<std::int64_t, RA>& a,
                                                           const std::array<std::int64_t, RB>& b) {
  constexpr std::size_t R = RA > RB ? RA : RB;
  auto fail = [&](const std::string& why) {
    throw ShapeError("et: matmul of shapes " + format_shape(a) + " and " + format_shape(b) + ": " + why);
  };
  if (a[RA - 1] != b[RB - 2])
    fail("the inner dimensions differ (" + std::to_string(a[RA - 1]) + " columns on the left, " +
         std::to_string(b[RB - 2]) + " rows on the right)");
  std::array<std::int64_t, R> out{};
  out[R - 2] = a[RA - 2];
  out[R - 1] = b[RB - 1];
  if constexpr (R == 3) {
    const std::int64_t batch_a = RA == 3 ? a[0] : 1, batch_b = RB == 3 ? b[0] : 1;
    if (batch_a != batch_b && batch_a != 1 && batch_b != 1)
      fail("the batch dimensions " + std::to_string(batch_a) + " and " + std::to_string(batch_b) +
           " do not broadcast");
    out[0] = batch_a == 1 ? batch_b : batch_a;
  }
  return out;
}

/// The lazy product a @ b of two expressions of one floating element type and of rank 2
/// or 3. Operands are held by value; the math mode is the one in force when it was built.
template <class A, class B>
class MatmulExpr : public ExprTag {
 public:
  using value_type = typename A::value_type;
  using device_type = common_device_t<typename A::device_type, typename B::device_type>;
  static constexpr int rank = A::rank > B::rank ? A::rank : B::rank;

  MatmulExpr(const A& a, const B& b, MathMode mode) : a_(a), b_(b), mode_(mode) {
    require_defined_operand(a);
    require_defined_operand(b);
    shape_ = matmul_shape(a.shape(), b.shape());
  }

  const Shape<rank>& shape() const { return shape_; }
  const A& lhs() const { return a_; }
  const B& rhs() const { return b_; }
  MathMode math_mode() const { return mode_; }

 private:
  A a_;
  B b_;
  MathMode mode_;
  Shape<rank> shape_{};
};

template <class E>
inline constexpr bool has_no_storage_v = false;  // scalars and generators read no memory
template <class T>
inline constexpr bool has_no_storage_v<ScalarExpr<T>> = true;
template <class Gen, int R, class D>
inline constexpr bool has_no_storage_v<GeneratorExpr<Gen, R, D>> = true;


// Elementwise evaluation cannot read a matmul node: reductions (and anything else that
// builds readers straight from an expression) reach these and stop with one message.
template <class A>
struct matmul_needs_evaluation {
  static_assert(never<A>,
                "et: a matmul cannot be read elementwise here (e.g. inside a reduction); evaluate it first: "
                "et::sum(et::eval(et::matmul(a, b)))");
};
template <int OutR, class Index, class A, class B>
ScalarReader<float> make_reader(const MatmulExpr<A, B>&, const Shape<OutR>&, const Shape<OutR>& = {}) {
  [[maybe_unused]] matmul_needs_evaluation<A> report;
  return ScalarReader<float>{0.0f};
}
template <class F, class A, class B>
void for_each_leaf(const MatmulExpr<A, B>&, F&&) {
  [[maybe_unused]] matmul_needs_evaluation<A> report;
}

// --- One GEMM -----------------------------------------------------------------------

/// A tensor's matrices as a BLAS reads them (gemm_problem.hpp), if a BLAS layout fits.
template <class T, int R, class D>
std::optional<MatrixView> matrix_view(const Tensor<T, R, D>& t) {
  static_assert(R == 2 || R == 3);
  const auto& shape = t.shape();
  const auto& strides = t.strides();
  const auto layout = blas_layout(shape[R - 2], shape[R - 1], strides[R - 2], strides[R - 1]);
  if (!layout) return std::nullopt;
  std::int64_t batch_stride = 0;
  if constexpr (R == 3) batch_stride = shape[0] == 1 ? 0 : strides[0];
  return MatrixView{static_cast<void*>(t.data()), *layout, batch_stride};
}

/// t itself when a BLAS can read it in place, else a contiguous copy (counted).
template <class T, int R, class D>
Tensor<T, R, D> blas_operand(const Tensor<T, R, D>& t) {
  if (matrix_view(t)) return t;
  ++gemm_counters().operand_copies;
  return t.contiguous();
}

/// A matmul operand as a tensor: tensors as they are (Pinned ones as Cpu handles on the
/// same storage, after their pending copies: pinned memory computes as the CPU), other
/// expressions evaluated.
template <class X>
auto materialize(const X& x) {
  if constexpr (is_tensor_v<X> && std::is_same_v<typename X::device_type, Pinned>) {
    using Host = Tensor<typename X::value_type, X::rank, Cpu>;
    (void)x.data();  // waits for copies still using the storage
    return Host(x.storage(), x.offset(), x.shape(), x.strides());
  } else if constexpr (is_tensor_v<X>) {
    return x;
  } else {
    return eval(x);
  }
}

/// The problem out = a @ b for operands and result that have BLAS layouts (matrix_view).
template <class T, int RA, int RB, int RC, class D>
GemmProblem gemm_problem(const Tensor<T, RA, D>& a, const Tensor<T, RB, D>& b, const Tensor<T, RC, D>& out) {
  GemmProblem problem;
  problem.a = *matrix_view(a);
  problem.b = *matrix_view(b);
  problem.c = *matrix_view(out);
  problem.batch = RC == 3 ? out.shape()[0] : 1;
  problem.m = out.shape()[RC - 2];
  problem.n = out.shape()[RC - 1];
  problem.k = a.shape()[RA - 1];
  fold_batch_into_rows(problem);
  return problem;
}

/// out = a @ b as one GEMM (with `epilogue` applied on CUDA), or with `scale`, out =
/// alpha * a @ b + beta * out. Preconditions: out has the product's shape and a BLAS layout
/// (matrix_view), shares no storage with a, b or the epilogue's buffers, and has no
/// overlapping elements. Returns false, having done nothing, only when an epilogue was asked
/// for and the backend cannot apply it (GemmEpilogue says what each writes).
template <class T, int RA, int RB, int RC, class D>
bool run_gemm(const Tensor<T, RA, D>& a_in, const Tensor<T, RB, D>& b_in, const Tensor<T, RC, D>& out,
              MathMode mode, GemmEpilogue epilogue = GemmEpilogue::none, EpilogueBuffers<T> buffers = {},
              GemmScale scale = {}) {
  if constexpr (!backend_t<D>::fuses_gemm_epilogues) {
    if (epilogue != GemmEpilogue::none) return false;
  }
  if (out.numel() == 0) return !writes_bias_gradient(epilogue);  // a bias gradient may still have elements
  if (a_in.shape()[RA - 1] == 0) {  // an empty sum (a BLAS may refuse k = 0): beta * out
    if (epilogue != GemmEpilogue::none) return false;
    Tensor<T, RC, D> target = out;
    if (scale.beta == 0) assign(target, ScalarExpr<T>(compute_t<T>(0)));
    else if (scale.beta != 1) assign(target, cast<T>(cast<double>(target) * scale.beta));
    return true;
  }
  if constexpr (is_16bit_float_v<T> && !backend_t<D>::gemm_takes_16bit) {
    // Eigen has no fast 16-bit GEMM: multiply in float and round once, as the GPU does.
    const auto a = eval(cast<float>(a_in));
    const auto b = eval(cast<float>(b_in));
    const auto product = scale.beta == 0 ? Tensor<float, RC, D>::allocate(out.shape()) : eval(cast<float>(out));
    run_gemm(a, b, product, mode, GemmEpilogue::none, {}, scale);
    Tensor<T, RC, D> target = out;
    assign(target, product);
    return true;
  } else {
    const Tensor<T, RA, D> a = blas_operand(a_in);
    const Tensor<T, RB, D> b = blas_operand(b_in);
    note_stream_uses(a, b, out);
    GemmProblem problem = gemm_problem(a, b, out);
    problem.scale = scale;
    return gemm(backend<D>, problem, mode, epilogue, buffers);  // backend/backend.hpp
  }
}

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

template <class T, int R, class D, class A, class B>
auto evaluate_matmul(const MatmulExpr<A, B>& node, Tensor<T, R, D>*& into) {
  using Node = MatmulExpr<A, B>;
  using V = typename Node::value_type;
  using DN = typename Node::device_type;
  const auto a = materialize(node.lhs());
  const auto b = materialize(node.rhs());
  if constexpr (std::is_same_v<V, T> && Node::rank == R && std::is_same_v<DN, D>) {
    if (into != nullptr && into->shape() == node.shape()) {
      const Tensor<T, R, D> out = *into;
      into = nullptr;
      run_gemm(a, b, out, node.math_mode());
      return out;
    }
  }
  const auto out = Tensor<V, Node::rank, DN>::allocate(node.shape());
  run_gemm(a, b, out, node.math_mode());
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
  // A GEMM cannot write where it (or anything else in the expression) reads.
  bool dst_is_free = !reads_storage(expr, dst.storage());
  if constexpr (Rank == 2 || Rank == 3) dst_is_free = dst_is_free && matrix_view(dst).has_value();
  else dst_is_free = false;
  if constexpr (backend_t<D>::fuses_gemm_epilogues) {
    if (dst_is_free && try_fused_epilogue(dst, expr)) return;
  }
  Tensor<T, Rank, D>* into = dst_is_free ? &dst : nullptr;
  const auto lowered = lower(expr, into);
  if (is_matmul_v<E> && dst_is_free && into == nullptr) return;  // the product went straight into dst
  assign(dst, lowered);
}

}  // namespace detail

/// The matrix product a @ b (torch.matmul for ranks 2 and 3):
///   [M, K] @ [K, N] -> [M, N];  [B, M, K] @ [B, K, N] -> [B, M, N];
///   [B, M, K] @ [K, N] and [M, K] @ [B, K, N] -> [B, M, N] (the matrix is shared);
///   batch extents of 1 broadcast.
/// Preconditions (else et::ShapeError naming both shapes): the inner dimensions agree and
/// the batch extents broadcast. Both operands have one element type (float, double, half
/// or bfloat16) and one device, and rank 2 or 3 (else a compile error). Lazy: nothing runs
/// until the result is assigned or evaluated (`Tensor z = et::matmul(a, b);`,
/// `et::eval(...)`), and then through cuBLASLt on CUDA or Eigen on the CPU (see the top of
/// this file for what fuses with what). `mode` governs float32 products on CUDA
/// (backend/math_mode.hpp); it defaults to the calling thread's mode, read here.
template <Expression A, Expression B>
auto matmul(const A& a, const B& b, MathMode mode = math_mode()) {
  [[maybe_unused]] detail::same_devices<typename A::device_type, typename B::device_type> check;
  constexpr bool devices_ok = detail::devices_agree_v<typename A::device_type, typename B::device_type>;
  using TA = typename A::value_type;
  using TB = typename B::value_type;
  constexpr bool ranks_ok = (A::rank == 2 || A::rank == 3) && (B::rank == 2 || B::rank == 3);
  constexpr bool types_ok = std::is_same_v<TA, TB> && detail::is_matmul_element_v<TA>;
  static_assert(ranks_ok, "et: matmul takes matrices (rank 2) or batches of matrices (rank 3)");
  static_assert(!ranks_ok || std::is_same_v<TA, TB>,
                "et: matmul needs both operands of one element type; convert one with et::cast<T>(x)");
  static_assert(!ranks_ok || !std::is_same_v<TA, TB> || detail::is_matmul_element_v<TA>,
                "et: matmul needs floating-point operands (float, double, half or bfloat16); convert with "
                "et::cast<float>(x)");
  if constexpr (devices_ok && ranks_ok && types_ok) {
    return detail::MatmulExpr<A, B>(a, b, mode);
  } else {
    return a;  // after a failed check, report nothing more
  }
}

}  // namespace et
