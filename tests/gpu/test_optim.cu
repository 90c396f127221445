// Optimizers on the GPU: the cases of tests/common/optim_cases.hpp on CUDA, and one step of
// every parameter as ONE kernel (CUPTI-counted), as PyTorch's fused optimizers.
#include "../common/fold_cases.hpp"
#include "../common/optim_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: optimizers follow PyTorch's update rules", "[optim]") { test::check_optimizers<Gpu>(); }
TEST_CASE("GPU: updates overlapped with the backward equal step() after it", "[optim][streams]") {
  test::check_overlapped_steps<Gpu>();
}

TEMPLATE_TEST_CASE("GPU: a scaled GEMM adds alpha a @ b to beta out", "[optim][matmul]", float, double, et::half) {
  test::check_scaled_gemm<Gpu, TestType>();
}
TEST_CASE("GPU: SGD's step folds into the weight-gradient GEMM where it can", "[optim]") {
  test::check_folded_steps<Gpu>();
}

TEST_CASE("GPU: an optimizer step and zero_grad are one kernel each for all parameters", "[optim][cupti]") {
  auto w1 = et::randn<float>(et::cuda<0>, {512, 512}, 1), w2 = et::randn<float>(et::cuda<0>, {10, 512}, 3);
  auto b1 = et::randn<float>(et::cuda<0>, {512}, 2), b2 = et::randn<float>(et::cuda<0>, {10}, 4);
  for (auto* t : {&w1, &w2}) t->requires_grad_(true);
  for (auto* t : {&b1, &b2}) t->requires_grad_(true);
  et::optim::Adam adam(et::optim::parameters(w1, w2), {.lr = 1e-3});
  et::optim::SGD sgd(et::optim::parameters(b1, b2), {.lr = 0.1, .momentum = 0.9});
  const et::Tensor<float, 0, Gpu> loss = et::sum(w1 * w1) + et::sum(w2) + et::sum(b1) + et::sum(b2 * b2);
  loss.backward();
  sgd.step();   // the first steps allocate the state (momentum buffers; zeros for m and v)
  adam.step();
  test::LaunchCounter counter;
  adam.step();
  sgd.step();
  adam.zero_grad();
  CHECK(counter.stop().kernels() == 3);
}
