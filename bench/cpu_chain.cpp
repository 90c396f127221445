// The CPU backend: the 10-operation chain of bench/suite.cu on 2^24 floats, on the CPU
//
//   z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f      3 in, 1 out, 16 B/element
//
// side by side with
//   hand OpenMP       a hand-written `#pragma omp parallel for simd` loop of the same
//                     function (the limit; the same libm calls etensor's functors make)
//   Eigen             Eigen's own Array expression of the same function, on one thread
//                     (Eigen does not parallelize coefficient-wise expressions) and on
//                     every thread, each evaluating the expression over its own segment.
// Plain C++ (no nvcc), built with -O3 -march=x86-64-v3 (AVX2 and FMA, not -march=native:
// it is built on one machine and run on another) and OpenMP. Timing: wall clock around
// each evaluation after two warm-up runs; the median is reported. Every result is checked
// against a double-precision evaluation of the chain on 4096 elements spread over the array.
//
// Usage: et_bench_cpu_chain [--json PATH] [--reps N] [--log2 K]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include <Eigen/Core>

#include "host_timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <omp.h>

namespace {

using Cpu = et::Cpu;
constexpr double tolerance = 1e-5;  // max |got - want| / max(|want|, 1)

template <class X, class Y, class W>
auto chain10(const X& x, const Y& y, const W& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f;
}

double chain10_reference(double x, double y, double w) {
  return std::tanh(x * 0.5 + y) / (1.0 + std::exp(-w)) + std::exp(-std::fabs(x)) * 0.25;
}

void hand_chain10(const float* __restrict x, const float* __restrict y, const float* __restrict w,
                  float* __restrict z, std::int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const float sigmoid_w = 1.0f / (1.0f + ::expf(-w[i]));
    z[i] = ::tanhf(x[i] * 0.5f + y[i]) * sigmoid_w + ::expf(-::fabsf(x[i])) * 0.25f;
  }
}

using ConstArray = Eigen::Map<const Eigen::ArrayXf, Eigen::Aligned64>;
using Array = Eigen::Map<Eigen::ArrayXf, Eigen::Aligned64>;

/// Eigen's Array expression over elements [begin, begin + count).
void eigen_chain10(const float* x, const float* y, const float* w, float* z, std::int64_t begin, std::int64_t count) {
  const auto X = ConstArray(x, static_cast<Eigen::Index>(begin + count)).segment(begin, count);
  const auto Y = ConstArray(y, static_cast<Eigen::Index>(begin + count)).segment(begin, count);
  const auto W = ConstArray(w, static_cast<Eigen::Index>(begin + count)).segment(begin, count);
  Array(z, static_cast<Eigen::Index>(begin + count)).segment(begin, count) =
      (X * 0.5f + Y).tanh() * W.logistic() + (-X.abs()).exp() * 0.25f;
}

void eigen_parallel(const float* x, const float* y, const float* w, float* z, std::int64_t n) {
#pragma omp parallel
  {
    const std::int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    // Segments of whole 64-byte lines, so that threads never share a cache line.
    const std::int64_t chunk = ((n + threads - 1) / threads + 15) / 16 * 16;
    const std::int64_t begin = std::min(n, chunk * thread), end = std::min(n, begin + chunk);
    if (end > begin) eigen_chain10(x, y, w, z, begin, end - begin);
  }
}

struct Result {
  std::string name;
  double us = 0, max_error = 0;
  std::int64_t non_finite = 0;
  bool ok() const { return non_finite == 0 && max_error <= tolerance; }
};

void check(Result& r, const float* x, const float* y, const float* w, const float* z, std::int64_t n) {
  const std::int64_t step = std::max<std::int64_t>(1, n / 4096);
  for (std::int64_t i = 0; i < n; i += step) {
    if (!std::isfinite(z[i])) {
      ++r.non_finite;
      continue;
    }
    const double want = chain10_reference(x[i], y[i], w[i]);
    r.max_error = std::max(r.max_error, std::fabs(z[i] - want) / std::max(std::fabs(want), 1.0));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 15, log2 = 24;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(3, std::atoi(argv[++i]));
    else if (arg == "--log2" && i + 1 < argc) log2 = std::clamp(std::atoi(argv[++i]), 4, 30);
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--log2 K]\n", argv[0]);
      return 2;
    }
  }
  try {
    const std::int64_t n = std::int64_t{1} << log2;
    const auto x = et::randn<float>(et::cpu, {n}, 21);
    const auto y = et::randn<float>(et::cpu, {n}, 22);
    const auto w = et::randn<float>(et::cpu, {n}, 23);
    auto z = et::empty<float>(et::cpu, {n});
    const int threads = omp_get_max_threads();
    std::printf("CPU chain: z = tanh(x * 0.5f + y) * sigmoid(w) + exp(-abs(x)) * 0.25f, 2^%d floats, "
                "%d OpenMP threads, median of %d\n\n", log2, threads, reps);

    std::vector<Result> results;
    auto measure = [&](const char* name, const std::function<void()>& run) {
      std::fill(z.data(), z.data() + n, NAN);  // an element a variant skips fails its check
      Result r{name};
      r.us = bench::wall_median_us(run, 2, reps);
      check(r, x.data(), y.data(), w.data(), z.data(), n);
      results.push_back(r);
    };
    measure("etensor", [&] { z = chain10(x, y, w); });
    measure("hand OpenMP", [&] { hand_chain10(x.data(), y.data(), w.data(), z.data(), n); });
    measure("Eigen 1 thread", [&] { eigen_chain10(x.data(), y.data(), w.data(), z.data(), 0, n); });
    measure("Eigen OpenMP segments", [&] { eigen_parallel(x.data(), y.data(), w.data(), z.data(), n); });

    const double hand_us = results[1].us;
    std::printf("%-24s %12s %10s %14s %10s  %s\n", "variant", "us", "GB/s", "hand / variant", "max error", "check");
    bool ok = true;
    for (const Result& r : results) {
      std::printf("%-24s %12.1f %10.1f %14.3f %10.2e  %s\n", r.name.c_str(), r.us, 16.0 * n / r.us / 1e3,
                  hand_us / r.us, r.max_error, r.ok() ? "ok" : "WRONG");
      ok = ok && r.ok();
    }
    const double ratio = hand_us / results[0].us;
    std::printf("\netensor / hand OpenMP speed: %.3f (target >= 0.90: %s)\n", ratio, ratio >= 0.9 ? "met" : "NOT MET");
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"benchmark\": \"cpu-chain\", \"elements\": " << n << ", \"threads\": " << threads
          << ", \"bytes\": " << 16.0 * n << ", \"reps\": " << reps << ", \"results\": [";
      for (std::size_t i = 0; i < results.size(); ++i) {
        const Result& r = results[i];
        out << (i ? ", " : "") << "{\"variant\": \"" << r.name << "\", \"us\": " << r.us
            << ", \"max_error\": " << r.max_error << ", \"non_finite\": " << r.non_finite
            << ", \"ok\": " << (r.ok() ? "true" : "false") << "}";
      }
      out << "], \"ok\": " << (ok ? "true" : "false") << "}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_cpu_chain: %s\n", e.what());
    return 1;
  }
}
