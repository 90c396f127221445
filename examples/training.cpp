// Training with modules, losses and optimizers: the seeds' LinearRegression(2, 5) moved to
// the device with .to and fitted with mse_loss and SGD, a softmax classifier of loose tensors
// fitted with cross_entropy and Adam, and a user-written MLP module trained with AdamW,
// saved as safetensors and reloaded on the CPU; on the CPU and on the first GPU when there
// is one. Each checks its result.
//
//   training          both on every device found
#include <et/nn.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

// [guide:train-regression]
// The seeds' LinearRegression(2, 5), y = x W^T + b, built on the CPU and moved to the device
// with .to(dev), fitted to targets made from known weights.
template <et::Device D>
float fit_regression(D dev, int steps) {
  const auto x = et::randn<float>(et::cpu, {256, 2}, 1).to(dev);  // inputs made on the host, copied over
  const auto known = et::from_vector(dev, std::vector<float>{1, -2, 3, 0.5f, 0, 2, 1, -1, 4, 0.25f}, {2, 5});
  const et::Tensor<float, 2, D> y = et::matmul(x, known) + 0.5f;
  const et::nn::Linear<float, et::Cpu> on_host(et::cpu, 2, 5, /*seed=*/0);
  et::nn::Linear<float, D> model = on_host.to(dev);  // the same model on dev, its parameters copied
  et::optim::SGD opt(model.parameters(), {.lr = 0.1, .momentum = 0.9});
  float loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();                                 // one kernel for all parameters
    auto loss = et::nn::mse_loss(model(x), y);       // a 0-d tensor
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

// [guide:user-module]
// A module of one's own: members, and members() naming them. to(), parameters(),
// train()/eval() and save/load come from the base.
template <class T, class D>
struct Mlp : et::nn::Module<Mlp<T, D>> {
  et::nn::Linear<T, D> hidden, out;
  et::nn::Dropout dropout{0.1, /*seed=*/3};
  Mlp() = default;  // to() builds the copy anew, then fills it
  Mlp(D dev, std::uint64_t seed) : hidden(dev, 2, 32, seed), out(dev, 32, 3, seed + 1) {}
  auto members() { return et::nn::members("hidden", hidden, "dropout", dropout, "out", out); }
  et::Tensor<T, 2, D> forward(const et::Tensor<T, 2, D>& x) {
    return out(dropout(et::Tensor<T, 2, D>(et::relu(hidden(x)))));
  }
};

template <et::Device D>
float fit_mlp(D dev, int steps, const std::string& path) {
  const auto x = et::randn<float>(dev, {512, 2}, 4);
  const auto k = et::from_vector(dev, std::vector<float>{1, -1, 0, 0.5f, 0.5f, -1}, {2, 3});
  const auto labels = et::argmax(et::eval(et::matmul(x, k)), 1);
  Mlp<float, D> model(dev, /*seed=*/1);
  et::optim::AdamW opt(model.parameters(), {.lr = 0.01});
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    et::nn::cross_entropy(model(x), labels).backward();
    opt.step();
  }
  et::nn::save(model, path);                         // hidden.weight, hidden.bias, out.weight, out.bias
  Mlp<float, et::Cpu> reloaded(et::cpu, /*seed=*/2);
  et::nn::load(reloaded, path);                      // checks every name, dtype and shape first
  reloaded.eval();                                   // no dropout
  et::NoGradGuard no_grad;
  const auto predicted = et::argmax(reloaded(x.to(et::cpu)), 1);
  return et::mean(et::cast<float>(predicted == labels.to(et::cpu))).item();
}
// [guide:end]

template <et::Device D>
bool run(D dev) {
  const float loss = fit_regression(dev, 300);
  const float accuracy = fit_classifier(dev, 300);
  const std::string path = (std::filesystem::temp_directory_path() / "et_training_example.safetensors").string();
  const float mlp_accuracy = fit_mlp(dev, 200, path);
  std::remove(path.c_str());
  std::printf("%s: regression loss %.3g, classifier accuracy %.3f, saved and reloaded MLP accuracy %.3f\n",
              et::device_name<D>.c_str(), loss, accuracy, mlp_accuracy);
  return loss < 1e-6f && accuracy > 0.97f && mlp_accuracy > 0.97f;
}

int main() {
  bool ok = run(et::cpu);
#if defined(__CUDACC__)
  if (et::device_count() > 0) ok = run(et::cuda<0>) && ok;
#endif
  if (!ok) std::printf("training: a result is wrong\n");
  return ok ? 0 : 1;
}
