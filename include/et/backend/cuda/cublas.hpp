// How a matrix product runs on a CUDA device: one cublasLtMatmul call on the device's
// stream (one cublasGemmStridedBatchedEx call when cuBLASLt offers no algorithm), with an
// optional bias/ReLU/GELU epilogue. Only for nvcc, like the rest of the CUDA evaluation path.
//
// Layout: cuBLAS is column-major, and to it a row-major matrix X is X^T. A row-major
// result C = A B is therefore computed as C^T = B^T A^T; a column-major one (a
// transposed destination) directly. Each operand then reaches the library as a transpose
// flag, a leading dimension and a batch stride (gemm_problem.hpp), never as a copy.
//
// State per (device, stream), created on first use and kept for the process's life: a
// cuBLASLt handle, a cuBLAS handle (only if ever needed) and a 32 MiB workspace from the
// device's caching allocator (NVIDIA's recommendation for Hopper). The algorithm
// cuBLASLt's heuristic picks for a problem (shapes, layouts, types, epilogue, alignments)
// is cached, so a repeated product costs one cublasLtMatmul call and no heuristic query.
// Its first answer is what cublasGemmEx (and so PyTorch) runs: on an H200 at 8192^3 the
// two ran at the same steady-state speed in TF32 and bf16. Timing the heuristic's other
// answers on the first call was tried and dropped: a few runs per candidate measure the
// GPU's clock boost, not the kernel, and picked slower kernels (bf16 -14%).
//
// Compute types: double CUBLAS_COMPUTE_64F; half and bfloat16 CUBLAS_COMPUTE_32F (tensor
// cores, float accumulation); float by MathMode (backend/math_mode.hpp). Scale type float
// (double for double); bias vectors have the output's type (cuBLASLt's default).
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/cublas.hpp is part of the CUDA evaluation path: compile this file with nvcc"
#endif

#include <cublasLt.h>
#include <cublas_v2.h>

#include <climits>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "et/backend/backend.hpp"
#include "et/backend/gemm_problem.hpp"
#include "et/backend/math_mode.hpp"
#include "et/half.hpp"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/error.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail {

/// "CUBLAS_STATUS_NOT_SUPPORTED (the functionality requested is not supported)".
inline std::string cublas_status_text(cublasStatus_t status) {
  const char* name = cublasLtGetStatusName(status);
  const char* text = cublasLtGetStatusString(status);
  return std::string(name ? name : ("cublasStatus_t " + std::to_string(static_cast<int>(status))).c_str()) +
         (text ? std::string(" (") + text + ")" : std::string());
}

[[noreturn]] inline void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(std::string("et: cuBLAS call ") + call + " failed: " + cublas_status_text(status) + " at " + file + ":" +
              std::to_string(line));
}

}  // namespace et::detail

/// Checks a cuBLAS or cuBLASLt call; on failure throws et::Error naming the call and the
/// status (e.g. CUBLAS_STATUS_NOT_SUPPORTED).
#define ET_CUBLAS_CHECK(call)                                                               \
  do {                                                                                      \
    const cublasStatus_t et_cublas_status_ = (call);                                        \
    if (et_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                         \
      ::et::detail::throw_cublas_error(et_cublas_status_, #call, __FILE__, __LINE__);       \
  } while (0)

namespace et::detail::cuda_backend {

inline constexpr std::size_t gemm_workspace_bytes = std::size_t{32} << 20;

/// cuBLAS state for one (device, stream).
struct BlasContext {
  std::mutex mutex;                 ///< one host thread at a time per handle (cuBLAS's rule)
  cublasLtHandle_t lt = nullptr;
  cublasHandle_t blas = nullptr;    ///< created when first needed
  std::shared_ptr<void> workspace;  ///< shared by both handles: their work is ordered on one stream
  std::size_t workspace_bytes = 0;
};

/// The context of (device, stream), created on first use. Call with `device` current.
inline BlasContext& blas_context(int device, cudaStream_t stream) {
  static std::mutex mutex;
  // Never destroyed: a cuBLAS handle must not be destroyed after the CUDA runtime has shut
  // down, which the order of static destructors cannot rule out.
  static auto* const contexts = new std::map<std::pair<int, std::uintptr_t>, std::unique_ptr<BlasContext>>;
  std::lock_guard lock(mutex);
  auto& slot = (*contexts)[{device, reinterpret_cast<std::uintptr_t>(stream)}];
  if (!slot) {
    auto context = std::make_unique<BlasContext>();
    // Allocated on `stream` (the current one), the only stream the workspace is used on.
    context->workspace = allocate_bytes(device, gemm_workspace_bytes);
    context->workspace_bytes = gemm_workspace_bytes;
    ET_CUBLAS_CHECK(cublasLtCreate(&context->lt));
    slot = std::move(context);
  }
  return *slot;
}

/// The context's cuBLAS handle, bound to its stream and workspace. Call with the context's
/// mutex held and its device current.
inline cublasHandle_t blas_handle(BlasContext& context, cudaStream_t stream) {
  if (context.blas == nullptr) {
    cublasHandle_t handle = nullptr;
    ET_CUBLAS_CHECK(cublasCreate(&handle));
    context.blas = handle;
    ET_CUBLAS_CHECK(cublasSetStream(handle, stream));
    ET_CUBLAS_CHECK(cublasSetWorkspace(handle, context.workspace.get(), context.workspace_bytes));
  }
  return context.blas;
}

template <class T>
constexpr cudaDataType_t cuda_data_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, half>) return CUDA_R_16F;
  else return CUDA_R_16BF;
}

/// alpha and beta: double for double, float for the others.
template <class T>
using gemm_scale_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <class T>
cublasComputeType_t compute_type(MathMode mode) {
  if constexpr (std::is_same_v<T, double>) {
    return CUBLAS_COMPUTE_64F;
  } else if constexpr (std::is_same_v<T, float>) {
    switch (mode) {
      case MathMode::tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
      case MathMode::bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
      case MathMode::f16: return CUBLAS_COMPUTE_32F_FAST_16F;
      case MathMode::exact: break;
    }
    return CUBLAS_COMPUTE_32F;
  } else {
    return CUBLAS_COMPUTE_32F;
  }
}

/// The cuBLASLt epilogue; `rows_are_result_columns` (the library's D is the result's
/// transpose) decides which library operand the bgrad kinds reduce.
inline cublasLtEpilogue_t lt_epilogue(GemmEpilogue epilogue, bool rows_are_result_columns) {
  switch (epilogue) {
    case GemmEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::relu_bias: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::gelu: return CUBLASLT_EPILOGUE_GELU;
    case GemmEpilogue::gelu_bias: return CUBLASLT_EPILOGUE_GELU_BIAS;
    case GemmEpilogue::gelu_aux: return CUBLASLT_EPILOGUE_GELU_AUX;
    case GemmEpilogue::gelu_aux_bias: return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    case GemmEpilogue::dgelu: return CUBLASLT_EPILOGUE_DGELU;
    case GemmEpilogue::dgelu_bgrad: return CUBLASLT_EPILOGUE_DGELU_BGRAD;
    // The library's A is our right operand when D is the result's transpose.
    case GemmEpilogue::bgrad_left: return rows_are_result_columns ? CUBLASLT_EPILOGUE_BGRADB : CUBLASLT_EPILOGUE_BGRADA;
    case GemmEpilogue::bgrad_right: return rows_are_result_columns ? CUBLASLT_EPILOGUE_BGRADA : CUBLASLT_EPILOGUE_BGRADB;
    case GemmEpilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

/// The largest power of two up to 256 that divides every address a batched operand
/// starts at: what cuBLASLt's alignment preferences ask for.
inline std::uint32_t alignment_bytes(const void* data, std::int64_t batch_stride_bytes) {
  const auto address = reinterpret_cast<std::uintptr_t>(data) | static_cast<std::uintptr_t>(batch_stride_bytes);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

/// Everything cuBLASLt's heuristic answer depends on.
struct AlgorithmKey {
  int device = 0;
  int data_type = 0, compute_type = 0, epilogue = 0, op_a = 0, op_b = 0;
  std::int64_t m = 0, n = 0, k = 0, batch = 0;
  std::int64_t ld_a = 0, ld_b = 0, ld_c = 0, stride_a = 0, stride_b = 0, stride_c = 0;
  std::uint32_t align_a = 0, align_b = 0, align_c = 0, align_bias = 0, align_aux = 0;
  std::int64_t ld_aux = 0;
  auto operator<=>(const AlgorithmKey&) const = default;
};

/// RAII owners of cuBLASLt descriptors.
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, decltype(&cublasLtMatmulDescDestroy)>;
using MatrixLayout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, decltype(&cublasLtMatrixLayoutDestroy)>;
using MatmulPreference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, decltype(&cublasLtMatmulPreferenceDestroy)>;

template <class V>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const V& value) {
  ET_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof value));
}
template <class V>
void set_attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute, const V& value) {
  ET_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof value));
}
template <class V>
void set_attribute(cublasLtMatmulPreference_t preference, cublasLtMatmulPreferenceAttributes_t attribute,
                   const V& value) {
  ET_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof value));
}

inline MatrixLayout make_layout(cudaDataType_t type, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                                std::int64_t batch, std::int64_t batch_stride) {
  cublasLtMatrixLayout_t raw = nullptr;
  ET_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<std::uint64_t>(rows),
                                             static_cast<std::uint64_t>(cols), ld));
  MatrixLayout layout(raw, &cublasLtMatrixLayoutDestroy);
  if (batch > 1) {
    set_attribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<std::int32_t>(batch));
    set_attribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride);
  }
  return layout;
}

/// The cached heuristic answer for `key` (nullopt: cuBLASLt has no algorithm for it),
/// asking cuBLASLt on the first call.
template <class Ask>
std::optional<cublasLtMatmulAlgo_t> cached_algorithm(const AlgorithmKey& key, Ask&& ask) {
  static std::mutex mutex;
  static auto* const cache = new std::map<AlgorithmKey, std::optional<cublasLtMatmulAlgo_t>>;  // never destroyed
  {
    std::lock_guard lock(mutex);
    if (const auto found = cache->find(key); found != cache->end()) return found->second;
  }
  const std::optional<cublasLtMatmulAlgo_t> answer = ask();
  std::lock_guard lock(mutex);
  cache->emplace(key, answer);
  return answer;
}

/// c[i] = alpha * a[i] @ b[i] + beta * c[i] (gemm_problem.hpp) on device I's current
/// stream, with `epilogue` applied in float before rounding to T (its bias and aux in
/// `buffers`: device memory, bias vectors of type T). Returns false, having queued nothing,
/// when an epilogue was asked for and cuBLASLt has no algorithm with it, or the result is
/// laid out so that it cannot apply (a bias or aux runs along the library's D, so all but
/// the bgrad_* kinds need a row-major result, and aux one matrix): the caller then
/// computes the product and the epilogue separately. Throws et::Error naming the cuBLAS
/// status if a call fails.
template <int I, class T>
bool gemm(Backend<I>, const GemmProblem& p, MathMode mode, GemmEpilogue epilogue, const EpilogueBuffers<T>& buffers) {
  constexpr int device = I;
  const ColumnMajorGemm g = column_major(p);
  const bool along_d_rows = has_bias(epilogue) || uses_aux(epilogue);  // dgelu_bgrad uses aux
  if (along_d_rows && !g.rows_are_result_columns) return false;  // the bias (and aux) run along D's rows
  if (uses_aux(epilogue) && g.batch != 1) return false;
  if (g.batch > INT_MAX)
    throw Error("et: matmul: a batch of " + std::to_string(g.batch) + " products is more than cuBLAS takes (2^31 - 1)");
  const cublasOperation_t op_a = g.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = g.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  constexpr cudaDataType_t type = cuda_data_type<T>();
  const cublasComputeType_t compute = compute_type<T>(mode);
  constexpr cudaDataType_t scale_type = std::is_same_v<T, double> ? CUDA_R_64F : CUDA_R_32F;
  const gemm_scale_t<T> alpha = static_cast<gemm_scale_t<T>>(p.scale.alpha);
  const gemm_scale_t<T> beta = static_cast<gemm_scale_t<T>>(p.scale.beta);  // C is D (in place)

  const CudaCall call(device, "matmul");
  const cudaStream_t stream = call.stream();
  BlasContext& context = blas_context(device, stream);
  std::lock_guard lock(context.mutex);

  cublasLtMatmulDesc_t raw_desc = nullptr;
  ET_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw_desc, compute, scale_type));
  const MatmulDesc desc(raw_desc, &cublasLtMatmulDescDestroy);
  set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSA, op_a);
  set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_TRANSB, op_b);
  if (epilogue != GemmEpilogue::none) {
    set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE, lt_epilogue(epilogue, g.rows_are_result_columns));
    if (has_bias(epilogue) || writes_bias_gradient(epilogue)) {
      const void* bias = buffers.bias;
      set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
      // The same bias for every matrix of a batch (also cuBLASLt's default).
      set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, std::int64_t{0});
    }
    if (uses_aux(epilogue)) {
      set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, buffers.aux);
      set_attribute(raw_desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, buffers.aux_ld);
    }
  }
  const MatrixLayout a_layout = make_layout(type, g.a.rows, g.a.cols, g.a.ld, g.batch, g.a.batch_stride);
  const MatrixLayout b_layout = make_layout(type, g.b.rows, g.b.cols, g.b.ld, g.batch, g.b.batch_stride);
  const MatrixLayout d_layout = make_layout(type, g.m, g.n, g.ldd, g.batch, g.batch_stride_d);

  AlgorithmKey key;
  key.device = device;
  key.data_type = static_cast<int>(type);
  key.compute_type = static_cast<int>(compute);
  key.epilogue = static_cast<int>(epilogue);
  key.op_a = static_cast<int>(op_a);
  key.op_b = static_cast<int>(op_b);
  key.m = g.m, key.n = g.n, key.k = g.k, key.batch = g.batch;
  key.ld_a = g.a.ld, key.ld_b = g.b.ld, key.ld_c = g.ldd;
  key.stride_a = g.a.batch_stride, key.stride_b = g.b.batch_stride, key.stride_c = g.batch_stride_d;
  const std::int64_t element = sizeof(T);
  key.align_a = alignment_bytes(g.a.data, g.batch > 1 ? g.a.batch_stride * element : 0);
  key.align_b = alignment_bytes(g.b.data, g.batch > 1 ? g.b.batch_stride * element : 0);
  key.align_c = alignment_bytes(g.d, g.batch > 1 ? g.batch_stride_d * element : 0);
  key.align_bias = has_bias(epilogue) || writes_bias_gradient(epilogue) ? alignment_bytes(buffers.bias, 0) : 0;
  key.align_aux = uses_aux(epilogue) ? alignment_bytes(buffers.aux, 0) : 0;
  key.ld_aux = uses_aux(epilogue) ? buffers.aux_ld : 0;

  const auto algorithm = cached_algorithm(key, [&]() -> std::optional<cublasLtMatmulAlgo_t> {
    cublasLtMatmulPreference_t raw_preference = nullptr;
    ET_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw_preference));
    const MatmulPreference preference(raw_preference, &cublasLtMatmulPreferenceDestroy);
    set_attribute(raw_preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                  static_cast<std::uint64_t>(context.workspace_bytes));
    set_attribute(raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
    set_attribute(raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
    set_attribute(raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
    set_attribute(raw_preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(context.lt, raw_desc, a_layout.get(), b_layout.get(),
                                                                 d_layout.get(), d_layout.get(), raw_preference, 1,
                                                                 &result, &found);
    // NOT_SUPPORTED (or any refusal) means no algorithm: cuBLAS then gets to say why.
    if (status != CUBLAS_STATUS_SUCCESS || found == 0 || result.state != CUBLAS_STATUS_SUCCESS) return std::nullopt;
    return result.algo;
  });

  if (!algorithm) {
    if (epilogue != GemmEpilogue::none) return false;
    // cuBLAS's own GEMM, for the problems cuBLASLt has no algorithm for (its 32-bit sizes).
    for (const std::int64_t size : {g.m, g.n, g.k, g.a.ld, g.b.ld, g.ldd})
      if (size > INT_MAX)
        throw Error("et: matmul: cuBLASLt has no algorithm for this product and it is too large for cuBLAS "
                    "(a size of " + std::to_string(size) + " exceeds 2^31 - 1)");
    const cublasHandle_t handle = blas_handle(context, stream);
    ET_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        handle, op_a, op_b, static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k), &alpha, g.a.data, type,
        static_cast<int>(g.a.ld), g.a.batch_stride, g.b.data, type, static_cast<int>(g.b.ld), g.b.batch_stride, &beta,
        g.d, type, static_cast<int>(g.ldd), g.batch_stride_d, static_cast<int>(g.batch), compute, CUBLAS_GEMM_DEFAULT));
    ++gemm_counters().cublas_gemms;
    return true;
  }
  ET_CUBLAS_CHECK(cublasLtMatmul(context.lt, raw_desc, &alpha, g.a.data, a_layout.get(), g.b.data, b_layout.get(),
                                 &beta, g.d, d_layout.get(), g.d, d_layout.get(), &*algorithm, context.workspace.get(),
                                 context.workspace_bytes, stream));
  ++gemm_counters().lt_matmuls;
  if (epilogue != GemmEpilogue::none) ++gemm_counters().fused_epilogues;
  return true;
}

}  // namespace et::detail::cuda_backend
