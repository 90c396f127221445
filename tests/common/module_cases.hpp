// Modules (et/nn.hpp), shared by the CPU and GPU tests (test_modules.cpp / .cu): layers
// against double-precision host references, gradients through modules against central
// differences, and what the Module base derives from members(): names, parameters(),
// to(), train/eval.
#pragma once

#include "gradcheck.hpp"

#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace test {

/// A user module: members plus members(); it gets the rest from the base.
template <class T, class D>
struct TinyMlp : et::nn::Module<TinyMlp<T, D>> {
  et::nn::Linear<T, D> fc1, fc2;
  et::nn::Dropout drop{0.25, 7};
  TinyMlp() = default;
  TinyMlp(D dev, std::uint64_t seed) : fc1(dev, 4, 8, seed), fc2(dev, 8, 3, seed + 1) {}
  auto members() { return et::nn::members("fc1", fc1, "drop", drop, "fc2", fc2); }
  et::Tensor<T, 2, D> forward(const et::Tensor<T, 2, D>& x) { return fc2(drop(fc1(x))); }
};

template <class M>
std::vector<std::string> tensor_names(M& m) {
  std::vector<std::string> names;
  et::nn::for_each_tensor(m, [&](const std::string& name, const auto&) { names.push_back(name); });
  return names;
}

template <class D>
void check_linear() {
  for (const auto [n, in, out] : {std::array<std::int64_t, 3>{1, 1, 1}, {7, 5, 3}, {0, 4, 2}, {33, 17, 9}}) {
    CAPTURE(n, in, out);
    et::nn::Linear<double, D> fc(D{}, in, out, 3);
    const auto xs = random_values<double>(static_cast<std::size_t>(n * in), 1);
    const auto y = fc(et::from_vector(D{}, xs, {n, in})).to_vector();
    const auto w = fc.weight.to_vector(), b = fc.bias.to_vector();
    std::vector<double> expected(static_cast<std::size_t>(n * out));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < out; ++j) {
        double sum = b[j];
        for (std::int64_t k = 0; k < in; ++k) sum += xs[i * in + k] * w[j * in + k];
        expected[i * out + j] = sum;
      }
    check_all_close(y, expected, 1e-12);
    const double bound = 1 / std::sqrt(double(in));
    for (const double v : w) CHECK(std::abs(v) <= bound);
    for (const double v : b) CHECK(std::abs(v) <= bound);
  }
  // PyTorch's initialization: uniform in +-1/sqrt(in), one seed gives one set of values.
  et::nn::Linear<float, D> a(D{}, 256, 64, 5), same(D{}, 256, 64, 5), other(D{}, 256, 64, 6);
  CHECK(a.weight.to_vector() == same.weight.to_vector());
  CHECK(a.weight.to_vector() != other.weight.to_vector());
  CHECK(a.weight.to_vector() == et::nn::Linear<float, et::Cpu>(et::cpu, 256, 64, 5).weight.to_vector());
  CHECK(std::abs(et::mean(a.weight).item()) < 0.005);
  CHECK(et::max(et::abs(a.weight)).item() > 0.06);  // the bound is 1/16
  CHECK(a.weight.requires_grad());
  CHECK(a.parameters().size() == 2);
  // A batch axis, no bias, bad sizes.
  et::nn::Linear<double, D> plain(D{}, 3, 2, 1, false);
  CHECK(!plain.bias.defined());
  CHECK(plain.parameters().size() == 1);
  const auto batched = et::randn<double>(D{}, {2, 4, 3}, 2);
  CHECK(plain(batched).shape() == et::Shape<3>{2, 4, 2});
  CHECK_THROWS_AS(plain(et::randn<double>(D{}, {4, 5}, 1)), et::ShapeError);
  CHECK_THROWS_AS((et::nn::Linear<double, D>(D{}, 0, 3)), et::ShapeError);
  CHECK_THROWS_AS((et::nn::Linear<double, D>{}(batched)), et::Error);
  gradcheck<D>(
      "Linear",
      [](const auto& x, const auto& w, const auto& b) {
        et::nn::Linear<double, D> fc;
        fc.weight = w;
        fc.bias = b;
        return fc(x);
      },
      grad_input<2>({3, 4}, 1), grad_input<2>({2, 4}, 2), grad_input<1>({2}, 3));
}

/// Embedding: rows of the table at the indices (exactly), PyTorch's N(0, 1) initialization
/// (the same values on every device), the gradient against central differences (repeated
/// indices add up), bad sizes and indices.
template <class D>
void check_embedding() {
  et::nn::Embedding<double, D> emb(D{}, 11, 5, 4);
  CHECK(emb.parameters().size() == 1);
  CHECK(tensor_names(emb) == std::vector<std::string>{"weight"});
  CHECK(emb.weight.shape() == et::Shape<2>{11, 5});
  CHECK(emb.weight.requires_grad());
  const auto table = emb.weight.to_vector();
  const std::vector<std::int64_t> tokens = {3, 0, 10, 3, 7, 7};
  auto rows_of = [&](const std::vector<std::int64_t>& at) {
    std::vector<double> rows;
    for (const std::int64_t t : at) rows.insert(rows.end(), table.begin() + t * 5, table.begin() + (t + 1) * 5);
    return rows;
  };
  const auto out = emb(et::from_vector(D{}, tokens, {2, 3}));
  CHECK(out.shape() == et::Shape<3>{2, 3, 5});
  CHECK(out.to_vector() == rows_of(tokens));
  CHECK(emb(et::from_vector(D{}, std::vector<std::int64_t>{10}, {1})).to_vector() == rows_of({10}));
  CHECK(emb(et::zeros<std::int64_t>(D{}, {0, 4})).shape() == et::Shape<3>{0, 4, 5});
  // N(0, 1): 64k values, mean and standard deviation within 5 of their standard errors.
  et::nn::Embedding<float, D> big(D{}, 1000, 64, 9);
  const auto values = big.weight.to_vector();
  double sum = 0, squares = 0;
  for (const float v : values) sum += v, squares += double(v) * v;
  const double n = double(values.size()), mean = sum / n;
  CHECK(std::abs(mean) < 5 / std::sqrt(n));
  CHECK(std::abs(std::sqrt(squares / n - mean * mean) - 1) < 5 / std::sqrt(2 * n));
  CHECK(values == et::nn::Embedding<float, et::Cpu>(et::cpu, 1000, 64, 9).weight.to_vector());
  CHECK(values != et::nn::Embedding<float, D>(D{}, 1000, 64, 10).weight.to_vector());
  // Bad sizes and indices; not constructed.
  CHECK_THROWS_AS((et::nn::Embedding<float, D>(D{}, 0, 4)), et::ShapeError);
  CHECK_THROWS_AS((et::nn::Embedding<float, D>(D{}, 4, 0)), et::ShapeError);
  CHECK_THROWS_AS(emb(et::from_vector(D{}, std::vector<std::int64_t>{11}, {1})), et::Error);
  CHECK_THROWS_AS(emb(et::from_vector(D{}, std::vector<std::int64_t>{-1}, {1})), et::Error);
  CHECK_THROWS_AS((et::nn::Embedding<float, D>{}(et::zeros<std::int64_t>(D{}, {2}))), et::Error);
  const auto repeated = et::from_vector(D{}, tokens, {3, 2});
  gradcheck<D>(
      "Embedding",
      [&](const auto& w) {
        et::nn::Embedding<double, D> e;
        e.weight = w;
        return e(repeated);
      },
      grad_input<2>({11, 5}, 1));
}

/// AdaptiveAvgPool2d against PyTorch's window rule in double precision: sizes that tile
/// the plane (avg_pool2d), that do not (windows of two sizes, overlapping), outputs larger
/// than the input; gradients against central differences on both paths.
template <class D>
void check_adaptive_avg_pool() {
  using Sizes = std::array<std::int64_t, 4>;  // H, W, OH, OW
  for (const auto [h, w, oh, ow] : {Sizes{7, 7, 1, 1}, Sizes{8, 6, 4, 3}, Sizes{5, 7, 3, 2}, Sizes{10, 1, 4, 1},
                                    Sizes{3, 3, 5, 5}, Sizes{1, 9, 1, 4}}) {
    for (const std::int64_t n : {2, 0}) {
      CAPTURE(h, w, oh, ow, n);
      const std::int64_t c = 3;
      const auto xs = random_values<double>(static_cast<std::size_t>(n * c * h * w), 7);
      const auto y = et::nn::AdaptiveAvgPool2d({oh, ow})(et::from_vector(D{}, xs, {n, c, h, w}));
      REQUIRE(y.shape() == et::Shape<4>{n, c, oh, ow});
      std::vector<double> expected;
      for (std::int64_t p = 0; p < n * c; ++p)
        for (std::int64_t i = 0; i < oh; ++i)
          for (std::int64_t j = 0; j < ow; ++j) {
            const std::int64_t r0 = i * h / oh, r1 = ((i + 1) * h + oh - 1) / oh;
            const std::int64_t c0 = j * w / ow, c1 = ((j + 1) * w + ow - 1) / ow;
            double sum = 0;
            for (std::int64_t r = r0; r < r1; ++r)
              for (std::int64_t q = c0; q < c1; ++q) sum += xs[static_cast<std::size_t>((p * h + r) * w + q)];
            expected.push_back(sum / double((r1 - r0) * (c1 - c0)));
          }
      check_all_close(y.to_vector(), expected, 1e-12);
    }
  }
  for (const auto size : {std::array<std::int64_t, 2>{2, 2}, std::array<std::int64_t, 2>{3, 2}})
    gradcheck<D>("AdaptiveAvgPool2d", [&](const auto& x) { return et::nn::AdaptiveAvgPool2d(size)(x); },
                 grad_input<4>({2, 2, 4, 5}, 3));
  CHECK(et::nn::AdaptiveAvgPool2d({2, 3}).to(et::cpu).output_size == std::array<std::int64_t, 2>{2, 3});
  CHECK_THROWS_AS(et::nn::AdaptiveAvgPool2d({0, 1}), et::ShapeError);
  CHECK_THROWS_AS(et::nn::AdaptiveAvgPool2d({1, 1})(et::zeros<float>(D{}, {1, 2, 0, 3})), et::ShapeError);
}

/// ModuleList: members "0", "1", ... (PyTorch's names), parameters in order, to() copies
/// as many modules as there are, train/eval reach them.
template <class D>
void check_module_list() {
  et::nn::ModuleList<TinyMlp<float, D>> list;
  for (std::uint64_t k = 0; k < 3; ++k) list.push_back(TinyMlp<float, D>(D{}, 10 + k));
  CHECK(list.size() == 3);
  CHECK(tensor_names(list) == std::vector<std::string>{"0.fc1.weight", "0.fc1.bias", "0.fc2.weight", "0.fc2.bias",
                                                       "1.fc1.weight", "1.fc1.bias", "1.fc2.weight", "1.fc2.bias",
                                                       "2.fc1.weight", "2.fc1.bias", "2.fc2.weight", "2.fc2.bias"});
  const auto params = list.parameters();
  REQUIRE(params.size() == 12);
  CHECK(params[8].data().to_vector() == list[2].fc1.weight.view(et::Shape<1>{32}).to_vector());
  list.eval();
  CHECK((!list[1].is_training() && !list[1].drop.is_training()));
  auto copy = list.to(et::cpu);
  static_assert(std::is_same_v<decltype(copy), et::nn::ModuleList<TinyMlp<float, et::Cpu>>>);
  REQUIRE(copy.size() == 3);
  CHECK(copy[2].fc2.bias.to_vector() == list[2].fc2.bias.to_vector());
  CHECK((!copy.is_training() && !copy[0].is_training()));
  const auto x = et::randn<float>(D{}, {5, 4}, 1);
  auto sum = et::zeros<float>(D{}, {5, 3});
  for (auto& m : list) sum = sum + m(x);  // eval mode: no dropout
  const et::Tensor<float, 2, D> expected = list[0](x) + list[1](x) + list[2](x);
  CHECK(sum.to_vector() == expected.to_vector());
  CHECK(et::nn::ModuleList<TinyMlp<float, D>>{}.parameters().empty());
}

template <class D>
void check_module_semantics() {
  TinyMlp<float, D> m(D{}, 3);
  CHECK(tensor_names(m) == std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"});
  const auto params = m.parameters();
  static_assert(std::is_same_v<decltype(params), const std::vector<et::optim::Parameter<float, D>>>);
  REQUIRE(params.size() == 4);
  CHECK(params[0].numel() == 32);
  CHECK(params[3].numel() == 3);
  m.fc1.weight.detach() += 1.0f;  // parameters share the module's storage
  CHECK(params[0].data().to_vector() == m.fc1.weight.view(et::Shape<1>{32}).to_vector());
  // train / eval reach every submodule.
  CHECK((m.is_training() && m.fc1.is_training() && m.drop.is_training()));
  m.eval();
  CHECK((!m.is_training() && !m.fc1.is_training() && !m.drop.is_training()));
  // to(): the same module on a device (here the CPU), copied, mode and settings kept.
  auto copy = m.to(et::cpu);
  static_assert(std::is_same_v<decltype(copy), TinyMlp<float, et::Cpu>>);
  CHECK(copy.fc2.bias.to_vector() == m.fc2.bias.to_vector());
  CHECK(copy.fc1.weight.requires_grad());
  CHECK((!copy.is_training() && !copy.drop.is_training()));
  CHECK(copy.drop.p() == 0.25);
  copy.fc2.bias.detach() += 1.0f;
  CHECK(copy.fc2.bias.to_vector() != m.fc2.bias.to_vector());  // its own storage
  auto back = copy.to(D{});
  CHECK(back.fc2.bias.to_vector() == copy.fc2.bias.to_vector());
  // Sequential: members "0", "1", ...; applies in order; moves whole.
  et::nn::Sequential seq(et::nn::Linear<double, D>(D{}, 3, 5, 1), et::nn::Tanh{}, et::nn::Linear<double, D>(D{}, 5, 2, 2));
  CHECK(tensor_names(seq) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"});
  const auto x = et::randn<double>(D{}, {4, 3}, 9);
  const et::Tensor<double, 2, D> manual = seq.template get<2>()(et::Tensor<double, 2, D>(et::tanh(seq.template get<0>()(x))));
  CHECK(seq(x).to_vector() == manual.to_vector());
  auto seq_cpu = seq.to(et::cpu);
  static_assert(std::is_same_v<decltype(seq_cpu), et::nn::Sequential<et::nn::Linear<double, et::Cpu>, et::nn::Tanh,
                                                                     et::nn::Linear<double, et::Cpu>>>);
  check_all_close(seq_cpu(x.to(et::cpu)).to_vector(), manual.to_vector(), 1e-12);
}

template <class D>
void check_dropout() {
  const auto x = et::ones<float>(D{}, {400, 25});
  et::nn::Dropout drop(0.3, 5);
  const auto y = drop(x).to_vector();
  std::size_t zeros = 0;
  for (const float v : y) {
    CHECK((v == 0.0f || v == 1.0f / 0.7f));
    zeros += v == 0.0f;
  }
  CHECK(zeros > 2700);  // 3000 expected of 10000
  CHECK(zeros < 3300);
  CHECK(drop(x).to_vector() != y);                                           // a new mask for each call
  CHECK(et::nn::Dropout(0.3, 5)(x.to(et::cpu)).to_vector() == y);           // the CPU drops the same elements
  drop.eval();
  CHECK(drop(x).to_vector() == x.to_vector());
  CHECK(et::nn::Dropout(0.0)(x).to_vector() == x.to_vector());
  CHECK(et::max(et::nn::Dropout(1.0)(x)).item() == 0.0f);
  CHECK_THROWS_AS(et::nn::Dropout(1.5), et::Error);
  CHECK_THROWS_AS(et::nn::Dropout(-0.1), et::Error);
  gradcheck<D>("Dropout", [](const auto& x) { return et::nn::Dropout(0.5, 9)(x); }, grad_input<2>({5, 7}, 4));
}

template <class D>
void check_conv_pool_flatten() {
  et::nn::Conv2d<double, D> conv(D{}, 4, 6, 3, {.padding = {1, 1}}, 11);
  CHECK(conv.weight.shape() == et::Shape<4>{6, 4, 3, 3});
  CHECK(et::max(et::abs(conv.weight)).item() <= 1 / std::sqrt(36.0));
  const auto x = et::randn<double>(D{}, {2, 4, 5, 5}, 1);
  const auto y = conv(x);
  CHECK(y.to_vector() == et::conv2d(x, conv.weight, conv.bias, {.padding = {1, 1}}).to_vector());
  et::nn::Conv2d<double, D> grouped(D{}, 4, 6, 3, {.groups = 2}, 1, false);
  CHECK(grouped.weight.shape() == et::Shape<4>{6, 2, 3, 3});
  CHECK(grouped(x).shape() == et::Shape<4>{2, 6, 3, 3});
  CHECK_THROWS_AS((et::nn::Conv2d<double, D>(D{}, 3, 4, 3, {.groups = 2})), et::ShapeError);
  const auto pooled = et::nn::MaxPool2d(2)(y);
  CHECK(pooled.to_vector() == et::max_pool2d(y, {.kernel = {2, 2}}).to_vector());
  CHECK(et::nn::AvgPool2d(3, 1)(y).shape() == et::Shape<4>{2, 6, 3, 3});
  const auto flat = et::nn::Flatten{}(pooled);
  CHECK(flat.shape() == et::Shape<2>{2, 24});
  CHECK(flat.to_vector() == pooled.to_vector());
  gradcheck<D>(
      "Conv2d, ReLU, MaxPool2d, Flatten",
      [](const auto& x, const auto& w, const auto& b) {
        et::nn::Conv2d<double, D> conv(D{}, 2, 3, 2, {.stride = {1, 1}}, 1);
        conv.weight = w;
        conv.bias = b;
        et::nn::Sequential tail(et::nn::ReLU{}, et::nn::MaxPool2d(2), et::nn::Flatten{});
        return tail(conv(x));
      },
      grad_input<4>({2, 2, 5, 5}, 1), grad_input<4>({3, 2, 2, 2}, 2), grad_input<1>({3}, 3));
}

/// The seeds' pattern: a model built on the CPU, moved with .to(dev), trained there.
template <class D>
void check_module_training() {
  const auto x = et::randn<float>(D{}, {256, 2}, 4);
  const auto k = et::from_vector(D{}, std::vector<float>{1, -1, 0, 0.5f, 0.5f, -1}, {2, 3});
  const auto labels = et::argmax(et::eval(et::matmul(x, k)), 1);
  et::nn::Sequential cpu_model(et::nn::Linear<float, et::Cpu>(et::cpu, 2, 16, 1), et::nn::GELU{},
                               et::nn::Linear<float, et::Cpu>(et::cpu, 16, 3, 2));
  auto model = cpu_model.to(D{});
  et::optim::Adam opt(model.parameters(), {.lr = 0.02});
  for (int step = 0; step < 150; ++step) {
    opt.zero_grad();
    et::nn::cross_entropy(model(x), labels).backward();
    opt.step();
  }
  et::NoGradGuard no_grad;
  const float accuracy = et::mean(et::cast<float>(et::argmax(model(x), 1) == labels)).item();
  CHECK(accuracy > 0.95f);
  CHECK(cpu_model.template get<0>().weight.to_vector() != model.template get<0>().weight.to_vector());  // the copy trained
}

/// A batch of no rows whose input and parameters require grad (the third bad-input probe):
/// conv2d, max_pool2d, AdaptiveAvgPool2d and the LSTM record as Linear does, and backward()
/// gives the parameters zero gradients and the input an empty one, as PyTorch does.
template <class D>
void check_empty_batch_gradients() {
  const auto zeros_of = [](const auto& t) { return std::vector<float>(std::size_t(t.numel()), 0.0f); };
  et::nn::Conv2d<float, D> conv(D{}, 3, 4, 3, {.padding = {1, 1}}, 1);
  et::Tensor<float, 4, D> image = et::randn<float>(D{}, {0, 3, 6, 6}, 2);
  image.requires_grad_(true);
  const auto y = conv(image);
  REQUIRE(y.requires_grad());
  et::sum(et::max_pool2d(y, {.kernel = {2, 2}}) * 2.0f).backward();
  REQUIRE(conv.weight.grad().defined());
  CHECK(conv.weight.grad().to_vector() == zeros_of(conv.weight));
  CHECK(conv.bias.grad().to_vector() == zeros_of(conv.bias));
  CHECK(image.grad().shape() == image.shape());

  et::Tensor<float, 4, D> planes = et::randn<float>(D{}, {0, 2, 4, 4}, 3);
  planes.requires_grad_(true);
  for (const std::array<std::int64_t, 2> size : {std::array<std::int64_t, 2>{1, 1}, {3, 3}}) {
    const auto pooled = et::nn::AdaptiveAvgPool2d(size)(planes);
    REQUIRE(pooled.requires_grad());
    et::sum(pooled).backward();
    CHECK(planes.grad().shape() == planes.shape());
  }

  et::nn::LSTM<float, D> lstm(D{}, 3, 5, {.num_layers = 2}, 4);
  et::Tensor<float, 3, D> sequence = et::randn<float>(D{}, {4, 0, 3}, 5);
  sequence.requires_grad_(true);
  const auto [out, h, c] = lstm(sequence);
  REQUIRE(out.requires_grad());
  et::eval(et::sum(out) + et::sum(c)).backward();
  for (const auto& p : lstm.parameters()) {
    REQUIRE(p.grad().defined());
    CHECK(p.grad().to_vector() == zeros_of(p));
  }
  CHECK(sequence.grad().shape() == sequence.shape());
}

}  // namespace test
