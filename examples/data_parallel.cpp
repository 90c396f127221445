// The same training on one GPU and on every GPU this process sees, timed: FCN-S
// (examples/fcn_s.hpp) on a batch of 64 rows per GPU, first on GPU 0 alone, then split among
// the GPUs by et::nn::DataParallel. Also a batch split among the GPUs by hand
// (et::DeviceSet's scatter and gather). With one GPU both runs use it; the losses must agree.
//
//   ./data_parallel [divisor] [steps]    layer widths divided by divisor (default 1)
//
// Without a GPU it says so and exits with 77 (CTest's "skipped").
#include "fcn_s.hpp"

#include <et/dist.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <tuple>

namespace {

/// Milliseconds per step of `steps` training steps (after one untimed), and the last loss.
template <class Model, class Optimizer>
std::pair<double, double> train(Model& model, Optimizer& opt, const fcn::Batch<et::Cuda<0>>& batch, int steps) {
  (void)fcn::train_step(model, opt, batch);
  et::Event<et::Cuda<0>> start, end;
  start.record();
  et::Tensor<float, 0, et::Cuda<0>> loss;
  for (int step = 0; step < steps; ++step) loss = fcn::train_step(model, opt, batch);
  end.record();
  end.synchronize();
  return {double(et::elapsed_ms(start, end)) / steps, double(loss.item())};
}

}  // namespace

int main(int argc, char** argv) try {
  const std::int64_t divisor = argc > 1 ? std::atoll(argv[1]) : 1;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (divisor < 1 || divisor > 2048 || steps < 1) {
    std::fprintf(stderr, "usage: data_parallel [divisor in 1..2048] [steps >= 1]\n");
    return 2;
  }
  bool ok = true;
  // [guide:data-parallel]
  et::with_visible_devices<8>([&](auto gpus) {  // et::DeviceSet<et::Cuda<0>, ..., et::Cuda<n - 1>>
    fcn::Sizes sizes = fcn::scaled(divisor);
    sizes.batch = 64 * std::int64_t(gpus.size());
    const auto batch = fcn::synthetic_batch(et::cuda<0>, sizes, 7);  // the whole batch, on GPU 0

    auto alone = fcn::make_model(et::cuda<0>, sizes);
    et::optim::SGD alone_opt(alone.parameters(), {.lr = 0.01});
    const auto [one_ms, one_loss] = train(alone, alone_opt, batch, steps);

    auto model = fcn::make_model(et::cuda<0>, sizes);
    et::nn::DataParallel dp(model, gpus);                       // a replica on each GPU
    auto opt = dp.template optimizer<et::optim::SGD>({.lr = 0.01});  // one SGD per replica
    const auto [all_ms, all_loss] = train(dp, opt, batch, steps);

    std::printf("%lld rows: %.3f ms per step on 1 GPU, %.3f ms on %zu (%.2fx); losses %.5f and %.5f\n",
                static_cast<long long>(sizes.batch), one_ms, all_ms, gpus.size(), one_ms / all_ms, one_loss, all_loss);
    ok = std::abs(one_loss - all_loss) <= 1e-3 * std::abs(one_loss);
  });
  // [guide:end]

  et::with_visible_devices<8>([&](auto gpus) {
    // [guide:scatter]
    const auto x = et::randn<float>(et::cuda<0>, {10, 4}, /*seed=*/3);
    const auto parts = gpus.scatter(x);  // a tuple: rows 0-4 on cuda:0, 5-9 on cuda:1 (with two GPUs)
    const auto doubled = std::apply([](const auto&... p) { return std::tuple{et::eval(p * 2.0f)...}; }, parts);
    const auto y = gpus.gather(doubled);  // the rows in order, on cuda:0
    // [guide:end]
    ok = ok && et::max(et::abs(y - 2.0f * x)).item() == 0.0f;
  });
  std::printf("%s\n", ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
} catch (const et::Error& e) {
  if (!et::cuda_available()) {
    std::printf("data_parallel needs a GPU (%s)\n", e.what());
    return 77;
  }
  std::fprintf(stderr, "data_parallel: %s\n", e.what());
  return 1;
}
