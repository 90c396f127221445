// A digits classifier on a real data set: scikit-learn's 8x8 handwritten digits (1797
// images; scripts/install-deps takes digits.csv from Debian's python3-sklearn package).
// An MLP and a small CNN are trained with Adam on 80% of the images, batches coming from
// et::data::DataLoader (pinned memory, copies one batch ahead on a stream of their own),
// and tested on the other 20%: each must reach 95% test accuracy. One line per epoch;
// the loss and accuracy curves of both models go to a PNG when a path is given, and the
// trained CNN to a safetensors file when a second path is given.
//
//   digits [data/digits.csv] [epochs = 30] [curves.png] [cnn.safetensors]   on the first GPU, else the CPU
#include <et/nn.hpp>

#include "classifier.hpp"
#include "plot_png.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Digits {
  et::Tensor<float, 2, et::Cpu> images;   // [N, 64], pixels scaled to [0, 1]
  et::Tensor<std::int64_t, 1, et::Cpu> labels;
};

/// Reads the CSV: 64 pixel values 0..16, then the label 0..9, per line.
Digits read_digits(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw et::Error("digits: cannot open " + path + " (scripts/install-deps fetches it)");
  std::vector<float> pixels;
  std::vector<std::int64_t> labels;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string field;
    std::vector<int> values;
    while (std::getline(fields, field, ',')) values.push_back(std::stoi(field));
    if (values.size() != 65 || values[64] < 0 || values[64] > 9)
      throw et::Error("digits: line " + std::to_string(labels.size() + 1) + " of " + path + " is not 64 pixels and a label");
    for (int i = 0; i < 64; ++i) pixels.push_back(float(values[std::size_t(i)]) / 16.0f);
    labels.push_back(values[64]);
  }
  const auto n = std::int64_t(labels.size());
  return {et::from_vector(et::cpu, pixels, {n, 64}), et::from_vector(et::cpu, labels, {n})};
}

/// Rows `rows` of a host tensor.
template <class T, int R>
et::Tensor<T, R, et::Cpu> take(const et::Tensor<T, R, et::Cpu>& t, const std::vector<std::int64_t>& rows) {
  auto shape = t.shape();
  shape[0] = std::int64_t(rows.size());
  auto out = et::Tensor<T, R, et::Cpu>::allocate(shape);
  const std::int64_t per = t.numel() / std::max<std::int64_t>(t.size(0), 1);
  for (std::size_t r = 0; r < rows.size(); ++r)
    std::copy_n(t.data() + rows[r] * per, per, out.data() + std::int64_t(r) * per);
  return out;
}


template <et::Device D>
int run(D dev, const Digits& digits, int epochs, const std::string& png, const std::string& weights) {
  // 80% to train, 20% to test, split by a seeded shuffle.
  std::vector<std::int64_t> order(std::size_t(digits.labels.size(0)));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  const auto n_train = std::ptrdiff_t(order.size() * 4 / 5);
  const std::vector<std::int64_t> train_rows(order.begin(), order.begin() + n_train), test_rows(order.begin() + n_train, order.end());
  const auto train_x = take(digits.images, train_rows);
  const auto test_x = take(digits.images, test_rows);
  const auto train_y = take(digits.labels, train_rows);
  const auto test_y = take(digits.labels, test_rows).to(dev);
  std::printf("digits on %s: %zu training and %zu test images, %d epochs\n", et::device_name<D>.c_str(),
              train_rows.size(), test_rows.size(), epochs);

  // [guide:digits-models]
  namespace nn = et::nn;
  nn::Sequential mlp(nn::Linear<float, D>(dev, 64, 128, 1), nn::ReLU{}, nn::Dropout(0.1, 2),
                     nn::Linear<float, D>(dev, 128, 10, 3));
  nn::Sequential cnn(nn::Conv2d<float, D>(dev, 1, 16, 3, {.padding = {1, 1}}, 4), nn::ReLU{}, nn::MaxPool2d(2),
                     nn::Conv2d<float, D>(dev, 16, 32, 3, {.padding = {1, 1}}, 5), nn::ReLU{}, nn::MaxPool2d(2),
                     nn::Flatten{}, nn::Linear<float, D>(dev, 32 * 2 * 2, 10, 6));
  const et::data::LoaderOptions batches{.batch_size = 32, .shuffle = true, .seed = 8};
  et::data::DataLoader flat(et::data::TensorDataset(train_x, train_y), dev, batches);
  et::data::DataLoader square(et::data::TensorDataset(train_x.reshape(std::array<std::int64_t, 4>{n_train, 1, 8, 8}), train_y),
                              dev, batches);
  // [guide:end]
  et::optim::Adam mlp_opt(mlp.parameters(), {.lr = 2e-3});
  const auto mlp_curves = example::train("mlp", mlp, mlp_opt, flat, test_x.to(dev), test_y, epochs);
  const auto test_images = test_x.reshape(std::array<std::int64_t, 4>{test_x.size(0), 1, 8, 8}).to(dev);
  et::optim::Adam cnn_opt(cnn.parameters(), {.lr = 2e-3});
  const auto cnn_curves = example::train("cnn", cnn, cnn_opt, square, test_images, test_y, epochs);

  if (!png.empty()) {
    example::Chart chart(720, 320);
    chart.panel(0, 0.0, 2.5);  // left: training loss, 0 to 2.5
    chart.panel(1, 0.8, 1.0);  // right: test accuracy, 0.8 to 1.0
    chart.line(0, mlp_curves.loss, example::Chart::blue), chart.line(0, cnn_curves.loss, example::Chart::orange);
    chart.line(1, mlp_curves.accuracy, example::Chart::blue), chart.line(1, cnn_curves.accuracy, example::Chart::orange);
    chart.write(png);
    std::printf("curves written to %s (blue: MLP, orange: CNN; left: loss 0..2.5, right: accuracy 0.8..1)\n",
                png.c_str());
  }
  if (!weights.empty()) {
    et::nn::save(cnn, weights);  // 0.weight, 0.bias, 3.weight, 3.bias, 7.weight, 7.bias
    std::printf("CNN weights written to %s\n", weights.c_str());
  }
  const bool ok = mlp_curves.accuracy.back() >= 0.95 && cnn_curves.accuracy.back() >= 0.95;
  std::printf("%s\n", ok ? "both models reach 95% test accuracy: ok" : "a model stays below 95% test accuracy: FAILED");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "data/digits.csv";
  const int epochs = argc > 2 ? std::atoi(argv[2]) : 30;
  const std::string png = argc > 3 ? argv[3] : "";
  const std::string weights = argc > 4 ? argv[4] : "";
  if (epochs < 1) {
    std::fprintf(stderr, "usage: digits [data/digits.csv] [epochs >= 1] [curves.png] [cnn.safetensors]\n");
    return 2;
  }
  const Digits digits = read_digits(path);
  return et::try_gpu([&](auto dev) { return run(dev, digits, epochs, png, weights); });
}
