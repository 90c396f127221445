// The explicit 2-D heat equation, written with slices as an HPC code writes it in NumPy:
//
//   u_new[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[2:, 1:-1] + u[:-2, 1:-1]
//                                                + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
//
// Every slice is a view (no copy), and each step is ONE fused kernel on a GPU (one OpenMP
// loop on the CPU) that reads five views of u and writes a view of u_new. The edges stay
// at their initial values: the top edge at 1, the others at 0. It runs on the CPU and,
// if there is one, on the GPU; both are checked against a plain double-precision loop.
//
//   heat_equation            512 x 512 grid, 500 steps
//   heat_equation 64 100     a smaller grid and fewer steps (CI)
#include <et/et.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

constexpr float alpha = 0.2f;  // dt / dx^2; the explicit scheme is stable up to 0.25

// [guide:stencil]
// One explicit Euler step of du/dt = laplacian(u) on the interior of the grid.
template <et::Device D>
void heat_step(const et::Tensor<float, 2, D>& u, et::Tensor<float, 2, D>& u_new) {
  const std::int64_t rows = u.size(0), cols = u.size(1);
  const auto center = u.slice(0, 1, -1).slice(1, 1, -1);    // u[1:-1, 1:-1]
  const auto north = u.slice(0, 0, -2).slice(1, 1, -1);     // u[:-2, 1:-1]
  const auto south = u.slice(0, 2, rows).slice(1, 1, -1);   // u[2:, 1:-1]
  const auto west = u.slice(0, 1, -1).slice(1, 0, -2);      // u[1:-1, :-2]
  const auto east = u.slice(0, 1, -1).slice(1, 2, cols);    // u[1:-1, 2:]
  u_new.slice(0, 1, -1).slice(1, 1, -1) = center + alpha * (north + south + west + east - 4.0f * center);
}
// [guide:end]

struct Run {
  std::vector<float> u;  // the final grid, row-major
  double seconds;
};

template <et::Device D>
Run simulate(D dev, std::int64_t n, int steps) {
  // [guide:stencil-driver]
  auto u = et::zeros<float>(dev, {n, n});
  u.select(0, 0) = 1.0f;  // the top edge, a view: held at 1
  auto u_new = u.clone();  // the same edges; its interior is overwritten every step
  et::synchronize(dev);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < steps; ++step) {
    heat_step(u, u_new);
    std::swap(u, u_new);  // swaps the two handles, not the data
  }
  et::synchronize(dev);  // kernels are asynchronous: wait before reading the clock
  // [guide:end]
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {u.to_vector(), seconds};
}

// The same scheme in double precision with plain loops.
std::vector<double> reference(std::int64_t n, int steps) {
  std::vector<double> u(static_cast<std::size_t>(n * n), 0.0);
  std::fill(u.begin(), u.begin() + n, 1.0);
  std::vector<double> next = u;
  for (int step = 0; step < steps; ++step) {
    for (std::int64_t i = 1; i < n - 1; ++i) {
      for (std::int64_t j = 1; j < n - 1; ++j) {
        const std::int64_t c = i * n + j;
        next[c] = u[c] + alpha * (u[c - n] + u[c + n] + u[c - 1] + u[c + 1] - 4.0 * u[c]);
      }
    }
    std::swap(u, next);
  }
  return u;
}

template <class A, class B>
double max_difference(const std::vector<A>& a, const std::vector<B>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 512;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 500;
  if (n < 3 || steps < 0) {
    std::fprintf(stderr, "usage: heat_equation [grid size >= 3] [steps >= 0]\n");
    return 2;
  }
  std::printf("heat_equation: %lld x %lld grid, %d steps, alpha = %.2f\n", static_cast<long long>(n),
              static_cast<long long>(n), steps, alpha);
  const std::vector<double> expected = reference(n, steps);
  const double tolerance = 1e-4;  // float against double, after many steps

  const Run cpu = simulate(et::cpu, n, steps);
  const double cpu_error = max_difference(cpu.u, expected);
  std::printf("  cpu     %8.1f us per step, mean temperature %.6f, max difference from the double loop %.1e\n",
              cpu.seconds / std::max(steps, 1) * 1e6, std::accumulate(cpu.u.begin(), cpu.u.end(), 0.0) / double(n * n),
              cpu_error);
  bool ok = cpu_error < tolerance;

  ok = et::try_gpu([&](auto dev) {
    using D = decltype(dev);
    if constexpr (std::is_same_v<D, et::Cpu>) {
      std::printf("  no GPU found: ran on the CPU only\n");
      return ok;
    } else {
      simulate(dev, n, 1);  // warm-up: the first launch loads the kernel
      const Run gpu = simulate(dev, n, steps);
      const double gpu_error = max_difference(gpu.u, expected);
      const double gpu_cpu = max_difference(gpu.u, cpu.u);
      std::printf("  %s  %8.1f us per step (%.1fx the CPU), max difference from the double loop %.1e, "
                  "from the CPU %.1e\n",
                  et::device_name<D>.c_str(), gpu.seconds / std::max(steps, 1) * 1e6, cpu.seconds / gpu.seconds,
                  gpu_error, gpu_cpu);
      return ok && gpu_error < tolerance && gpu_cpu < tolerance;
    }
  });
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
