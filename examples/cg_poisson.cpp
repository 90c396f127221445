// Conjugate gradients on the 2-D Poisson problem, as an HPC code writes it: -laplacian(u) = f
// on the unit square, u = 0 on its edge, the 5-point Laplacian applied matrix-free to windows
// of the search direction (no matrix is stored). Every scalar of the method (alpha, beta,
// the residual's norm) stays on the device as a 0-d tensor, so an iteration never waits for
// the host and can be captured as one CUDA graph and replayed. An iteration is three
// statements, each one kernel that also ends in its dot product:
//
//   Ap = A p                and  pAp = p . Ap
//   x += alpha p, r -= alpha Ap  and  rr_next = r . r        (alpha = rr / pAp)
//   p = r + beta p          and  rr = rr_next (after the pass)   (beta = rr_next / rr)
//
// f = 2 x (1 - x) + 2 y (1 - y), so that the exact solution is u = x (1 - x) y (1 - y), which
// the 5-point Laplacian differentiates exactly: the discrete solution is u at the grid points,
// and the run checks both the residual (down by 1e-5) and the error there.
// On a GPU the iterations between two looks at the residual are one captured CUDA graph.
//
//   cg_poisson                 a 512 x 512 interior, up to 3000 iterations
//   cg_poisson 64 600          a smaller grid (CI)
#include <et/et.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

// [guide:cg]
/// The solver's state on an (n + 2) x (n + 2) grid whose edge (the halo) stays 0, and the
/// windows of p and Ap the stencil reads and writes (named once, as an HPC code names them).
template <et::Device D>
struct Cg {
  using Grid = et::Tensor<float, 2, D>;
  using Scalar = et::Tensor<float, 0, D>;
  Grid x, r, p, ap;
  Scalar rr, rr_next, pap;
  Grid center, north, south, west, east, ap_inside;

  Cg(D dev, const Grid& b)
      : x(et::zeros<float>(dev, b.shape())), r(b.clone()), p(b.clone()), ap(et::zeros<float>(dev, b.shape())),
        rr(et::scalar<float>(dev)), rr_next(et::scalar<float>(dev)), pap(et::scalar<float>(dev)) {
    using et::range;
    center = p(range(1, -1), range(1, -1));
    north = p(range(0, -2), range(1, -1)), south = p(range(2), range(1, -1));
    west = p(range(1, -1), range(0, -2)), east = p(range(1, -1), range(2));
    ap_inside = ap(range(1, -1), range(1, -1));
    et::assign(rr, et::sum_of(r * r));  // into rr itself: rr = et::sum(r * r) would rebind the handle
  }

  /// One iteration: three statements, one kernel each, nothing read on the host.
  void iterate() {
    const auto product = 4.0f * center - north - south - west - east;  // A p on the interior
    et::assign(std::tie(ap_inside, pap), product, et::sum_of(center * product));
    const auto alpha = rr / pap;  // 0-d tensors: broadcast, read on the device
    const auto r_next = r - alpha * ap;
    et::assign(std::tie(x, r, rr_next), x + alpha * p, r_next, et::sum_of(r_next * r_next));
    et::assign(std::tie(p, rr), r + (rr_next / rr) * p, rr_next);  // rr, a final: after the pass reads it
  }
};
// [guide:end]

/// Runs `iterations` of the solver: on a GPU replaying one captured graph of them (one launch
/// for all their kernels), elsewhere as they come.
template <et::Device D>
struct Iterations {
  Cg<D>& cg;
  int count;
  void run() {
    for (int k = 0; k < count; ++k) cg.iterate();
  }
};

template <et::Device D>
int solve(D dev, std::int64_t n, int max_iterations) {
  const double h = 1.0 / double(n + 1);
  // [guide:cg-setup]
  // b = h^2 f on the interior, at x = (j + 1) h, y = (i + 1) h: index grids are lazy (no
  // memory; the kernel that reads them computes them).
  et::Tensor<float, 2, D> b = et::zeros<float>(dev, {n + 2, n + 2});
  const auto x = (et::index_grid<float>(dev, {n, n}, 1) + 1.0f) * float(h);
  const auto y = (et::index_grid<float>(dev, {n, n}, 0) + 1.0f) * float(h);
  b(et::range(1, -1), et::range(1, -1)) = float(2 * h * h) * (x * (1.0f - x) + y * (1.0f - y));
  Cg<D> cg(dev, b);
  const double first = std::sqrt(double(cg.rr.item())), stop = 1e-5 * first;
  constexpr int between_looks = 25;  // iterations between reads of the residual on the host
  Iterations<D> batch{cg, between_looks};
  batch.run();  // the first batch eagerly: libraries and kernels set up before any capture
  int iterations = between_looks;
#if defined(ET_HAS_CUDA_RUNTIME)  // graphs are CUDA's (a plain C++ build computes on the CPU)
  if constexpr (D::is_cuda) {
    const auto stream = et::Stream<D>::create();
    const auto graph = et::capture(stream, [&] { batch.run(); });  // 75 kernels, one launch each replay
    while (iterations < max_iterations && std::sqrt(double(cg.rr.item())) > stop) {
      graph.replay();
      iterations += between_looks;
    }
  }
#endif
  while (iterations < max_iterations && std::sqrt(double(cg.rr.item())) > stop) {  // the CPU (or what is left)
    batch.run();
    iterations += between_looks;
  }
  // [guide:end]
  // The error against the exact solution, on the host in double.
  const auto u = cg.x.to_vector();
  double worst = 0;
  for (std::int64_t i = 1; i <= n; ++i)
    for (std::int64_t j = 1; j <= n; ++j) {
      const double xj = j * h, yi = i * h;
      worst = std::max(worst, std::abs(double(u[std::size_t(i * (n + 2) + j)]) - xj * (1 - xj) * yi * (1 - yi)));
    }
  const double residual = std::sqrt(double(cg.rr.item()));
  std::printf("%s: %lld x %lld interior, %d iterations, residual %.3g of %.3g, max error %.3g\n",
              et::device_name<D>.c_str(), static_cast<long long>(n), static_cast<long long>(n), iterations, residual,
              first, worst);
  const bool ok = residual <= stop && worst < 1e-4;
  if (!ok) std::printf("cg_poisson: FAILED (the residual or the error is too large)\n");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 512;
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 3000;
  try {
    et::NoGradGuard no_grad;  // nothing here is differentiated: views and statements record nothing
    return et::try_gpu([&](auto dev) { return solve(dev, n, iterations); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cg_poisson: %s\n", e.what());
    return 1;
  }
}
