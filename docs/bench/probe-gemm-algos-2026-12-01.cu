// A probe, not a benchmark of etensor: how far cuBLASLt's first heuristic choice (what
// etensor and PyTorch run) is from the fastest of the algorithms the heuristic offers, on the
// float32 GEMMs of Table 7's fully connected layers (FCN-R at batch 1024, the LSTM's decoder
// over 32 x 128 steps, AlexNet-S's classifier at batch 16), forward, data and weight
// gradients, exact float32 and TF32. If the fastest were well ahead, timing the offered
// algorithms once per shape (as cudnn.benchmark does for convolutions, or PyTorch's
// TunableOp for GEMMs) would be the lever for those rows.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 probe-gemm-algos-2026-12-01.cu -lcublasLt -o probe-gemm-algos
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(x)                                                        \
  do {                                                                       \
    cudaError_t e = (x);                                                     \
    if (e != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));           \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)
#define CHECK_LT(x)                                                          \
  do {                                                                       \
    cublasStatus_t s = (x);                                                  \
    if (s != CUBLAS_STATUS_SUCCESS) {                                        \
      std::fprintf(stderr, "%s: status %d\n", #x, static_cast<int>(s));      \
      std::exit(1);                                                          \
    }                                                                        \
  } while (0)

struct Problem {
  const char* name;
  int m, n, k;
  bool ta, tb;
};

int main() {
  cublasLtHandle_t lt;
  CHECK_LT(cublasLtCreate(&lt));
  const size_t workspace_bytes = 32u << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  std::vector<Problem> problems;
  // Row-major Y[M, N] = X[M, K] W[N, K]^T in cuBLAS's column-major terms (see the header).
  auto layer = [&](const char* net, int M, int K, int N) {
    static char names[64][96];
    static int used = 0;
    auto name = [&](const char* what) {
      std::snprintf(names[used], sizeof names[used], "%s %dx%dx%d %s", net, M, K, N, what);
      return names[used++];
    };
    problems.push_back({name("forward"), N, M, K, true, false});
    problems.push_back({name("dgrad"), K, M, N, false, false});
    problems.push_back({name("wgrad"), K, N, M, false, true});
  };
  layer("FCN-R", 1024, 784, 2048);
  layer("FCN-R", 1024, 2048, 4096);
  layer("FCN-R", 1024, 4096, 1024);
  layer("LSTM decoder", 4096, 256, 10000);
  layer("AlexNet-S fc", 16, 9216, 4096);
  layer("AlexNet-S fc", 16, 4096, 4096);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  std::printf("%-40s %-5s %10s %10s %6s %s\n", "problem", "math", "first us", "best us", "best/", "offered");
  for (const bool tf32 : {false, true}) {
    for (const Problem& p : problems) {
      const int rows_a = p.ta ? p.k : p.m, cols_a = p.ta ? p.m : p.k;
      const int rows_b = p.tb ? p.n : p.k, cols_b = p.tb ? p.k : p.n;
      float *a, *b, *c;
      CHECK_CUDA(cudaMalloc(&a, sizeof(float) * size_t(rows_a) * cols_a));
      CHECK_CUDA(cudaMalloc(&b, sizeof(float) * size_t(rows_b) * cols_b));
      CHECK_CUDA(cudaMalloc(&c, sizeof(float) * size_t(p.m) * p.n));
      CHECK_CUDA(cudaMemset(a, 0x3c, sizeof(float) * size_t(rows_a) * cols_a));
      CHECK_CUDA(cudaMemset(b, 0x3c, sizeof(float) * size_t(rows_b) * cols_b));
      cublasLtMatmulDesc_t desc;
      CHECK_LT(cublasLtMatmulDescCreate(&desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t opa = p.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = p.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
      CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
      CHECK_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
      cublasLtMatrixLayout_t la, lb, lc;
      CHECK_LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, rows_a, cols_a, rows_a));
      CHECK_LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, rows_b, cols_b, rows_b));
      CHECK_LT(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, p.m, p.n, p.m));
      cublasLtMatmulPreference_t pref;
      CHECK_LT(cublasLtMatmulPreferenceCreate(&pref));
      CHECK_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                                    sizeof workspace_bytes));
      cublasLtMatmulHeuristicResult_t results[16];
      int found = 0;
      CHECK_LT(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 16, results, &found));
      const float one = 1, zero = 0;
      std::vector<double> times;
      for (int i = 0; i < found; ++i) {
        auto run = [&] {
          return cublasLtMatmul(lt, desc, &one, a, la, b, lb, &zero, c, lc, c, lc, &results[i].algo, workspace,
                                workspace_bytes, stream);
        };
        if (run() != CUBLAS_STATUS_SUCCESS) {
          times.push_back(1e30);
          continue;
        }
        for (int w = 0; w < 10; ++w) run();
        std::vector<float> ms(15);
        for (float& t : ms) {
          CHECK_CUDA(cudaEventRecord(start, stream));
          for (int r = 0; r < 5; ++r) run();
          CHECK_CUDA(cudaEventRecord(stop, stream));
          CHECK_CUDA(cudaEventSynchronize(stop));
          CHECK_CUDA(cudaEventElapsedTime(&t, start, stop));
        }
        std::sort(ms.begin(), ms.end());
        times.push_back(1000.0 * ms[ms.size() / 2] / 5);
      }
      const double first = times.empty() ? 0 : times[0];
      const double best = times.empty() ? 0 : *std::min_element(times.begin(), times.end());
      std::printf("%-40s %-5s %10.1f %10.1f %6.3f %d\n", p.name, tf32 ? "tf32" : "fp32", first, best,
                  first > 0 ? best / first : 0.0, found);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
      CHECK_CUDA(cudaFree(a));
      CHECK_CUDA(cudaFree(b));
      CHECK_CUDA(cudaFree(c));
    }
  }
  return 0;
}
