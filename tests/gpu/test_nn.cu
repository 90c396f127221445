// Losses on the GPU: the cases of tests/cpu/loss_cases.hpp on CUDA, and cross_entropy's
// forward as three kernels (one reading the logits) and its backward as ONE (CUPTI-counted).
#include "../cpu/loss_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: losses: values, gradients and errors", "[nn][loss]") { test::check_losses<Gpu>(); }

TEST_CASE("GPU: cross_entropy's forward is two kernels, its backward one", "[nn][loss][cupti]") {
  auto logits = et::randn<float>(et::cuda<0>, {256, 1000}, 7);
  logits.requires_grad_(true);
  const auto labels = et::cast<std::int64_t>(et::rand<float>(et::cuda<0>, {256}, 8) * 999.0f);
  const et::Tensor<std::int64_t, 1, Gpu> label_tensor(labels);
  test::LaunchCounter forward;
  const auto loss = et::nn::cross_entropy(logits, label_tensor);
  CHECK(forward.stop().kernels() == 2);  // logsumexp; the mean of lse - x[label] (one block: N <= 4096)
  const auto seed = et::ones<float>(et::cuda<0>, std::array<std::int64_t, 0>{});  // made outside the count
  test::LaunchCounter counter;
  loss.backward(seed);
  CHECK(counter.stop().kernels() == 1);
  // Each row of the gradient is (softmax - onehot) / N: it sums to 0.
  const auto row_sums = et::sum(logits.grad(), 1).to_vector();
  for (const float s : row_sums) CHECK(std::abs(s) < 1e-6f);
}
