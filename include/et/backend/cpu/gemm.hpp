// How a matrix product runs on the CPU, by the first of these that is configured
// (cmake/EtensorCpu.cmake):
//   - float, where oneDNN is: dnnl_sgemm. Its kernels are generated for the instructions the
//     processor reports, where OpenBLAS 0.3.21 picks its kernel by processor model: on one
//     lent Xeon it ran 15 GFLOP/s a core, 7x below the same kernel on another (2026-12-02), and
//     on FCN-S's skinny products at 16 threads dnnl_sgemm ran 2.1-3.8x OpenBLAS's best.
//   - float and double, where a CBLAS is (OpenBLAS's OpenMP build, or BLIS): cblas_?gemm.
//   - else Eigen's GEMM on Eigen::Maps of the operands' own memory.
// Either way the operands are read in place: a row- or column-major matrix with its leading
// dimension, so transposed and row-sliced operands are never copied. All run on etensor's
// OpenMP threads (they follow omp_set_num_threads and, inside a parallel region, run on the
// calling thread); a batch of small products is split over the batch.
// float and double only: ops/linalg.hpp converts half and bfloat16 to float first.
#pragma once

#include <cstdint>
#include <type_traits>

// Eigen's DenseStorage marks defaulted members __host__ __device__, which nvcc reports
// (#20012) in every CUDA file that includes it; Eigen is used on the host only here.
#if defined(__CUDACC__)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 20012
#endif
#include <Eigen/Core>
#if defined(__CUDACC__)
#pragma nv_diagnostic pop
#endif

#if defined(ET_WITH_CBLAS)
#include <cblas.h>

#include <limits>
#endif
#if defined(ET_WITH_DNNL)
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "et/runtime/error.hpp"
#endif

#include "et/backend/backend.hpp"
#include "et/backend/gemm_problem.hpp"
#include "et/backend/math_mode.hpp"

namespace et::detail::cpu_backend {

template <class T, int Order>
using ConstMatrixMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                                  Eigen::OuterStride<>>;
template <class T, int Order>
using MatrixMap =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned, Eigen::OuterStride<>>;

/// Calls f with Eigen::RowMajor or Eigen::ColMajor as a compile-time constant.
template <class F>
void with_storage_order(const BlasLayout& layout, F&& f) {
  if (layout.row_major) f(std::integral_constant<int, Eigen::RowMajor>{});
  else f(std::integral_constant<int, Eigen::ColMajor>{});
}

/// Below this many multiply-adds per product, a batch is split over threads (each product
/// on one thread) rather than each product over all threads.
inline constexpr std::int64_t small_product = std::int64_t{1} << 18;

/// Below about this many multiply-adds in all, waking a team of threads costs more than the
/// work: c = matmul(a, b) for a batch of two 2x2 products took 1.0-1.4 us with a team of
/// two threads, 0.2 us on the calling thread (the 2-core build machine).
/// conv.hpp's worth_threads uses the same bound.
inline constexpr double threaded_madds = 65536;

/// c[i] = alpha * a[i] @ b[i] + beta * c[i] for one i, by Eigen.
template <class T>
void eigen_product(const GemmProblem& p, std::int64_t i) {
  with_storage_order(p.a.layout, [&](auto a_order) {
    with_storage_order(p.b.layout, [&](auto b_order) {
      with_storage_order(p.c.layout, [&](auto c_order) {
        const ConstMatrixMap<T, decltype(a_order)::value> am(static_cast<const T*>(p.a.data) + i * p.a.batch_stride,
                                                             p.m, p.k, Eigen::OuterStride<>(p.a.layout.ld));
        const ConstMatrixMap<T, decltype(b_order)::value> bm(static_cast<const T*>(p.b.data) + i * p.b.batch_stride,
                                                             p.k, p.n, Eigen::OuterStride<>(p.b.layout.ld));
        MatrixMap<T, decltype(c_order)::value> cm(static_cast<T*>(p.c.data) + i * p.c.batch_stride, p.m, p.n,
                                                  Eigen::OuterStride<>(p.c.layout.ld));
        const GemmScale& s = p.scale;
        if (s.beta == 0 && s.alpha == 1) {
          cm.noalias() = am * bm;
        } else if (s.beta == 0) {
          cm.noalias() = T(s.alpha) * am * bm;  // Eigen folds the factor into its GEMM
        } else {
          if (s.beta != 1) cm *= T(s.beta);
          cm.noalias() += T(s.alpha) * am * bm;
        }
      });
    });
  });
}

#if defined(ET_WITH_CBLAS)
/// Whether every extent and leading dimension of p fits CBLAS's int (blasint: 32 bits in
/// Debian's builds); larger products go to Eigen.
inline bool fits_cblas(const GemmProblem& p) {
  constexpr std::int64_t most = std::numeric_limits<int>::max();
  return p.m <= most && p.n <= most && p.k <= most && p.a.layout.ld <= most && p.b.layout.ld <= most &&
         p.c.layout.ld <= most;
}

/// c[i] = alpha * a[i] @ b[i] + beta * c[i] for one i, by cblas_?gemm: the result's storage
/// order is CBLAS's order, an operand stored the other way is passed transposed.
template <class T>
void cblas_product(const GemmProblem& p, std::int64_t i) {
  const CBLAS_ORDER order = p.c.layout.row_major ? CblasRowMajor : CblasColMajor;
  const auto trans = [&](const BlasLayout& l) { return l.row_major == p.c.layout.row_major ? CblasNoTrans : CblasTrans; };
  const auto* a = static_cast<const T*>(p.a.data) + i * p.a.batch_stride;
  const auto* b = static_cast<const T*>(p.b.data) + i * p.b.batch_stride;
  auto* c = static_cast<T*>(p.c.data) + i * p.c.batch_stride;
  const int m = int(p.m), n = int(p.n), k = int(p.k);
  const int lda = int(p.a.layout.ld), ldb = int(p.b.layout.ld), ldc = int(p.c.layout.ld);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(order, trans(p.a.layout), trans(p.b.layout), m, n, k, float(p.scale.alpha), a, lda, b, ldb,
                float(p.scale.beta), c, ldc);
  else
    cblas_dgemm(order, trans(p.a.layout), trans(p.b.layout), m, n, k, p.scale.alpha, a, lda, b, ldb, p.scale.beta, c,
                ldc);
}
#endif

#if defined(ET_WITH_DNNL)
/// c[i] = alpha * a[i] @ b[i] + beta * c[i] for one i, by dnnl_sgemm, which takes row-major
/// matrices: a column-major result is computed as its transpose, c^T = b^T a^T.
inline void dnnl_product(const GemmProblem& p, std::int64_t i) {
  const auto* a = static_cast<const float*>(p.a.data) + i * p.a.batch_stride;
  const auto* b = static_cast<const float*>(p.b.data) + i * p.b.batch_stride;
  auto* c = static_cast<float*>(p.c.data) + i * p.c.batch_stride;
  const auto flag = [](bool transposed) { return transposed ? 'T' : 'N'; };
  const auto alpha = float(p.scale.alpha), beta = float(p.scale.beta);
  dnnl_status_t status;
  if (p.c.layout.row_major)
    status = dnnl_sgemm(flag(!p.a.layout.row_major), flag(!p.b.layout.row_major), p.m, p.n, p.k, alpha, a,
                        p.a.layout.ld, b, p.b.layout.ld, beta, c, p.c.layout.ld);
  else
    status = dnnl_sgemm(flag(p.b.layout.row_major), flag(p.a.layout.row_major), p.n, p.m, p.k, alpha, b,
                        p.b.layout.ld, a, p.a.layout.ld, beta, c, p.c.layout.ld);
  if (status != dnnl_success)
    throw Error("et: matmul: oneDNN's dnnl_sgemm failed (status " + std::to_string(int(status)) + ") on a " +
                std::to_string(p.m) + "x" + std::to_string(p.k) + " by " + std::to_string(p.k) + "x" +
                std::to_string(p.n) + " product");
}
#endif

/// c[i] = alpha * a[i] @ b[i] + beta * c[i] (gemm_problem.hpp) for T = float or double,
/// in T's precision whatever the math mode. Returns false, having done nothing, when an
/// epilogue is asked for: no library here has one (Backend::fuses_gemm_epilogues), the
/// caller adds it separately.
template <class T>
bool gemm(Backend, const GemmProblem& p, MathMode, GemmEpilogue epilogue, const EpilogueBuffers<T>&) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "et: the CPU GEMM takes float or double");
  if (epilogue != GemmEpilogue::none) return false;
#if defined(ET_WITH_DNNL)
  constexpr bool by_dnnl = std::is_same_v<T, float>;
#else
  constexpr bool by_dnnl = false;
#endif
#if defined(ET_WITH_CBLAS)
  const bool by_cblas = !by_dnnl && fits_cblas(p);
#else
  constexpr bool by_cblas = false;
#endif
  auto product = [&](std::int64_t i) {
#if defined(ET_WITH_DNNL)
    if constexpr (by_dnnl) return dnnl_product(p, i);
#endif
#if defined(ET_WITH_CBLAS)
    if (by_cblas) return cblas_product<T>(p, i);
#endif
    eigen_product<T>(p, i);
  };
  const double madds = double(p.m) * double(p.n) * double(p.k);
  if (p.batch > 1 && madds < double(small_product) && madds * double(p.batch) >= threaded_madds) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < p.batch; ++i) product(i);
  } else {
    for (std::int64_t i = 0; i < p.batch; ++i) product(i);
  }
  gemm_counters().cpu_gemms += p.batch;
  if (by_dnnl || by_cblas) gemm_counters().library_gemms += p.batch;
  return true;
}

}  // namespace et::detail::cpu_backend
