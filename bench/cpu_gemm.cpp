// CPU matrix products: et::matmul on float beside the CBLAS it calls (cblas_sgemm called
// directly on the same buffers, same layouts), Eigen's GEMM and, where oneDNN is configured,
// oneDNN's dnnl_sgemm, at each thread count.
//
//   square 1024, 2048     c = a @ b, all row-major (the target: etensor >= 0.9x cblas_sgemm)
//   fcn-s forward         [64, 26752] @ W1^T, W1 [2048, 26752] (FCN-S's first layer: x W^T)
//   fcn-s weight grad     g^T @ x: [2048, 64]^T-read @ [64, 26752] (the first layer's dW)
//   fcn-s data grad       [64, 26752] @ W4, W4 [26752, 2048] (the last layer's dx)
//
// Threads: et::set_num_threads(N) governs etensor, OpenBLAS's OpenMP build and Eigen alike.
// Timing: a second of products first (the process's first ones are slow), then wall clock
// around each product after one warm-up, median of --reps. Check: every
// variant's result against a double-precision dot product on 256 entries spread over c
// (relative to the sum of |a||b| terms, 1e-5). Which OpenBLAS kernel runs is printed
// (openblas_get_corename()).
//
// Usage: et_bench_cpu_gemm [--json PATH] [--reps N] [--threads 1,2]   (exit 1 if a check fails)
#include <et/et.hpp>

#include "host_timing.hpp"

#include <Eigen/Core>

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

#if defined(ET_WITH_DNNL)
#include <oneapi/dnnl/dnnl.h>
#endif

namespace {

struct Shape {
  const char* name;
  std::int64_t m, n, k;
  bool a_transposed, b_transposed;  // the operand is stored as its transpose (column-major read)
};

constexpr Shape shapes[] = {
    {"square 1024", 1024, 1024, 1024, false, false},
    {"square 2048", 2048, 2048, 2048, false, false},
    {"fcn-s forward", 64, 2048, 26752, false, true},
    {"fcn-s weight grad", 2048, 26752, 64, true, false},
    {"fcn-s data grad", 64, 2048, 26752, false, false},
};

struct Row {
  std::string shape, variant;
  int threads = 0;
  double us = 0, gflops = 0, error = 0;
  bool ok = true;
};

/// Operand storage: a is [m, k] (or its transpose stored [k, m]), b is [k, n] (or [n, k]).
struct Operands {
  et::Tensor<float, 2, et::Cpu> a, b;  // as stored
  std::int64_t m, n, k;
  bool at, bt;
  float a_at(std::int64_t i, std::int64_t p) const { return at ? a.data()[p * m + i] : a.data()[i * k + p]; }
  float b_at(std::int64_t p, std::int64_t j) const { return bt ? b.data()[j * k + p] : b.data()[p * n + j]; }
};

double max_error(const Operands& o, const float* c) {
  double worst = 0;
  const std::int64_t entries = o.m * o.n, step = std::max<std::int64_t>(1, entries / 256);
  for (std::int64_t e = 0; e < entries; e += step) {
    const std::int64_t i = e / o.n, j = e % o.n;
    double want = 0, scale = 0;
    for (std::int64_t p = 0; p < o.k; ++p) {
      const double t = double(o.a_at(i, p)) * double(o.b_at(p, j));
      want += t, scale += std::fabs(t);
    }
    worst = std::max(worst, std::fabs(c[e] - want) / std::max(scale, 1e-30));
  }
  return worst;
}

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

void eigen_product(const Operands& o, float* c) {
  Eigen::Map<RowMajor> cm(c, o.m, o.n);
  const Eigen::Map<const RowMajor> ar(o.a.data(), o.m, o.k), br(o.b.data(), o.k, o.n);
  const Eigen::Map<const ColMajor> ac(o.a.data(), o.m, o.k), bc(o.b.data(), o.k, o.n);
  if (o.at && o.bt) cm.noalias() = ac * bc;
  else if (o.at) cm.noalias() = ac * br;
  else if (o.bt) cm.noalias() = ar * bc;
  else cm.noalias() = ar * br;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 5;
  std::vector<int> threads{omp_get_num_procs()};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--threads" && i + 1 < argc) {
      threads = bench::thread_counts(argv[++i]);
      for (int& t : threads) t = std::max(1, t);
    } else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--threads 1,2]\n", argv[0]);
      return 2;
    }
  }
  try {
#if defined(ET_CBLAS_OPENBLAS)
    std::printf("CPU GEMM (float): etensor beside OpenBLAS %s (core %s) and Eigen; median of %d\n\n",
                OPENBLAS_VERSION, openblas_get_corename(), reps);
#elif defined(ET_WITH_CBLAS)
    std::printf("CPU GEMM (float): etensor beside its CBLAS and Eigen; median of %d\n\n", reps);
#else
    std::printf("CPU GEMM (float): etensor (no CBLAS configured: Eigen) beside Eigen; median of %d\n\n", reps);
#endif
    // The process's first products ran at a third of the speed for about 0.3 s (the 2-core
    // machine: the libraries' first calls, the clock ramping up), whichever variant came
    // first: a second of products before anything is timed.
    {
      const auto a = et::randn<float>(et::cpu, {1024, 1024}, 3);
      auto c = et::empty<float>(et::cpu, {1024, 1024});
      const auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) c = et::matmul(a, a);
    }
    std::vector<Row> rows;
    bool ok = true;
    std::printf("%-18s %7s %-8s %10s %9s %9s  %s\n", "shape", "threads", "variant", "ms", "GFLOP/s", "error", "vs cblas");
    for (const Shape& s : shapes) {
      Operands o{et::randn<float>(et::cpu, {s.a_transposed ? s.k : s.m, s.a_transposed ? s.m : s.k}, 1),
                 et::randn<float>(et::cpu, {s.b_transposed ? s.n : s.k, s.b_transposed ? s.k : s.n}, 2),
                 s.m, s.n, s.k, s.a_transposed, s.b_transposed};
      const auto a = s.a_transposed ? o.a.transpose(0, 1) : o.a;
      const auto b = s.b_transposed ? o.b.transpose(0, 1) : o.b;
      auto c = et::empty<float>(et::cpu, {s.m, s.n});
      const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
      for (const int t : threads) {
        if (t > omp_get_num_procs()) continue;
        et::set_num_threads(t);
        std::vector<std::pair<const char*, std::function<void()>>> variants;
        variants.emplace_back("etensor", [&] { c = et::matmul(a, b); });
#if defined(ET_WITH_CBLAS)
        variants.emplace_back("cblas", [&] {
          cblas_sgemm(CblasRowMajor, s.a_transposed ? CblasTrans : CblasNoTrans, s.b_transposed ? CblasTrans : CblasNoTrans,
                      int(s.m), int(s.n), int(s.k), 1.0f, o.a.data(), int(s.a_transposed ? s.m : s.k), o.b.data(),
                      int(s.b_transposed ? s.k : s.n), 0.0f, c.data(), int(s.n));
        });
#endif
        variants.emplace_back("eigen", [&] { eigen_product(o, c.data()); });
#if defined(ET_WITH_DNNL)
        variants.emplace_back("dnnl", [&] {  // oneDNN's own sgemm (row-major)
          (void)dnnl_sgemm(s.a_transposed ? 'T' : 'N', s.b_transposed ? 'T' : 'N', s.m, s.n, s.k, 1.0f, o.a.data(),
                           s.a_transposed ? s.m : s.k, o.b.data(), s.b_transposed ? s.k : s.n, 0.0f, c.data(), s.n);
        });
#endif
        const std::size_t first = rows.size();
        for (auto& [name, run] : variants) {
          std::fill(c.data(), c.data() + c.numel(), NAN);
          Row r{s.name, name, t};
          r.us = bench::wall_median_us(run, 1, reps);
          r.gflops = flops / r.us / 1e3;
          r.error = max_error(o, c.data());
          r.ok = r.error <= 1e-5;
          ok = ok && r.ok;
          rows.push_back(r);
        }
        double cblas_us = rows[first].us;  // the ratio's reference: cblas where it ran, else etensor
        for (std::size_t i = first; i < rows.size(); ++i)
          if (rows[i].variant == "cblas") cblas_us = rows[i].us;
        for (std::size_t i = first; i < rows.size(); ++i)
          std::printf("%-18s %7d %-8s %10.2f %9.1f %9.1e  %.3f%s\n", rows[i].shape.c_str(), t, rows[i].variant.c_str(),
                      rows[i].us / 1e3, rows[i].gflops, rows[i].error, cblas_us / rows[i].us, rows[i].ok ? "" : "  WRONG");
      }
    }
    et::set_num_threads(omp_get_num_procs());
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"benchmark\": \"cpu-gemm\", \"results\": [";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        out << (i ? ", " : "") << "{\"shape\": \"" << r.shape << "\", \"variant\": \"" << r.variant
            << "\", \"threads\": " << r.threads << ", \"us\": " << r.us << ", \"gflops\": " << r.gflops
            << ", \"error\": " << r.error << ", \"ok\": " << (r.ok ? "true" : "false") << "}";
      }
      out << "], \"ok\": " << (ok ? "true" : "false") << "}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_cpu_gemm: %s\n", e.what());
    return 1;
  }
}
