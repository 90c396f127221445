// Optimizers on the GPU: the cases of tests/common/optim_cases.hpp on CUDA, and one step of
// every parameter as ONE kernel (CUPTI-counted), as PyTorch's fused optimizers.
#include "../common/fold_cases.hpp"
#include "../common/optim_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: optimizers follow PyTorch's update rules", "[optim]") { test::check_optimizers<Gpu>(); }
TEST_CASE("GPU: AdamW's parameter groups and its capturable form", "[optim]") { test::check_adam_groups<Gpu>(); }
TEST_CASE("GPU: a capturable AdamW's step replayed from a CUDA graph equals eager steps", "[optim][graphs]") {
  const auto s = et::Stream<Gpu>::create();
  auto run = [&](bool captured) {
    auto w = et::randn<float>(et::cuda<0>, {300, 7}, 5);
    auto b = et::randn<float>(et::cuda<0>, {7}, 6);
    w.requires_grad_(true), b.requires_grad_(true);
    et::optim::AdamW<float, Gpu> opt({{.params = et::optim::parameters(w), .weight_decay = 0.1},
                                      {.params = et::optim::parameters(b), .weight_decay = 0.0}},
                                     {.lr = 0.01, .capturable = true});
    const auto x = et::randn<float>(et::cuda<0>, {4, 300}, 7);
    auto step = [&] {
      opt.zero_grad();
      const et::Tensor<float, 2, Gpu> h = et::matmul(x, w) + b;
      et::sum(et::tanh(h)).backward();
      opt.step();
    };
    et::StreamGuard guard(s);
    step();  // warm-up, eager: the moments and the gradients exist before the capture
    if (captured) {
      const auto graph = et::capture(s, step);
      for (int k = 0; k < 3; ++k) graph.replay();
    } else {
      for (int k = 0; k < 3; ++k) step();
    }
    s.synchronize();
    CHECK(opt.step_count(0) == 4);
    auto values = w.detach().to_vector();
    const auto bv = b.detach().to_vector();
    values.insert(values.end(), bv.begin(), bv.end());
    return values;
  };
  const auto eager = run(false), replayed = run(true);
  REQUIRE(eager.size() == replayed.size());
  for (std::size_t i = 0; i < eager.size(); ++i) CHECK(replayed[i] == Approx(eager[i]).epsilon(1e-6).margin(1e-7));
}
TEST_CASE("GPU: clip_grad_norm_: the norm of every gradient, then scaled", "[optim][clip]") {
  test::check_clip_grad_norm<Gpu>();
}

TEST_CASE("GPU: clip_grad_norm_ captured in a CUDA graph reads the gradients at each replay", "[optim][clip][graphs]") {
  const auto s = et::Stream<Gpu>::create();
  test::ClipSetup<float, Gpu> setup({5000, 7}, 4);
  const auto params = setup.parameters();
  std::vector<et::Tensor<float, 1, Gpu>> originals;
  for (const auto& p : params) originals.push_back(et::Tensor<float, 1, Gpu>(p.grad() * 1.0f));
  et::Tensor<double, 0, Gpu> norm;
  auto clip = [&] { norm = et::nn::clip_grad_norm_(params, 1.0).tensor(); };
  {
    et::StreamGuard guard(s);
    clip();  // warm-up, eager
  }
  const auto graph = et::capture(s, clip);  // fails if clip_grad_norm_ waited for the device
  for (const float scale : {1.0f, 2.0f}) {
    CAPTURE(scale);
    for (std::size_t k = 0; k < params.size(); ++k) params[k].grad().copy_(originals[k] * scale);
    graph.replay();
    s.synchronize();
    const double expected = scale * setup.norm(2);
    CHECK(norm.item() == Approx(expected).epsilon(1e-6));
    CHECK(double(params[0].grad().to_vector()[4999]) ==
          Approx(scale * setup.grads[0][4999] / (expected + 1e-6)).epsilon(1e-5));
  }
}
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
