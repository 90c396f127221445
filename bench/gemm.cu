// Matrix-product throughput through etensor (cuBLASLt), to be read beside PyTorch:
// bench/peers_gemm.py runs the same workloads in PyTorch eager and torch.compile and
// prints one table with the ratios.
//
// Workloads (square sizes from --size, default 8192; the linear layer uses size x size/2):
//   gemm-fp32          z = matmul(a, b), float32, MathMode::exact (CUBLAS_COMPUTE_32F)
//   gemm-tf32          the same with MathMode::tf32 (CUBLAS_COMPUTE_32F_FAST_TF32)
//   gemm-bf16          bfloat16 a, b and z, float accumulation
//   linear-bias-relu   y = relu(matmul(x, w.transpose(0, 1)) + b), bfloat16, x [8192, 4096],
//                      w [4096, 4096] ([out, in], as torch.nn.Linear), b [4096]: one
//                      cublasLtMatmul with the RELU_BIAS epilogue (checked by counting)
// Every workload writes into an existing tensor (no allocation in the timed loop).
// Timing: a CUDA event pair around every repetition, after a warm-up of one second of
// the same work (steady clocks, bench/common.cuh steady_median_us); the median is
// reported, as TFLOP/s counting 2*M*N*K. Inputs are standard normal, never zeros.
// Correctness: 256 sampled elements of each result against a double-precision dot
// product of the same (rounded) inputs, on the scale sum_k |a_ik b_kj|.
//
// Usage: et_bench_gemm [--json PATH] [--reps N] [--size N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "common.cuh"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Gpu = et::Cuda<0>;
constexpr double warmup_seconds = 1.0;

struct Result {
  std::string workload, dtype, mode;
  std::int64_t m = 0, n = 0, k = 0;
  double us = 0, tflops = 0, max_error = 0, tolerance = 0;
  double lt_calls = 0, fused_calls = 0;  // per evaluation
  bool ok = false;
};

template <class T>
et::Tensor<T, 2, Gpu> normal(std::int64_t rows, std::int64_t cols, std::uint64_t seed) {
  return et::randn<T>(et::cuda<0>, {rows, cols}, seed);
}

/// Calls made by one evaluation, from etensor's counters.
template <class F>
std::pair<double, double> calls_per_run(F&& run) {
  auto& counters = et::detail::gemm_counters();
  const auto lt = counters.lt_matmuls.load(), fused = counters.fused_epilogues.load();
  run();
  return {double(counters.lt_matmuls.load() - lt), double(counters.fused_epilogues.load() - fused)};
}

template <class T>
Result bench_gemm(const char* name, const char* dtype, et::MathMode mode, const char* mode_name, std::int64_t size,
                  int reps, double tolerance) {
  const auto a = normal<T>(size, size, 1), b = normal<T>(size, size, 2);
  auto z = et::empty<T>(et::cuda<0>, {size, size});
  auto run = [&] { z = et::matmul(a, b, mode); };
  Result r;
  r.workload = name, r.dtype = dtype, r.mode = mode_name, r.m = r.n = r.k = size;
  std::tie(r.lt_calls, r.fused_calls) = calls_per_run(run);
  r.us = bench::steady_median_us(run, warmup_seconds, reps);
  r.tflops = 2.0 * double(size) * double(size) * double(size) / (r.us * 1e-6) / 1e12;
  r.max_error = bench::sampled_error(a, b, false, z, {}, false);
  r.tolerance = tolerance;
  r.ok = r.max_error <= tolerance && r.lt_calls == 1;
  return r;
}

Result bench_linear(std::int64_t batch, std::int64_t features, int reps) {
  using T = et::bfloat16;
  const auto x = normal<T>(batch, features, 3), w = normal<T>(features, features, 4);
  const auto bias = et::randn<T>(et::cuda<0>, {features}, 5);
  auto y = et::empty<T>(et::cuda<0>, {batch, features});
  auto run = [&] { y = et::relu(et::matmul(x, w.transpose(0, 1)) + bias); };
  Result r;
  r.workload = "linear-bias-relu", r.dtype = "bfloat16", r.mode = "-", r.m = batch, r.n = features, r.k = features;
  std::tie(r.lt_calls, r.fused_calls) = calls_per_run(run);
  r.us = bench::steady_median_us(run, warmup_seconds, reps);
  r.tflops = 2.0 * double(batch) * double(features) * double(features) / (r.us * 1e-6) / 1e12;
  std::vector<double> bias_values;
  for (const T& v : bias.to_vector()) bias_values.push_back(static_cast<float>(v));
  r.max_error = bench::sampled_error(x, w, true, y, bias_values, true);
  r.tolerance = 1e-2;
  r.ok = r.max_error <= r.tolerance && r.lt_calls == 1 && r.fused_calls == 1;
  return r;
}

void write_json(const std::string& path, const std::vector<Result>& results, int reps) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << "{\n  \"benchmark\": \"gemm\",\n  \"device\": \"" << et::device_properties(0).name << "\",\n"
      << "  \"reps\": " << reps << ",\n  \"results\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    char line[640];
    std::snprintf(line, sizeof line,
                  "    {\"workload\": \"%s\", \"dtype\": \"%s\", \"mode\": \"%s\", "
                  "\"m\": %lld, \"n\": %lld, \"k\": %lld, \"us\": %.3f, \"tflops\": %.3f, "
                  "\"max_error\": %.3e, \"tolerance\": %.1e, \"lt_calls\": %.0f, \"fused_calls\": %.0f, "
                  "\"ok\": %s}%s\n",
                  r.workload.c_str(), r.dtype.c_str(), r.mode.c_str(), static_cast<long long>(r.m),
                  static_cast<long long>(r.n), static_cast<long long>(r.k), r.us, r.tflops, r.max_error, r.tolerance,
                  r.lt_calls, r.fused_calls, r.ok ? "true" : "false", i + 1 < results.size() ? "," : "");
    out << line;
  }
  out << "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;
  int reps = 30;
  std::int64_t size = 8192;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(5, std::atoi(argv[++i]));
    else if (arg == "--size" && i + 1 < argc) size = std::max<std::int64_t>(16, std::atoll(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--size N]\n", argv[0]);
      return 2;
    }
  }
  try {
    if (!et::cuda_available()) {
      std::printf("SKIPPED: no CUDA device\n");
      return 77;
    }
    std::printf("device: %s, cuBLASLt %zu, size %lld, median of %d\n", et::device_properties(0).name.c_str(),
                cublasLtGetVersion(), static_cast<long long>(size), reps);
    std::vector<Result> results;
    results.push_back(bench_gemm<float>("gemm-fp32", "float32", et::MathMode::exact, "exact", size, reps, 5e-5));
    results.push_back(bench_gemm<float>("gemm-tf32", "float32", et::MathMode::tf32, "tf32", size, reps, 3e-3));
    results.push_back(bench_gemm<et::bfloat16>("gemm-bf16", "bfloat16", et::MathMode::exact, "-", size, reps, 1e-2));
    results.push_back(bench_linear(size, size / 2, reps));
    std::printf("\n%-18s %-9s %-6s %-18s %10s %9s %10s %4s %5s %s\n", "workload", "dtype", "mode", "m x n x k", "us",
                "TFLOP/s", "max error", "Lt", "fused", "check");
    bool ok = true;
    for (const Result& r : results) {
      char dims[64];
      std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", static_cast<long long>(r.m), static_cast<long long>(r.n),
                    static_cast<long long>(r.k));
      std::printf("%-18s %-9s %-6s %-18s %10.1f %9.1f %10.2e %4.0f %5.0f %s\n", r.workload.c_str(), r.dtype.c_str(),
                  r.mode.c_str(), dims, r.us, r.tflops, r.max_error, r.lt_calls, r.fused_calls,
                  r.ok ? "ok" : "FAILED");
      ok = ok && r.ok;
    }
    if (!json.empty()) write_json(json, results, reps);
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_gemm: %s\n", e.what());
    return 1;
  }
}
