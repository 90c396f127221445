// The training loop of the classification examples (digits.cpp, fashion_mnist.cpp): epochs
// over a DataLoader's batches with any module and optimizer, the test accuracy after each.
#pragma once

#include <et/nn.hpp>

#include <chrono>
#include <type_traits>
#include <cstdio>
#include <vector>

namespace example {

struct Curves {
  std::vector<double> loss, accuracy;
};

// [guide:classifier-train]
// Trains `model` with `opt` for `epochs` on the loader's batches; after each epoch, one
// line: the mean training loss, the test accuracy, and samples per second. L = float trains
// in float; L = et::bfloat16 or et::half in mixed precision: each batch cast to L once and
// the model run under et::amp::Autocast<L> (its float weights cast once per step), the loss
// float; for et::half the loss scaled by a GradScaler, whose step skips an update whose
// gradients overflowed, decided on the GPU (for the others the scaler passes through).
template <class L = float, class Model, class Optimizer, class Loader, class X, class Y>
Curves train(const char* name, Model& model, Optimizer& opt, Loader& loader, const X& test_x, const Y& test_y,
             int epochs) {
  using D = typename X::device_type;
  et::amp::GradScaler<D> scaler(D{}, {.enabled = std::is_same_v<L, et::half>});
  const auto forward = [&](const X& x) {
    if constexpr (std::is_same_v<L, float>) {
      return model(x);
    } else {
      et::amp::Autocast<L> autocast;
      return model(et::eval(et::cast<L>(x)));
    }
  };
  Curves curves;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    model.train();
    auto total = et::zeros<float>(test_x.device(), et::Shape<0>{});
    for (const auto& [x, y] : loader) {     // batches copied one ahead, on a stream of their own
      opt.zero_grad();
      auto loss = et::nn::cross_entropy(forward(x), y);
      scaler.scale(loss).backward();
      scaler.step(opt);
      scaler.update();
      total += loss.detach();                // summed on the device: no wait for the GPU here
    }
    const double mean_loss = total.item() / double(loader.size());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model.eval();
    et::NoGradGuard no_grad;
    const auto predicted = et::argmax(forward(test_x), 1);
    const double accuracy = et::mean(et::cast<float>(predicted == test_y)).item();
    std::printf("%s epoch %2d  loss %.4f  test accuracy %.4f  %8.0f samples/s\n", name, epoch, mean_loss, accuracy,
                double(loader.dataset().size()) / seconds);
    curves.loss.push_back(mean_loss);
    curves.accuracy.push_back(accuracy);
  }
  return curves;
}
// [guide:end]

}  // namespace example
