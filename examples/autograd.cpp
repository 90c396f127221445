// Reverse-mode autograd: the seed's worked example, then a line fitted by gradient
// descent, on the CPU and on the first GPU when there is one. Each checks its results.
//
//   autograd          both examples on every device found
#include <et/et.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

// [guide:autograd-seed]
// y = mean((x + 2)^2 + 3) at x = [0, 1, 2]: dy/dx = 2 (x + 2) / 3 = [4/3, 2, 8/3].
template <et::Device D>
std::vector<float> seed_example(D dev) {
  auto x = et::from_vector(dev, std::vector<float>{0, 1, 2}, {3});
  x.requires_grad_(true);                          // x is a leaf that needs a gradient
  auto y = et::mean(et::pow(x + 2, 2) + 3);        // one recorded reduction of one fused expression
  y.backward();                                    // one backward kernel; fills x.grad()
  return x.grad().to_vector();
}
// [guide:end]

// [guide:autograd-fit]
// Fits y = w x + b to points of the line y = 2x + 1 by gradient descent.
template <et::Device D>
std::vector<float> fit_line(D dev, int steps) {
  const auto x = et::linspace<float>(dev, -1.0, 1.0, 64);
  const et::Tensor<float, 1, D> y = 2.0f * x + 1.0f;
  auto w = et::zeros<float>(dev, {1});
  auto b = et::zeros<float>(dev, {1});
  w.requires_grad_(true);
  b.requires_grad_(true);
  for (int step = 0; step < steps; ++step) {
    auto loss = et::mean(et::square(w * x + b - y));  // w and b broadcast over the 64 points
    loss.backward();                                  // w.grad(), b.grad(): summed over the points
    et::NoGradGuard no_grad;                          // the update itself is not recorded
    w -= 0.5f * w.grad();
    b -= 0.5f * b.grad();
    w.zero_grad();
    b.zero_grad();
  }
  return {w.item(), b.item()};
}
// [guide:end]

template <et::Device D>
bool run(D dev) {
  const auto g = seed_example(dev);
  const auto wb = fit_line(dev, 200);
  std::printf("%s: dy/dx = [%.4f, %.4f, %.4f]; fitted w = %.4f, b = %.4f\n", et::device_name<D>.c_str(), g[0], g[1],
              g[2], wb[0], wb[1]);
  const bool seed_ok = std::abs(g[0] - 4.0f / 3) < 1e-5f && std::abs(g[1] - 2.0f) < 1e-5f &&
                       std::abs(g[2] - 8.0f / 3) < 1e-5f;
  const bool fit_ok = std::abs(wb[0] - 2.0f) < 1e-3f && std::abs(wb[1] - 1.0f) < 1e-3f;
  return seed_ok && fit_ok;
}

int main() {
  bool ok = run(et::cpu);
#if defined(__CUDACC__)
  if (et::device_count() > 0) ok = run(et::cuda<0>) && ok;
#endif
  if (!ok) std::printf("autograd: a result is wrong\n");
  return ok ? 0 : 1;
}
