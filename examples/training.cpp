// Training with a loss and an optimizer: the seeds' LinearRegression(2, 5) fitted with
// mse_loss and SGD, and a softmax classifier fitted with cross_entropy and Adam, on the CPU
// and on the first GPU when there is one. Each checks its result.
//
//   training          both on every device found
#include <et/et.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

// [guide:train-regression]
// y = x w + b with 2 inputs and 5 outputs, fitted to targets made from known weights.
template <et::Device D>
float fit_regression(D dev, int steps) {
  const auto x = et::randn<float>(et::cpu, {256, 2}, 1).to(dev);  // inputs made on the host, copied over
  const auto known = et::from_vector(dev, std::vector<float>{1, -2, 3, 0.5f, 0, 2, 1, -1, 4, 0.25f}, {2, 5});
  const et::Tensor<float, 2, D> y = et::matmul(x, known) + 0.5f;
  auto w = et::zeros<float>(dev, {2, 5});
  auto b = et::zeros<float>(dev, {5});
  w.requires_grad_(true);
  b.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w, b), {.lr = 0.1, .momentum = 0.9});
  float loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();                                 // one kernel for all parameters
    const et::Tensor<float, 2, D> prediction = et::matmul(x, w) + b;
    auto loss = et::nn::mse_loss(prediction, y);     // a 0-d tensor
    loss.backward();
    opt.step();                                      // one kernel for all parameters
    loss_value = loss.item();
  }
  return loss_value;
}
// [guide:end]

// [guide:train-classifier]
// Three classes of points in the plane (the class is the argmax of x k for a known k),
// separated by a linear softmax classifier.
template <et::Device D>
float fit_classifier(D dev, int steps) {
  const auto x = et::randn<float>(dev, {512, 2}, 2);
  const auto k = et::from_vector(dev, std::vector<float>{1, -1, 0, 0.5f, 0.5f, -1}, {2, 3});
  const auto labels = et::argmax(et::eval(et::matmul(x, k)), 1);  // int64, one per row
  auto w = et::zeros<float>(dev, {2, 3});
  auto b = et::zeros<float>(dev, {3});
  w.requires_grad_(true);
  b.requires_grad_(true);
  et::optim::Adam opt(et::optim::parameters(w, b), {.lr = 0.05});
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    const et::Tensor<float, 2, D> logits = et::matmul(x, w) + b;
    et::nn::cross_entropy(logits, labels).backward();  // log-softmax and NLL: one node, one backward kernel
    opt.step();
  }
  et::NoGradGuard no_grad;
  const auto predicted = et::argmax(et::eval(et::matmul(x, w) + b), 1);
  return et::mean(et::cast<float>(predicted == labels)).item();  // the accuracy
}
// [guide:end]

template <et::Device D>
bool run(D dev) {
  const float loss = fit_regression(dev, 300);
  const float accuracy = fit_classifier(dev, 300);
  std::printf("%s: regression loss %.3g, classifier accuracy %.3f\n", et::device_name<D>.c_str(), loss, accuracy);
  return loss < 1e-6f && accuracy > 0.97f;
}

int main() {
  bool ok = run(et::cpu);
#if defined(__CUDACC__)
  if (et::device_count() > 0) ok = run(et::cuda<0>) && ok;
#endif
  if (!ok) std::printf("training: a result is wrong\n");
  return ok ? 0 : 1;
}
