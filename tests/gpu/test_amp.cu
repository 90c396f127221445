// Mixed precision on the GPU: the cases of tests/common/amp_cases.hpp and autocast_cases.hpp on CUDA; a scaled
// float16 training step captured once and replayed equals the same steps run eagerly, an
// overflow among them; and nothing in a scaled step waits for the host (CUPTI's callbacks
// see no *Synchronize* and no *Memcpy* call).
#include "../common/amp_cases.hpp"
#include "../common/autocast_cases.hpp"
#include "cupti_counter.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

using Gpu = et::Cuda<0>;

TEST_CASE("GPU: GradScaler skips, backs off and grows as PyTorch's, with SGD", "[amp]") {
  test::check_scaler_with_sgd<Gpu>(0.0);
  test::check_scaler_with_sgd<Gpu>(0.9);
}
TEST_CASE("GPU: GradScaler: one overflowing optimizer of two, Adam, disabled, bad use", "[amp]") {
  test::check_scaler_with_two_optimizers<Gpu>();
  test::check_scaler_with_adam<Gpu>();
  test::check_scaler_errors<Gpu>();
}
TEMPLATE_TEST_CASE("GPU: Autocast: types, values, the cast cache and the permission", "[amp]", et::bfloat16, et::half) {
  test::check_autocast_types<Gpu, TestType>();
  test::check_autocast_values<Gpu, TestType>();
}
TEMPLATE_TEST_CASE("GPU: Autocast: a network's float gradients within 16-bit precision of float training", "[amp]",
                   et::bfloat16, et::half) {
  test::check_autocast_gradients<Gpu, TestType>();
}
TEMPLATE_TEST_CASE("GPU: Autocast: float inputs of float modules computed in 16 bits, as PyTorch's autocast", "[amp]",
                   et::bfloat16, et::half) {
  test::check_autocast_float_inputs<Gpu, TestType>();
}
TEMPLATE_TEST_CASE("GPU: Autocast: the cast cache across weights that reuse a freed block", "[amp]", et::bfloat16,
                   et::half) {
  test::check_autocast_cache_reuse<Gpu, TestType>();
}
TEMPLATE_TEST_CASE("GPU: Autocast: the LSTM in 16 bits against the float LSTM", "[amp][lstm]", et::bfloat16, et::half) {
  test::check_autocast_lstm<Gpu, TestType>();
}

namespace {

/// A float16 step: Linear -> ReLU -> Linear on half activations, cross_entropy, scaled
/// backward, SGD with momentum through the scaler.
struct ScaledTrainer {
  et::nn::Linear<float, Gpu> fc1, fc2;
  et::optim::SGD<float, Gpu> opt;
  et::amp::GradScaler<Gpu> scaler;
  explicit ScaledTrainer(std::uint64_t seed)
      : fc1(et::cuda<0>, 32, 64, seed),
        fc2(et::cuda<0>, 64, 10, seed + 1),
        opt(et::optim::parameters(fc1.weight, fc1.bias, fc2.weight, fc2.bias), {.lr = 0.05, .momentum = 0.9}),
        scaler(et::cuda<0>, {.init_scale = 1024.0, .growth_interval = 2}) {}
  void step(const et::Tensor<et::half, 2, Gpu>& x, const et::Tensor<std::int64_t, 1, Gpu>& labels) {
    opt.zero_grad(true);
    et::Tensor<float, 0, Gpu> loss;
    {
      et::amp::Autocast<et::half> autocast;
      loss = et::nn::cross_entropy(fc2(et::eval(et::relu(fc1(x)))), labels);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
  }
  std::vector<std::vector<float>> parameters() const {
    return {fc1.weight.detach().to_vector(), fc1.bias.detach().to_vector(), fc2.weight.detach().to_vector(),
            fc2.bias.detach().to_vector()};
  }
};

}  // namespace

TEST_CASE("GPU: a scaled float16 step captured once and replayed equals eager steps, through an overflow",
          "[amp][graphs]") {
  const auto s = et::Stream<Gpu>::create();
  et::StreamGuard guard(s);
  et::Tensor<et::half, 2, Gpu> x = et::cast<et::half>(et::randn<float>(et::cuda<0>, {128, 32}, 3));
  const auto clean = x.clone();
  const auto labels = et::Tensor<std::int64_t, 1, Gpu>(et::cast<std::int64_t>(et::rand<float>(et::cuda<0>, {128}, 4) * 10.0f));
  ScaledTrainer eager(7), captured(7);
  eager.step(x, labels);  // warm-up: momentum buffers, the libraries' handles and plans
  captured.step(x, labels);
  const auto graph = et::capture(s, [&] { captured.step(x, labels); });
  for (int k = 0; k < 6; ++k) {
    CAPTURE(k);
    x.copy_(clean);
    if (k == 2) x.slice(0, 5, 6) = std::numeric_limits<float>::infinity();  // this step overflows
    eager.step(x, labels);
    graph.replay();
    s.synchronize();
    CHECK(captured.scaler.get_scale() == eager.scaler.get_scale());
    CHECK(captured.parameters() == eager.parameters());  // the same kernels on the same values
  }
  // After the warm-up (capturing runs nothing): scale 1024, one clean step. Then k0 grows it
  // to 2048 (two clean steps), k2 overflows (1024), k4 grows it again: 2048.
  CHECK(eager.scaler.get_scale() == 2048.0);
  CHECK(eager.parameters() != ScaledTrainer(7).parameters());  // it trained
}

TEST_CASE("GPU: nothing in a scaled step (forward, scaled backward, step, update) waits for the host", "[amp][cupti]") {
  const auto x = et::Tensor<et::half, 2, Gpu>(et::cast<et::half>(et::randn<float>(et::cuda<0>, {64, 32}, 5)));
  const auto labels = et::Tensor<std::int64_t, 1, Gpu>(et::cast<std::int64_t>(et::rand<float>(et::cuda<0>, {64}, 6) * 10.0f));
  ScaledTrainer trainer(9);
  trainer.step(x, labels);  // warm-up
  test::WaitCounter counter;
  trainer.step(x, labels);
  trainer.step(x, labels);
  const std::vector<std::string> waits = counter.stop();
  std::string seen;
  for (const auto& name : waits) seen += name + " ";
  CAPTURE(seen);
  CHECK(waits.empty());
  (void)trainer.scaler.get_scale();  // reading the scale does wait, and is seen doing so
  test::WaitCounter reading;
  (void)trainer.scaler.get_scale();
  CHECK(!reading.stop().empty());
}
