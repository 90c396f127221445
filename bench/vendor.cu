// The vendor libraries called directly, with no etensor in between: the limits that
// scripts/bench-all sets beside et_bench_gemm's and et_bench_conv's figures.
//
//   gemm-fp32          cublasGemmEx, float32, CUBLAS_COMPUTE_32F, 8192^3 (as et_bench_gemm)
//   gemm-tf32          the same with CUBLAS_COMPUTE_32F_FAST_TF32
//   gemm-bf16          bfloat16 A, B, C, CUBLAS_COMPUTE_32F
//   linear-bias-relu   the bare bfloat16 GEMM of the linear layer, x [8192, 4096] times
//                      w [4096, 4096] transposed, WITHOUT the bias and ReLU: less work than
//                      the layer, so a bound no implementation of the layer can beat
//   conv bf16 nhwc, fp32 nchw tf32, fp32 nchw ieee
//                      cuDNN's legacy API: cudnnFindConvolutionForwardAlgorithm times every
//                      algorithm, the fastest runs through cudnnConvolutionForward (conv 3x3,
//                      N=32, C=K=128, 56x56, padding 1, as et_bench_conv). TF32 off means
//                      CUDNN_FMA_MATH and only algorithms cuDNN reports with that math type.
// Timing (bench/common.cuh, steady_median_us): one second of warm-up, then the median of
// `reps` event-timed calls (GEMMs) or batches of 10 calls (convolutions). Each result is checked
// (GEMM: 256 sampled elements against double-precision dot products on the host;
// convolution: against etensor's double-precision convolution), so the limit is right too.
//
// Usage: et_bench_vendor [--json PATH] [--reps N] [--size N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"

#include <cublas_v2.h>
#if defined(ET_WITH_CUDNN)
#include <cudnn.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;

struct Result {
  std::string family, workload, api;
  double us = 0, tflops = 0, max_error = 0, tolerance = 0;
  bool ok() const { return max_error <= tolerance; }
};

void check_cublas(cublasStatus_t status, const char* call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cublasGetStatusString(status));
}

/// Row-major z [m, n] = a [m, k] times b ([k, n], or [n, k] transposed) through one
/// cublasGemmEx: cuBLAS is column-major, so it computes z^T = b^T a^T.
template <class T>
Result gemm(cublasHandle_t handle, const char* name, cublasComputeType_t compute, const char* compute_name,
            std::int64_t m, std::int64_t n, std::int64_t k, bool b_transposed, int reps, double tolerance) {
  const auto a = et::randn<T>(et::cuda<0>, {m, k}, 1);
  const auto b = b_transposed ? et::randn<T>(et::cuda<0>, {n, k}, 2) : et::randn<T>(et::cuda<0>, {k, n}, 2);
  auto z = et::empty<T>(et::cuda<0>, {m, n});
  const cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    check_cublas(cublasGemmEx(handle, b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k),
                              &alpha, b.data(), type, b_transposed ? int(k) : int(n), a.data(), type, int(k), &beta,
                              z.data(), type, int(n), compute, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  };
  Result r{"gemm", name, std::string("cublasGemmEx ") + compute_name};
  r.us = bench::steady_median_us(run, 1.0, reps, 1);
  r.tflops = 2.0 * double(m) * double(n) * double(k) / (r.us * 1e-6) / 1e12;
  r.max_error = bench::sampled_error(a, b, b_transposed, z);
  r.tolerance = tolerance;
  return r;
}

#if defined(ET_WITH_CUDNN)
constexpr int N = 32, C = 128, K = 128, H = 56, W = 56, R = 3, S = 3;

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw std::runtime_error(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

template <class T>
Result conv(cudnnHandle_t handle, const char* name, bool nhwc, bool tf32, int reps, double tolerance) {
  const auto x = et::randn<T>(et::cuda<0>, nhwc ? et::Shape<4>{N, H, W, C} : et::Shape<4>{N, C, H, W}, 1);
  const auto w = et::randn<T>(et::cuda<0>, nhwc ? et::Shape<4>{K, R, S, C} : et::Shape<4>{K, C, R, S}, 2);
  auto y = et::empty<T>(et::cuda<0>, nhwc ? et::Shape<4>{N, H, W, K} : et::Shape<4>{N, K, H, W});
  const cudnnTensorFormat_t format = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnDataType_t type = std::is_same_v<T, float> ? CUDNN_DATA_FLOAT : CUDNN_DATA_BFLOAT16;
  const bool fma_only = std::is_same_v<T, float> && !tf32;

  cudnnTensorDescriptor_t x_desc{}, y_desc{};
  cudnnFilterDescriptor_t w_desc{};
  cudnnConvolutionDescriptor_t conv_desc{};
  check_cudnn(cudnnCreateTensorDescriptor(&x_desc), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnCreateTensorDescriptor(&y_desc), "cudnnCreateTensorDescriptor");
  check_cudnn(cudnnCreateFilterDescriptor(&w_desc), "cudnnCreateFilterDescriptor");
  check_cudnn(cudnnCreateConvolutionDescriptor(&conv_desc), "cudnnCreateConvolutionDescriptor");
  check_cudnn(cudnnSetTensor4dDescriptor(x_desc, format, type, N, C, H, W), "cudnnSetTensor4dDescriptor");
  check_cudnn(cudnnSetTensor4dDescriptor(y_desc, format, type, N, K, H, W), "cudnnSetTensor4dDescriptor");
  check_cudnn(cudnnSetFilter4dDescriptor(w_desc, type, format, K, C, R, S), "cudnnSetFilter4dDescriptor");
  check_cudnn(cudnnSetConvolution2dDescriptor(conv_desc, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
              "cudnnSetConvolution2dDescriptor");
  // bfloat16 needs tensor cores; float may use TF32 under DEFAULT_MATH (Ampere and later)
  // and keeps full precision under FMA_MATH.
  const cudnnMathType_t math = !std::is_same_v<T, float> ? CUDNN_TENSOR_OP_MATH : tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
  check_cudnn(cudnnSetConvolutionMathType(conv_desc, math), "cudnnSetConvolutionMathType");

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  check_cudnn(cudnnFindConvolutionForwardAlgorithm(handle, x_desc, w_desc, conv_desc, y_desc,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf),
              "cudnnFindConvolutionForwardAlgorithm");
  const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
  for (int i = 0; i < returned && !best; ++i)  // sorted fastest first
    if (perf[i].status == CUDNN_STATUS_SUCCESS && (!fma_only || perf[i].mathType == CUDNN_FMA_MATH)) best = &perf[i];
  if (!best) throw std::runtime_error(std::string("cuDNN found no usable algorithm for ") + name);
  check_cudnn(cudnnSetConvolutionMathType(conv_desc, best->mathType), "cudnnSetConvolutionMathType");
  void* workspace = nullptr;
  if (best->memory) ET_CUDA_CHECK(cudaMalloc(&workspace, best->memory));

  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    check_cudnn(cudnnConvolutionForward(handle, &alpha, x_desc, x.data(), w_desc, w.data(), conv_desc, best->algo,
                                        workspace, best->memory, &beta, y_desc, y.data()),
                "cudnnConvolutionForward");
  };
  Result r{"conv", name,
           "cudnnConvolutionForward algo " + std::to_string(int(best->algo)) +
               (best->mathType == CUDNN_FMA_MATH ? " (FMA math)" : " (tensor-op math)")};
  r.us = bench::steady_median_us(run, 1.0, reps, 10);
  r.tflops = 2.0 * N * K * C * R * S * H * W / (r.us * 1e-6) / 1e12;
  const et::Conv2dOptions exact{.padding = {1, 1}, .layout = nhwc ? et::Layout::nhwc : et::Layout::nchw};
  const auto reference = et::conv2d(et::eval(et::cast<double>(x)), et::eval(et::cast<double>(w)), exact);
  r.max_error = et::max(et::abs(et::cast<double>(y) - reference)).item() / et::max(et::abs(reference)).item();
  r.tolerance = tolerance;

  if (workspace) ET_CUDA_CHECK(cudaFree(workspace));
  cudnnDestroyConvolutionDescriptor(conv_desc);
  cudnnDestroyFilterDescriptor(w_desc);
  cudnnDestroyTensorDescriptor(x_desc);
  cudnnDestroyTensorDescriptor(y_desc);
  return r;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 20;
  std::int64_t size = 8192;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(5, std::atoi(argv[++i]));
    else if (arg == "--size" && i + 1 < argc) size = std::max<std::int64_t>(16, std::atoll(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--size N]\n", argv[0]);
      return 2;
    }
  }
  if (!et::cuda_available()) {
    std::printf("et_bench_vendor: no CUDA device\n");
    return 77;
  }
  try {
    std::printf("device: %s; cuBLAS %d", et::device_properties(0).name.c_str(), [] {
      int version = 0;
      cublasGetProperty(MAJOR_VERSION, &version);
      return version;
    }());
#if defined(ET_WITH_CUDNN)
    std::printf(", cuDNN %zu", cudnnGetVersion());
#endif
    std::printf("; median of %d\n\n", reps);
    std::vector<Result> results;
    cublasHandle_t blas = nullptr;
    check_cublas(cublasCreate(&blas), "cublasCreate");
    results.push_back(gemm<float>(blas, "gemm-fp32", CUBLAS_COMPUTE_32F, "CUBLAS_COMPUTE_32F", size, size, size, false,
                                  reps, 5e-5));
    results.push_back(gemm<float>(blas, "gemm-tf32", CUBLAS_COMPUTE_32F_FAST_TF32, "CUBLAS_COMPUTE_32F_FAST_TF32", size,
                                  size, size, false, reps, 3e-3));
    results.push_back(gemm<et::bfloat16>(blas, "gemm-bf16", CUBLAS_COMPUTE_32F, "bf16, CUBLAS_COMPUTE_32F", size, size,
                                         size, false, reps, 1e-2));
    results.push_back(gemm<et::bfloat16>(blas, "linear-bias-relu", CUBLAS_COMPUTE_32F,
                                         "bf16 x w^T, no bias or ReLU", size, size / 2, size / 2, true, reps, 1e-2));
    cublasDestroy(blas);
#if defined(ET_WITH_CUDNN)
    cudnnHandle_t dnn = nullptr;
    check_cudnn(cudnnCreate(&dnn), "cudnnCreate");
    results.push_back(conv<et::bfloat16>(dnn, "bf16 nhwc", true, false, reps, 2e-2));
    results.push_back(conv<float>(dnn, "fp32 nchw tf32", false, true, reps, 1e-2));
    // FMA math (no TF32), but cuDNN's fastest legacy algorithm here is Winograd, whose
    // transforms cost a little accuracy (1.1e-5 measured on an H200): hence 3e-5.
    results.push_back(conv<float>(dnn, "fp32 nchw ieee", false, false, reps, 3e-5));
    cudnnDestroy(dnn);
#else
    std::printf("built without cuDNN: no convolution limits\n");
#endif
    bool ok = true;
    std::printf("%-6s %-18s %10s %9s %10s  %-6s %s\n", "family", "workload", "us", "TFLOP/s", "error", "check", "call");
    for (const Result& r : results) {
      std::printf("%-6s %-18s %10.1f %9.1f %10.2e  %-6s %s\n", r.family.c_str(), r.workload.c_str(), r.us, r.tflops,
                  r.max_error, r.ok() ? "ok" : "WRONG", r.api.c_str());
      ok = ok && r.ok();
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"benchmark\": \"vendor\", \"device\": \"" << et::device_properties(0).name << "\", \"results\": [";
      for (std::size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        out << (i ? ", " : "") << "{\"family\": \"" << r.family << "\", \"workload\": \"" << r.workload
            << "\", \"api\": \"" << r.api << "\", \"us\": " << r.us << ", \"tflops\": " << r.tflops
            << ", \"max_error\": " << r.max_error << ", \"tolerance\": " << r.tolerance
            << ", \"ok\": " << (r.ok() ? "true" : "false") << "}";
      }
      out << "]}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_vendor: %s\n", e.what());
    return 1;
  }
}
