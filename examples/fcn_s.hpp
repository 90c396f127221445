// FCN-S, the fully connected network of Shi et al.'s benchmark of deep-learning tools
// ("Benchmarking State-of-the-Art Deep Learning Software Tools", 2016, Table 7; dlbench):
// 26752 -> 2048 -> 2048 -> 2048 -> 26752, sigmoid activations, softmax cross-entropy,
// SGD with lr 0.01, mini-batches of 64, synthetic data. Shared by examples/fcn_s.cpp (which
// trains it) and bench/fcn.cu (which times it in the table's format).
#pragma once

#include <et/nn.hpp>

#include <cstdint>

namespace fcn {

struct Sizes {
  std::int64_t input = 26752, hidden = 2048, output = 26752, batch = 64;
};

/// The layer widths divided by `divisor` (the batch stays 64): a quick run on a CPU.
inline Sizes scaled(std::int64_t divisor) {
  Sizes s;
  s.input /= divisor;
  s.hidden /= divisor;
  s.output /= divisor;
  return s;
}

// [guide:fcn-model]
template <et::Device D>
auto make_model(D dev, const Sizes& s, std::uint64_t seed = 1) {
  using Linear = et::nn::Linear<float, D>;
  return et::nn::Sequential(Linear(dev, s.input, s.hidden, seed), et::nn::Sigmoid{},
                            Linear(dev, s.hidden, s.hidden, seed + 1), et::nn::Sigmoid{},
                            Linear(dev, s.hidden, s.hidden, seed + 2), et::nn::Sigmoid{},
                            Linear(dev, s.hidden, s.output, seed + 3));
}

template <et::Device D>
struct Batch {
  et::Tensor<float, 2, D> x;                // [batch, input], normal
  et::Tensor<std::int64_t, 1, D> labels;    // [batch], uniform in [0, output)
};

template <et::Device D>
Batch<D> synthetic_batch(D dev, const Sizes& s, std::uint64_t seed) {
  const auto u = et::rand<float>(dev, {s.batch}, seed + 1);
  return {et::randn<float>(dev, {s.batch, s.input}, seed),
          et::eval(et::cast<std::int64_t>(et::minimum(u * float(s.output), float(s.output - 1))))};
}

/// One mini-batch: forward, loss, backward, update. Gradients are dropped rather than
/// zeroed (PyTorch's default zero_grad(set_to_none=True)), so backward writes them once.
template <class Model, class Optimizer, et::Device D>
et::Tensor<float, 0, D> train_step(Model& model, Optimizer& opt, const Batch<D>& batch) {
  opt.zero_grad(/*set_to_none=*/true);
  auto loss = et::nn::cross_entropy(model(batch.x), batch.labels);
  loss.backward();
  opt.step();  // every parameter in one kernel
  return loss;
}
// [guide:end]

}  // namespace fcn
