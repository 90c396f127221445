// Internal (ops/linalg.hpp includes it): the lazy matrix product and the one way a product
// runs: MatmulExpr (a @ b, or matmul(A, x) of a vector read as a matrix), its shape, the
// BLAS layouts of its operands and result, and run_gemm, one GEMM (or one with alpha and
// beta, or with a cuBLASLt epilogue) through the device's backend.
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
#include "et/tensor/untracked.hpp"

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
/// Squeeze >= 0: a matrix-vector product, the vector read as a matrix of one column (or row)
/// and that axis of the product (Squeeze) dropped from the result: et::matmul(A, x).
template <class A, class B, int Squeeze>
class MatmulExpr : public ExprTag {
 public:
  using value_type = typename A::value_type;
  using device_type = common_device_t<typename A::device_type, typename B::device_type>;
  static constexpr int product_rank = A::rank > B::rank ? A::rank : B::rank;
  static constexpr int squeeze = Squeeze;
  static constexpr int rank = product_rank - (Squeeze >= 0 ? 1 : 0);

  MatmulExpr(const A& a, const B& b, MathMode mode) : a_(a), b_(b), mode_(mode) {
    require_defined_operand(a);
    require_defined_operand(b);
    product_shape_ = matmul_shape(a.shape(), b.shape());
    for (int d = 0, k = 0; d < product_rank; ++d)
      if (d != Squeeze) shape_[std::size_t(k++)] = product_shape_[std::size_t(d)];
  }

  const Shape<rank>& shape() const { return shape_; }
  /// The shape of the matrix product itself (the result's, with the squeezed axis of 1).
  const Shape<product_rank>& product_shape() const { return product_shape_; }
  const A& lhs() const { return a_; }
  const B& rhs() const { return b_; }
  MathMode math_mode() const { return mode_; }

 private:
  A a_;
  B b_;
  MathMode mode_;
  Shape<product_rank> product_shape_{};
  Shape<rank> shape_{};
};

/// `out` (a product's result) as the matrix the GEMM writes: itself, or with the squeezed
/// axis put back (a view that records nothing).
template <int Squeeze, class T, int R, class D>
auto product_target(const Tensor<T, R, D>& out) {
  if constexpr (Squeeze < 0) return out;
  else return untracked_view(out, unsqueeze_layout(layout_of(out), Squeeze));
}

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
template <int OutR, class Index, class A, class B, int S>
ScalarReader<float> make_reader(const MatmulExpr<A, B, S>&, const Shape<OutR>&, const Shape<OutR>& = {}) {
  [[maybe_unused]] matmul_needs_evaluation<A> report;
  return ScalarReader<float>{0.0f};
}
template <class F, class A, class B, int S>
void for_each_leaf(const MatmulExpr<A, B, S>&, F&&) {
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

}  // namespace detail
}  // namespace et
