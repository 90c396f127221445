// Internal: a (batched) matrix product as the backends see it, whatever the device. An
// etensor matrix with strides (row_stride, col_stride) is what a BLAS calls row-major
// (col_stride 1, leading dimension row_stride) or column-major (row_stride 1, leading
// dimension col_stride). Transposed views and row slices are such layouts, so they reach
// cuBLAS and Eigen as a storage order plus a leading dimension, never as a copy; only
// layouts with no unit stride (a stepped column slice, an expand()ed matrix) are not.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>

namespace et::detail {

/// How a BLAS reads one matrix: element (i, j) is at i * ld + j (row-major) or
/// i + j * ld (column-major).
struct BlasLayout {
  bool row_major = true;
  std::int64_t ld = 1;
};

/// The BLAS layout of a rows x cols matrix with the given element strides, if it has one.
/// Along an axis of extent 1 the stride never matters, so it is chosen to suit.
inline std::optional<BlasLayout> blas_layout(std::int64_t rows, std::int64_t cols, std::int64_t row_stride,
                                             std::int64_t col_stride) {
  if (cols == 1 || col_stride == 1) {
    const std::int64_t ld = rows == 1 ? std::max<std::int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<std::int64_t>(cols, 1)) return BlasLayout{true, ld};
  }
  if (rows == 1 || row_stride == 1) {
    const std::int64_t ld = cols == 1 ? std::max<std::int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<std::int64_t>(rows, 1)) return BlasLayout{false, ld};
  }
  return std::nullopt;
}

/// One operand (or the result) of a batched product: a BLAS layout plus the distance
/// between consecutive matrices of the batch (0: every product reads the same matrix).
struct MatrixView {
  void* data = nullptr;
  BlasLayout layout;
  std::int64_t batch_stride = 0;
};

/// c[i] = alpha * a[i] @ b[i] + beta * c[i] for i < batch (beta 0: c is not read), with
/// a[i] m x k, b[i] k x n and c[i] m x n, all of one element type. Preconditions: m, n, k,
/// batch >= 1; c overlaps neither a nor b, and no two elements of c share memory.
struct GemmScale {
  double alpha = 1, beta = 0;
};
struct GemmProblem {
  std::int64_t batch = 1, m = 1, n = 1, k = 1;
  MatrixView a, b, c;
  GemmScale scale;
};

/// What a CUDA GEMM applies to its float32 result before rounding it to the output type
/// (cuBLASLt epilogues), for a row-major result c (m x n) unless said otherwise:
/// - bias, relu, relu_bias, gelu, gelu_bias: a bias vector of length n added to every row,
///   then ReLU or GELU (tanh form);
/// - gelu_aux, gelu_aux_bias: the same, also writing the activation's input into the aux
///   matrix (for the derivative);
/// - dgelu, dgelu_bgrad: c = the product times GELU's derivative at aux (a forward's
///   gelu_aux* over a result of c's shape); _bgrad also writes the bias gradient, c summed
///   over its rows (n elements), into the bias vector;
/// - bgrad_left, bgrad_right: the plain product, and into the bias vector the left operand
///   summed over k (m elements) or the right one summed over k (n elements); these allow a
///   result of either layout.
enum class GemmEpilogue {
  none, bias, relu, relu_bias, gelu, gelu_bias,
  gelu_aux, gelu_aux_bias, dgelu, dgelu_bgrad, bgrad_left, bgrad_right
};

/// Reads a bias vector.
inline constexpr bool has_bias(GemmEpilogue epilogue) {
  using enum GemmEpilogue;
  return epilogue == bias || epilogue == relu_bias || epilogue == gelu_bias || epilogue == gelu_aux_bias;
}
/// Writes a bias gradient into the bias vector.
inline constexpr bool writes_bias_gradient(GemmEpilogue epilogue) {
  using enum GemmEpilogue;
  return epilogue == dgelu_bgrad || epilogue == bgrad_left || epilogue == bgrad_right;
}
/// Writes (forward) or reads (derivative) the aux matrix.
inline constexpr bool uses_aux(GemmEpilogue epilogue) {
  using enum GemmEpilogue;
  return epilogue == gelu_aux || epilogue == gelu_aux_bias || epilogue == dgelu || epilogue == dgelu_bgrad;
}

/// The buffers an epilogue reads or writes besides the result: the bias vector (read, or
/// written by the bgrad kinds), and the aux matrix, laid out as the result is in memory: element (i, j) of an m x n result at i * aux_ld + j, aux_ld a multiple of 8
/// (cuBLASLt's rule for GELU's input, in elements of the result's type).
template <class T>
struct EpilogueBuffers {
  T* bias = nullptr;
  void* aux = nullptr;
  std::int64_t aux_ld = 0;
};

/// Folds the batch of c[i] = a[i] @ b into one product when the a[i] and c[i] follow each
/// other row after row: then [batch * m, k] @ [k, n] is the same product in one call
/// (a linear layer over a batch of sequences).
inline void fold_batch_into_rows(GemmProblem& p) {
  if (p.batch == 1 || p.b.batch_stride != 0 || !p.a.layout.row_major || !p.c.layout.row_major) return;
  if (p.a.batch_stride != p.m * p.a.layout.ld || p.c.batch_stride != p.m * p.c.layout.ld) return;
  p.m *= p.batch;
  p.batch = 1;
  p.a.batch_stride = 0;
  p.c.batch_stride = 0;
}

/// A product as a column-major BLAS (cuBLAS) is asked for it: D = op(A) op(B), D m x n
/// with leading dimension ldd, each operand the matrix stored in memory (rows x cols,
/// leading dimension ld) and whether to transpose it. To a column-major library a
/// row-major matrix X is X^T, stored; so a row-major result C = A B is computed as
/// C^T = B^T A^T (the library's A is our b), a column-major one as C = A B.
struct ColumnMajorGemm {
  struct Operand {
    bool transpose = false;
    std::int64_t rows = 1, cols = 1, ld = 1, batch_stride = 0;
    const void* data = nullptr;
  };
  Operand a, b;
  std::int64_t m = 1, n = 1, k = 1, batch = 1;
  std::int64_t ldd = 1, batch_stride_d = 0;
  void* d = nullptr;
  /// D's rows run along the etensor result's columns (then a bias vector of length n,
  /// added to every row of the result, runs along D's rows, as cuBLASLt's epilogue adds it).
  bool rows_are_result_columns = true;
};

/// The etensor matrix x (rows x cols, layout v) as the library operand x (want_transpose
/// false) or x^T (true).
inline ColumnMajorGemm::Operand column_major_operand(const MatrixView& v, std::int64_t rows, std::int64_t cols,
                                                      bool want_transpose) {
  const bool stored_transposed = v.layout.row_major;  // a row-major x is x^T to the library
  ColumnMajorGemm::Operand operand;
  operand.transpose = stored_transposed != want_transpose;
  operand.rows = stored_transposed ? cols : rows;
  operand.cols = stored_transposed ? rows : cols;
  operand.ld = v.layout.ld;
  operand.batch_stride = v.batch_stride;
  operand.data = v.data;
  return operand;
}

inline ColumnMajorGemm column_major(const GemmProblem& p) {
  ColumnMajorGemm g;
  g.rows_are_result_columns = p.c.layout.row_major;
  if (g.rows_are_result_columns) {  // C^T (n x m) = B^T A^T
    g.a = column_major_operand(p.b, p.k, p.n, true);
    g.b = column_major_operand(p.a, p.m, p.k, true);
    g.m = p.n, g.n = p.m;
  } else {  // C (m x n) = A B
    g.a = column_major_operand(p.a, p.m, p.k, false);
    g.b = column_major_operand(p.b, p.k, p.n, false);
    g.m = p.m, g.n = p.n;
  }
  g.k = p.k, g.batch = p.batch;
  g.ldd = p.c.layout.ld, g.batch_stride_d = p.c.batch_stride, g.d = p.c.data;
  return g;
}

/// Counts of what matrix products did, for tests and benchmarks (process-wide, all threads).
struct GemmCounters {
  std::atomic<std::int64_t> lt_matmuls{0};      ///< cublasLtMatmul calls that succeeded
  std::atomic<std::int64_t> fused_epilogues{0}; ///< ... of which with a bias/activation epilogue
  std::atomic<std::int64_t> cublas_gemms{0};    ///< cublasGemmStridedBatchedEx calls (no Lt algorithm)
  std::atomic<std::int64_t> cpu_gemms{0};       ///< CPU products (one per matrix of a batch)
  std::atomic<std::int64_t> library_gemms{0};   ///< those of them run by oneDNN or a CBLAS (backend/cpu/gemm.hpp)
  std::atomic<std::int64_t> operand_copies{0};  ///< operands made contiguous: no BLAS layout fits
};

inline GemmCounters& gemm_counters() {
  static GemmCounters counters;
  return counters;
}

}  // namespace et::detail
