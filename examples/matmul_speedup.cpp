// How much faster is a GPU at a matrix product? One N x N float product on the CPU
// (Eigen, all OpenMP threads) and on the GPU (cuBLAS), timed, with the speed-up. The
// CPU product is checked against a double-precision host computation of sampled
// entries, and the GPU products against the CPU's.
//
//   matmul_speedup            N = 1024 (quick enough for CI)
//   matmul_speedup 10000      the seeds' exercise: 2 TFLOP per product; the CPU needs
//                             seconds to minutes for it (with 16 to 2 cores), a GPU milliseconds
//
// Without a GPU it times the CPU only and says so.
#include <et/et.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

// Seconds taken by the fastest of `repeats` runs of f, which must wait for its device.
template <class F>
double best_seconds(int repeats, F&& f) {
  double best = INFINITY;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// The worst error of 64 entries of c = a @ b (n x n, row-major) against a double-precision
// dot product, relative to sum_k |a[i,k] b[k,j]|, the scale of rounding errors in entry (i, j).
double sampled_error(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& c,
                     std::int64_t n) {
  double worst = 0;
  std::uint64_t state = 12345;
  for (int sample = 0; sample < 64; ++sample) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;  // a small LCG picks (i, j)
    const std::int64_t i = static_cast<std::int64_t>((state >> 33) % static_cast<std::uint64_t>(n));
    const std::int64_t j = static_cast<std::int64_t>((state >> 13) % static_cast<std::uint64_t>(n));
    double exact = 0, scale = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const double term = static_cast<double>(a[i * n + k]) * b[k * n + j];
      exact += term;
      scale += std::abs(term);
    }
    worst = std::max(worst, std::abs(c[i * n + j] - exact) / scale);
  }
  return worst;
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 1024;
  if (n <= 0) {
    std::fprintf(stderr, "usage: matmul_speedup [N > 0]\n");
    return 2;
  }
  const double flop = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  std::printf("matmul_speedup: %lld x %lld float, %.3g GFLOP per product\n", static_cast<long long>(n),
              static_cast<long long>(n), flop * 1e-9);

  // [guide:matmul-cpu]
  const auto a = et::randn<float>(et::cpu, {n, n}, /*seed=*/1);
  const auto b = et::randn<float>(et::cpu, {n, n}, /*seed=*/2);
  auto c = et::empty<float>(et::cpu, {n, n});
  // Assigning the product to c runs one Eigen GEMM straight into c's storage.
  const double cpu_seconds = best_seconds(n <= 2048 ? 3 : 1, [&] { c = et::matmul(a, b); });
  // [guide:end]
  const double cpu_error = sampled_error(a.to_vector(), b.to_vector(), c.to_vector(), n);
  const std::string eigen = "Eigen, " + std::to_string(omp_get_max_threads()) + " threads";
  std::printf("  %-7s %-17s %10.3f ms %8.1f GFLOP/s                   (sampled entries: relative error %.1e)\n",
              "cpu", eigen.c_str(), cpu_seconds * 1e3, flop / cpu_seconds * 1e-9, cpu_error);
  if (cpu_error > 1e-5) {
    std::printf("FAILED: the CPU product is wrong\n");
    return 1;
  }

  return et::try_gpu([&](auto dev) {
    using D = decltype(dev);
    if constexpr (std::is_same_v<D, et::Cpu>) {
      std::printf("  no GPU found: timed the CPU only\nok\n");
      return 0;
    } else {
      const auto a_gpu = a.to(dev);
      const auto b_gpu = b.to(dev);
      auto c_gpu = et::empty<float>(dev, {n, n});
      bool ok = true;
      for (const et::MathMode mode : {et::MathMode::exact, et::MathMode::tf32}) {
        // [guide:matmul-gpu]
        // The first product of a shape creates the cuBLAS handle and picks an algorithm:
        // run it once untimed. Kernels are asynchronous, so each timed run waits for the GPU.
        c_gpu = et::matmul(a_gpu, b_gpu, mode);
        et::synchronize(dev);
        const double gpu_seconds = best_seconds(5, [&] {
          c_gpu = et::matmul(a_gpu, b_gpu, mode);
          et::synchronize(dev);
        });
        // [guide:end]
        // Normwise difference from the CPU's product. exact rounds like the CPU, in another
        // order; tf32 rounds the inputs to 10-bit mantissas first (about 5e-4 relative).
        const auto gpu_on_cpu = c_gpu.to(et::cpu);
        const double difference = et::norm(gpu_on_cpu - c).item() / et::norm(c).item();
        const double tolerance = mode == et::MathMode::exact ? 1e-4 : 3e-3;
        std::printf("  %-7s %-17s %10.3f ms %8.1f GFLOP/s  speed-up %7.1fx  (relative difference from the CPU %.1e)\n",
                    et::device_name<D>.c_str(), mode == et::MathMode::exact ? "cuBLAS, exact" : "cuBLAS, tf32",
                    gpu_seconds * 1e3, flop / gpu_seconds * 1e-9, cpu_seconds / gpu_seconds, difference);
        ok = ok && difference < tolerance;
      }
      std::printf("%s\n", ok ? "ok" : "FAILED: the GPU product differs from the CPU's");
      return ok ? 0 : 1;
    }
  });
}
