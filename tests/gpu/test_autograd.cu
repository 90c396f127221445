// Autograd on the GPU: the gradient checks of tests/cpu/autograd_cases.hpp on CUDA, and
// the fused backward's kernel count, from CUPTI: the backward of one recorded expression
// is ONE kernel for all of its inputs, plus one reduction per broadcast input.
#include "../cpu/autograd_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: the seed's worked example", "[autograd]") { test::check_seed_example<Gpu>(); }
TEST_CASE("GPU: in-place operations on recorded tensors read the values they overwrite", "[autograd][matmul]") {
  test::check_in_place_writes<Gpu>();
}
TEST_CASE("GPU: writes into views are recorded", "[autograd]") { test::check_view_writes<Gpu>(); }

TEST_CASE("GPU: gradients of elementwise functions and operators", "[autograd]") {
  test::check_elementwise_gradients<Gpu>();
}
TEST_CASE("GPU: gradients through broadcasting, views inside expressions, empty tensors", "[autograd]") {
  test::check_broadcast_gradients<Gpu>();
}
TEST_CASE("GPU: gradients of reductions", "[autograd]") { test::check_reduction_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of views and copies", "[autograd]") { test::check_view_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of matmul", "[autograd][matmul]") { test::check_matmul_gradients<Gpu>(); }
TEST_CASE("GPU: gradients of conv2d and pooling", "[autograd][conv]") { test::check_nn_gradients<Gpu>(); }

TEST_CASE("GPU: the backward of a fused expression is one kernel for all its inputs", "[autograd][cupti]") {
  const std::int64_t n = 1 << 20;
  auto x = et::rand<float>(et::cuda<0>, {n}, 1), y = et::rand<float>(et::cuda<0>, {n}, 2),
       w = et::rand<float>(et::cuda<0>, {n}, 3);
  x.requires_grad_(true);
  y.requires_grad_(true);
  w.requires_grad_(true);
  const et::Tensor<float, 1, Gpu> z = et::sin(x * y) + et::exp(w) * x - y / (w + 2.0f);
  const auto g = et::ones<float>(et::cuda<0>, {n});
  test::LaunchCounter counter;
  z.backward(g);
  const test::Launches seen = counter.stop();
  CHECK(seen.kernels() == 1);
  // The gradients themselves (dz/dx = y cos(xy) + e^w, ...), checked on the host.
  const auto xs = x.detach().to_vector(), ys = y.detach().to_vector(), ws = w.detach().to_vector();
  const auto gx = x.grad().to_vector(), gy = y.grad().to_vector(), gw = w.grad().to_vector();
  for (std::size_t i = 0; i < xs.size(); i += 4099) {
    const double a = xs[i], b = ys[i], c = ws[i];
    CHECK(gx[i] == Approx(b * std::cos(a * b) + std::exp(c)).epsilon(1e-5));
    CHECK(gy[i] == Approx(a * std::cos(a * b) - 1 / (c + 2)).epsilon(1e-5));
    CHECK(gw[i] == Approx(std::exp(c) * a + b / ((c + 2) * (c + 2))).epsilon(1e-5));
  }
}

TEST_CASE("GPU: a broadcast input adds one reduction to the fused backward", "[autograd][cupti]") {
  auto x = et::rand<float>(et::cuda<0>, {512, 256}, 4);
  auto b = et::rand<float>(et::cuda<0>, {256}, 5);
  x.requires_grad_(true);
  b.requires_grad_(true);
  const et::Tensor<float, 2, Gpu> z = et::tanh(x + b);
  const auto g = et::ones<float>(et::cuda<0>, {512, 256});
  std::size_t reduction_kernels = 0;
  {
    const auto staged = et::ones<float>(et::cuda<0>, {256, 512});
    test::LaunchCounter counter;
    (void)et::sum(staged, 1);
    reduction_kernels = counter.stop().kernels();
  }
  test::LaunchCounter counter;
  z.backward(g);
  CHECK(counter.stop().kernels() == 1 + reduction_kernels);
}
