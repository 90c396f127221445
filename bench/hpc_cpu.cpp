// HPC codes' stencils on the CPU: the statements of bench/hpc.cu written with etensor's
// windows, beside a hand-written OpenMP loop of each (`#pragma omp parallel for` over the
// outer axes, `#pragma omp simd` along the row: the loop an HPC code writes) and a parallel
// copy of the case's minimal traffic (every array read once and written once per step):
//
//   jacobi-2d      B[1:-1,1:-1] = 0.2 (five windows of A)                 n2^2, 2 arrays
//   conv-2d 9-pt   B[1:-1,1:-1] = PolyBench 2DCONV's 3x3 convolution      n2^2, 2
//   heat-3d        B = A + 0.125 (three second differences), then B -> A  n3^3, 4
//   fdtd-2d        ey, ex, hz updated in place from each other             n2^2, 10
//
// Plain C++ at -O3 -march=x86-64-v3 with OpenMP, as et_bench_cpu_chain. Each result is
// compared with the hand loop's on every element (relative 1e-5: a compiler may contract a
// multiply-add differently). The target: etensor >= 0.9x the hand loop's speed.
//
// Usage: et_bench_hpc_cpu [--json PATH] [--reps N] [--n2 N] [--n3 N]   (exit status 1 if a check fails)
#include <et/et.hpp>

#include "host_timing.hpp"

#include <algorithm>
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

using et::range;
using Grid2 = et::Tensor<float, 2, et::Cpu>;
using Grid3 = et::Tensor<float, 3, et::Cpu>;

struct Row {
  std::string workload, size, variant;
  double bytes = 0, us = 0;
  bool ok = true;
};

/// The largest |a - b| / max(1, |b|) over n elements.
double max_difference(const float* a, const float* b, std::int64_t n) {
  double worst = 0;
  for (std::int64_t i = 0; i < n; ++i)
    worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])) / std::max(1.0, std::fabs(double(b[i]))));
  return worst;
}

/// The copy bandwidth's time for `bytes` of traffic: a parallel copy of bytes / 2.
double copy_us(double bytes, int reps) {
  const std::int64_t n = static_cast<std::int64_t>(bytes / 2 / sizeof(float));
  std::vector<float> from(static_cast<std::size_t>(n), 1.0f), to(static_cast<std::size_t>(n));
  const float* __restrict src = from.data();
  float* __restrict dst = to.data();
  return bench::wall_median_us(
      [&] {
#pragma omp parallel for simd schedule(static)
        for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
      },
      2, reps);
}

class Suite {
 public:
  Suite(int reps, int n2, int n3) : reps_(reps), n2_(n2), n3_(n3) {}

  /// Times etensor's and the hand loop's step from the same start (reset before each
  /// timing and the comparison), compares every output, and adds the rows.
  void compare(const std::string& workload, const std::string& size, double bytes, const std::function<void()>& reset,
               const std::function<void()>& ours, const std::function<void()>& hand,
               const std::vector<const et::Tensor<float, 2, et::Cpu>*>& out2,
               const std::vector<const et::Tensor<float, 3, et::Cpu>*>& out3) {
    reset();
    hand();
    std::vector<std::vector<float>> want;
    for (const auto* t : out2) want.push_back(t->to_vector());
    for (const auto* t : out3) want.push_back(t->to_vector());
    reset();
    ours();
    bool ok = true;
    std::size_t k = 0;
    for (const auto* t : out2) ok = ok && max_difference(t->data(), want[k++].data(), t->numel()) <= 1e-5;
    for (const auto* t : out3) ok = ok && max_difference(t->data(), want[k++].data(), t->numel()) <= 1e-5;
    reset();
    rows.push_back({workload, size, "etensor", bytes, bench::wall_median_us(ours, 1, reps_), ok});
    reset();
    rows.push_back({workload, size, "hand OpenMP", bytes, bench::wall_median_us(hand, 1, reps_), true});
    rows.push_back({workload, size, "copy (limit)", bytes, copy_us(bytes, reps_), true});
  }

  void jacobi2d() {
    const std::int64_t n = n2_;
    Grid2 a = et::rand<float>(et::cpu, {n, n}, 2), b = et::rand<float>(et::cpu, {n, n}, 3);
    const Grid2 b0 = b.clone();
    auto b_in = b(range(1, -1), range(1, -1));
    const auto c = a(range(1, -1), range(1, -1)), west = a(range(1, -1), range(0, -2)), east = a(range(1, -1), range(2));
    const auto north = a(range(0, -2), range(1, -1)), south = a(range(2), range(1, -1));
    const float* A = a.data();
    float* B = b.data();
    compare("jacobi-2d", std::to_string(n) + "^2", 2.0 * (n - 2) * double(n - 2) * 4, [&] { b.copy_(b0); },
            [&] { b_in = 0.2f * (c + west + east + south + north); },
            [&] {
#pragma omp parallel for schedule(static)
              for (std::int64_t i = 1; i < n - 1; ++i) {
                const float* r = A + i * n;
#pragma omp simd
                for (std::int64_t j = 1; j < n - 1; ++j)
                  B[i * n + j] = 0.2f * (r[j] + r[j - 1] + r[j + 1] + r[j + n] + r[j - n]);
              }
            },
            {&b}, {});
  }

  void conv2d9() {
    const std::int64_t n = n2_;
    Grid2 a = et::rand<float>(et::cpu, {n, n}, 4), b = et::zeros<float>(et::cpu, {n, n});
    auto b_in = b(range(1, -1), range(1, -1));
    const auto at = [&](int di, int dj) { return a(range(1 + di, n - 1 + di), range(1 + dj, n - 1 + dj)); };
    const float* A = a.data();
    float* B = b.data();
    compare("conv-2d 9-point", std::to_string(n) + "^2", 2.0 * (n - 2) * double(n - 2) * 4, [&] { b = 0.0f; },
            [&] {
              b_in = 0.2f * at(-1, -1) + 0.5f * at(0, -1) - 0.8f * at(1, -1) - 0.3f * at(-1, 0) + 0.6f * at(0, 0) -
                     0.9f * at(1, 0) + 0.4f * at(-1, 1) + 0.7f * at(0, 1) + 0.1f * at(1, 1);
            },
            [&] {
#pragma omp parallel for schedule(static)
              for (std::int64_t i = 1; i < n - 1; ++i) {
                const float* r = A + i * n;
#pragma omp simd
                for (std::int64_t j = 1; j < n - 1; ++j)
                  B[i * n + j] = 0.2f * r[j - n - 1] + 0.5f * r[j - 1] - 0.8f * r[j + n - 1] - 0.3f * r[j - n] +
                                 0.6f * r[j] - 0.9f * r[j + n] + 0.4f * r[j - n + 1] + 0.7f * r[j + 1] +
                                 0.1f * r[j + n + 1];
              }
            },
            {&b}, {});
  }

  void heat3d() {
    const std::int64_t n = n3_;
    Grid3 a = et::rand<float>(et::cpu, {n, n, n}, 6), b = et::rand<float>(et::cpu, {n, n, n}, 7);
    const Grid3 a0 = a.clone(), b0 = b.clone();
    const auto sweep = [&](const Grid3& from, const Grid3& to) {
      const auto at = [&](int di, int dj, int dk) {
        return from(range(1 + di, n - 1 + di), range(1 + dj, n - 1 + dj), range(1 + dk, n - 1 + dk));
      };
      to(range(1, -1), range(1, -1), range(1, -1)) =
          0.125f * (at(1, 0, 0) - 2.0f * at(0, 0, 0) + at(-1, 0, 0)) +
          0.125f * (at(0, 1, 0) - 2.0f * at(0, 0, 0) + at(0, -1, 0)) +
          0.125f * (at(0, 0, 1) - 2.0f * at(0, 0, 0) + at(0, 0, -1)) + at(0, 0, 0);
    };
    const auto hand_sweep = [n](const float* F, float* T) {
      const std::int64_t p = n * n;
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t i = 1; i < n - 1; ++i)
        for (std::int64_t j = 1; j < n - 1; ++j) {
          const float* r = F + i * p + j * n;
#pragma omp simd
          for (std::int64_t k = 1; k < n - 1; ++k)
            T[i * p + j * n + k] = 0.125f * (r[k + p] - 2.0f * r[k] + r[k - p]) +
                                   0.125f * (r[k + n] - 2.0f * r[k] + r[k - n]) +
                                   0.125f * (r[k + 1] - 2.0f * r[k] + r[k - 1]) + r[k];
        }
    };
    compare("heat-3d (A->B, B->A)", std::to_string(n) + "^3", 4.0 * (n - 2) * double(n - 2) * (n - 2) * 4,
            [&] { a.copy_(a0), b.copy_(b0); }, [&] { sweep(a, b), sweep(b, a); },
            [&] { hand_sweep(a.data(), b.data()), hand_sweep(b.data(), a.data()); }, {}, {&a, &b});
  }

  void fdtd2d() {
    const std::int64_t n = n2_;
    Grid2 ex = et::rand<float>(et::cpu, {n, n}, 8), ey = et::rand<float>(et::cpu, {n, n}, 9),
          hz = et::rand<float>(et::cpu, {n, n}, 10);
    const Grid2 ex0 = ex.clone(), ey0 = ey.clone(), hz0 = hz.clone();
    auto ey_lo = ey(range(1)), ex_lo = ex(range(), range(1)), hz_in = hz(range(0, -1), range(0, -1));
    const auto ours = [&] {
      ey_lo -= 0.5f * (hz(range(1)) - hz(range(0, -1)));
      ex_lo -= 0.5f * (hz(range(), range(1)) - hz(range(), range(0, -1)));
      hz_in -= 0.7f * (ex(range(0, -1), range(1)) - ex(range(0, -1), range(0, -1)) + ey(range(1), range(0, -1)) -
                       ey(range(0, -1), range(0, -1)));
    };
    float *EX = ex.data(), *EY = ey.data(), *HZ = hz.data();
    const auto hand = [&] {
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 1; i < n; ++i)
#pragma omp simd
        for (std::int64_t j = 0; j < n; ++j) EY[i * n + j] -= 0.5f * (HZ[i * n + j] - HZ[(i - 1) * n + j]);
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n; ++i)
#pragma omp simd
        for (std::int64_t j = 1; j < n; ++j) EX[i * n + j] -= 0.5f * (HZ[i * n + j] - HZ[i * n + j - 1]);
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < n - 1; ++i)
#pragma omp simd
        for (std::int64_t j = 0; j < n - 1; ++j)
          HZ[i * n + j] -= 0.7f * (EX[i * n + j + 1] - EX[i * n + j] + EY[(i + 1) * n + j] - EY[i * n + j]);
    };
    compare("fdtd-2d (ey, ex, hz)", std::to_string(n) + "^2", 10.0 * double(n) * n * 4,
            [&] { ex.copy_(ex0), ey.copy_(ey0), hz.copy_(hz0); }, ours, hand, {&ex, &ey, &hz}, {});
  }

  std::vector<Row> rows;

 private:
  int reps_, n2_, n3_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  int reps = 7, n2 = 4096, n3 = 256;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (arg == "--reps" && i + 1 < argc) reps = std::max(3, std::atoi(argv[++i]));
    else if (arg == "--n2" && i + 1 < argc) n2 = std::max(4, std::atoi(argv[++i]));
    else if (arg == "--n3" && i + 1 < argc) n3 = std::max(4, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--json PATH] [--reps N] [--n2 N] [--n3 N]\n", argv[0]);
      return 2;
    }
  }
  try {
    Suite suite(reps, n2, n3);
    suite.jacobi2d();
    suite.conv2d9();
    suite.heat3d();
    suite.fdtd2d();
    std::printf("HPC stencils on the CPU, %d OpenMP threads, median of %d; %% of a parallel copy of the minimal "
                "traffic\n\n%-22s %-8s %-14s %10s %8s %8s  %s\n",
                omp_get_max_threads(), reps, "workload", "size", "variant", "us", "% copy", "/ hand", "check");
    bool ok = true;
    for (std::size_t k = 0; k < suite.rows.size(); k += 3) {
      const double copy = suite.rows[k + 2].us, hand = suite.rows[k + 1].us;
      for (std::size_t v = k; v < k + 3; ++v) {
        const Row& r = suite.rows[v];
        std::printf("%-22s %-8s %-14s %10.1f %7.1f%% %8.3f  %s\n", r.workload.c_str(), r.size.c_str(),
                    r.variant.c_str(), r.us, 100.0 * copy / r.us, hand / r.us, r.ok ? "ok" : "WRONG");
        ok = ok && r.ok;
      }
    }
    if (!json_path.empty()) {
      std::ofstream out(json_path);
      out << "{\"benchmark\": \"hpc-cpu\", \"threads\": " << omp_get_max_threads() << ", \"reps\": " << reps
          << ", \"rows\": [";
      for (std::size_t i = 0; i < suite.rows.size(); ++i) {
        const Row& r = suite.rows[i];
        out << (i ? ", " : "") << "{\"workload\": \"" << r.workload << "\", \"size\": \"" << r.size
            << "\", \"variant\": \"" << r.variant << "\", \"bytes\": " << r.bytes << ", \"us\": " << r.us
            << ", \"ok\": " << (r.ok ? "true" : "false") << "}";
      }
      out << "], \"ok\": " << (ok ? "true" : "false") << "}\n";
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_bench_hpc_cpu: %s\n", e.what());
    return 1;
  }
}
