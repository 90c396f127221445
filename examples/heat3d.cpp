// The explicit 3-D heat equation on a cube (RAJAPerf's HEAT_3D step, PolyBench's heat-3d):
// a 7-point stencil written with windows of the grid, t(...) with et::range:
//
//   b[1:-1, 1:-1, 1:-1] = a[1:-1, 1:-1, 1:-1] + 0.125 (second differences along each axis)
//
// Each sweep is ONE kernel on a GPU (the strided kernel's rows launch: every window is
// consecutive along its last axis) and one OpenMP loop on the CPU; a and b swap handles
// between sweeps. The boundary stays at its initial values: the face x = 0 at 1, the
// others at 0. The run checks the grid against a plain double loop of the same scheme.
//
//   heat3d              a 256^3 grid, 100 sweeps
//   heat3d 24 20        a smaller one (CI)
#include <et/et.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

// [guide:heat3d]
/// One sweep from a into b's interior: the 7-point Laplacian times 0.125, plus a itself.
template <et::Device D>
void sweep(const et::Tensor<float, 3, D>& a, et::Tensor<float, 3, D>& b) {
  using et::range;
  const std::int64_t n0 = a.size(0), n1 = a.size(1), n2 = a.size(2);
  // The window of a shifted by (di, dj, dk): a[1 + di : n - 1 + di, ...].
  const auto at = [&](int di, int dj, int dk) {
    return a(range(1 + di, n0 - 1 + di), range(1 + dj, n1 - 1 + dj), range(1 + dk, n2 - 1 + dk));
  };
  const auto c = at(0, 0, 0);
  b(range(1, -1), range(1, -1), range(1, -1)) = 0.125f * (at(1, 0, 0) - 2.0f * c + at(-1, 0, 0)) +
                                                0.125f * (at(0, 1, 0) - 2.0f * c + at(0, -1, 0)) +
                                                0.125f * (at(0, 0, 1) - 2.0f * c + at(0, 0, -1)) + c;
}
// [guide:end]

template <et::Device D>
int simulate(D dev, std::int64_t n, int sweeps) {
  auto a = et::zeros<float>(dev, {n, n, n});
  a(0) = 1.0f;  // the face x = 0, a window: written
  auto b = a.clone();
  et::synchronize(dev);
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < sweeps; ++s) {
    sweep(a, b);
    std::swap(a, b);  // the handles, not the data
  }
  et::synchronize(dev);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The same scheme in double with plain loops.
  std::vector<double> u(std::size_t(n * n * n), 0.0), v;
  for (std::int64_t k = 0; k < n * n; ++k) u[std::size_t(k)] = 1.0;
  v = u;
  const auto id = [n](std::int64_t i, std::int64_t j, std::int64_t k) { return std::size_t((i * n + j) * n + k); };
  for (int s = 0; s < sweeps; ++s) {
    for (std::int64_t i = 1; i < n - 1; ++i)
      for (std::int64_t j = 1; j < n - 1; ++j)
        for (std::int64_t k = 1; k < n - 1; ++k) {
          const double c = u[id(i, j, k)];
          v[id(i, j, k)] = 0.125 * (u[id(i + 1, j, k)] - 2 * c + u[id(i - 1, j, k)]) +
                           0.125 * (u[id(i, j + 1, k)] - 2 * c + u[id(i, j - 1, k)]) +
                           0.125 * (u[id(i, j, k + 1)] - 2 * c + u[id(i, j, k - 1)]) + c;
        }
    std::swap(u, v);
  }
  const auto got = a.to_vector();
  double worst = 0;
  for (std::size_t k = 0; k < got.size(); ++k) worst = std::max(worst, std::abs(double(got[k]) - u[k]));
  const double cells = double(n - 2) * double(n - 2) * double(n - 2) * sweeps;
  std::printf("%s: %lld^3 grid, %d sweeps in %.3f s (%.2f Gcell/s), max |etensor - double loop| = %.2e\n",
              et::device_name<D>.c_str(), static_cast<long long>(n), sweeps, seconds, cells / seconds / 1e9, worst);
  return worst < 1e-5 ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 256;
  const int sweeps = argc > 2 ? std::atoi(argv[2]) : 100;
  try {
    et::NoGradGuard no_grad;
    return et::try_gpu([&](auto dev) { return simulate(dev, n, sweeps); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "heat3d: %s\n", e.what());
    return 1;
  }
}
