// Mixed precision (et::amp), shared by the CPU and GPU tests (test_amp.cpp / .cu):
//  - GradScaler's skip, backoff and growth, step by step, against PyTorch's formulas
//    (torch.amp.GradScaler: _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_)
//    computed here on the host, for SGD (skipped on the device), SGD with momentum, two
//    optimizers with one overflowing, and Adam (skipped on the host, its step not counted);
//  - Autocast: the types of each op against the documented lists (amp/autocast.hpp), the
//    values of Linear and Conv2d in 16 bits against double references of the rounded
//    operands, the cast cache (once per scope and version), the run-time permission;
//  - the gradients of a small network under autocast against the float network's.
#pragma once

#include "conv_reference.hpp"
#include "random_values.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace test {

/// PyTorch's scaler on the host: the scale, the growth tracker and the update rule.
struct HostScaler {
  double scale = 65536.0, growth = 2.0, backoff = 0.5;
  int interval = 2000, tracker = 0;
  void update(bool overflow) {
    if (overflow) {
      scale *= backoff;
      tracker = 0;
    } else if (++tracker == interval) {
      scale *= growth;
      tracker = 0;
    }
  }
};

/// Gradient c (times the scale) of L = sum(c * w): the loss a step backpropagates.
template <class D>
et::Tensor<float, 0, D> linear_loss(const et::Tensor<float, 1, D>& w, const std::vector<float>& c) {
  const auto coefficients = et::from_vector(D{}, c, {std::int64_t(c.size())});
  return et::sum(coefficients * w);
}

/// Twelve steps of SGD (lr 0.5, with or without momentum 0.9) under a scaler with
/// growth_interval 3; steps 4, 8 (inf) and 9 (NaN) overflow. After every step: the
/// parameter, the scale and the growth tracker against HostScaler and PyTorch's SGD.
template <class D>
void check_scaler_with_sgd(double momentum) {
  const std::vector<float> w0{0.25f, -1.5f, 2.0f, 0.75f, -0.125f};
  auto w = et::from_vector(D{}, w0, {5});
  w.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 0.5, .momentum = momentum});
  et::amp::GradScaler<D> scaler(D{}, {.growth_interval = 3});
  HostScaler host{.interval = 3};
  double lowest = host.scale, highest = host.scale;
  std::vector<double> want(w0.begin(), w0.end()), buffer(w0.size(), 0.0);
  bool buffered = false;
  for (int step = 1; step <= 12; ++step) {
    CAPTURE(step);
    std::vector<float> c{0.5f, -1.0f, 0.25f, 2.0f, -0.75f};
    for (auto& v : c) v *= float(step % 3 + 1);
    const bool overflow = step == 4 || step == 8 || step == 9;
    if (step == 4) c[1] = 1e36f;  // times the scale: inf in float
    if (step == 8) c[2] = std::numeric_limits<float>::infinity();
    if (step == 9) c[3] = std::numeric_limits<float>::quiet_NaN();
    opt.zero_grad(true);
    scaler.scale(linear_loss(w, c)).backward();
    scaler.step(opt);
    scaler.update();
    if (!overflow) {  // PyTorch's SGD on the unscaled gradient c (exact: the scales are powers of 2)
      for (std::size_t i = 0; i < want.size(); ++i) {
        double g = c[i];
        if (momentum != 0) {
          buffer[i] = buffered ? momentum * buffer[i] + g : g;
          g = buffer[i];
        }
        want[i] = double(float(want[i]) - float(0.5 * g));
      }
      buffered = true;
    }
    host.update(overflow);
    lowest = std::min(lowest, host.scale), highest = std::max(highest, host.scale);
    const auto got = w.detach().to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(double(got[i]) == Approx(want[i]).epsilon(1e-6).margin(1e-6));
    CHECK(scaler.get_scale() == host.scale);
    CHECK(scaler.growth_tracker() == host.tracker);
  }
  CHECK(lowest == 32768.0);  // the sequence both shrank and grew the scale
  CHECK(highest == 131072.0);
}

/// Two SGDs under one scaler: an overflow in the second's gradient skips the second only,
/// and the scale backs off once (PyTorch's per-optimizer found_inf).
template <class D>
void check_scaler_with_two_optimizers() {
  auto a = et::from_vector(D{}, std::vector<float>{1.0f, 2.0f}, {2});
  auto b = et::from_vector(D{}, std::vector<float>{3.0f, 4.0f}, {2});
  a.requires_grad_(true), b.requires_grad_(true);
  et::optim::SGD first(et::optim::parameters(a), {.lr = 0.25}), second(et::optim::parameters(b), {.lr = 0.25});
  et::amp::GradScaler<D> scaler(D{});
  const auto loss = linear_loss(a, {1.0f, -2.0f}) + linear_loss(b, {std::numeric_limits<float>::infinity(), 1.0f});
  scaler.scale(et::Tensor<float, 0, D>(loss)).backward();
  scaler.unscale_(first);
  CHECK_THROWS_WITH(scaler.unscale_(first), Catch::Contains("et: GradScaler::unscale_() was already called"));
  scaler.step(first);
  scaler.step(second);
  CHECK_THROWS_WITH(scaler.step(second), Catch::Contains("et: GradScaler::step() was already called"));
  scaler.update();
  CHECK(a.detach().to_vector() == std::vector<float>{0.75f, 2.5f});
  CHECK(b.detach().to_vector() == std::vector<float>{3.0f, 4.0f});
  CHECK(scaler.get_scale() == 32768.0);
}

/// Adam under a scaler: an overflowing step is skipped on the host and not counted, so the
/// bias corrections of the later steps are those of PyTorch's (which never ran it).
template <class D>
void check_scaler_with_adam() {
  auto w = et::from_vector(D{}, std::vector<float>{0.5f, -0.5f}, {2});
  auto reference = et::from_vector(D{}, std::vector<float>{0.5f, -0.5f}, {2});
  w.requires_grad_(true), reference.requires_grad_(true);
  et::optim::Adam opt(et::optim::parameters(w), {.lr = 0.1}), plain(et::optim::parameters(reference), {.lr = 0.1});
  et::amp::GradScaler<D> scaler(D{});
  for (int step = 1; step <= 4; ++step) {
    const bool overflow = step == 2;
    const std::vector<float> c{overflow ? std::numeric_limits<float>::infinity() : 1.0f, -0.5f * float(step)};
    opt.zero_grad(true);
    scaler.scale(linear_loss(w, c)).backward();
    scaler.step(opt);
    scaler.update();
    if (!overflow) {
      plain.zero_grad(true);
      linear_loss(reference, c).backward();
      plain.step();
    }
  }
  const auto got = w.detach().to_vector(), want = reference.detach().to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6));
  CHECK(scaler.get_scale() == 32768.0);
}

/// A disabled scaler passes everything through; bad options and uses throw et::Error.
template <class D>
void check_scaler_errors() {
  auto w = et::from_vector(D{}, std::vector<float>{1.0f}, {1});
  w.requires_grad_(true);
  et::optim::SGD opt(et::optim::parameters(w), {.lr = 1.0});
  et::amp::GradScaler<D> off(D{}, {.enabled = false});
  const auto loss = linear_loss(w, {2.0f});
  CHECK(off.scale(loss).item() == 2.0f * 1.0f);
  off.scale(loss).backward();
  off.step(opt);
  off.update();
  CHECK(w.detach().to_vector() == std::vector<float>{-1.0f});
  CHECK(off.get_scale() == 1.0);
  CHECK_THROWS_WITH(et::amp::GradScaler<D>(D{}, {.backoff_factor = 1.5}), Catch::Contains("et: GradScaler needs"));
  et::amp::GradScaler<D> scaler(D{});
  CHECK_THROWS_WITH(scaler.update(-1.0), Catch::Contains("new_scale > 0"));
  scaler.update(1024.0);
  CHECK(scaler.get_scale() == 1024.0);
  CHECK(scaler.scale(loss).item() == 2048.0f);
  et::optim::SGD dampened(et::optim::parameters(w), {.lr = 1.0, .momentum = 0.9, .dampening = 0.1});
  CHECK_THROWS_WITH(scaler.step(dampened), Catch::Contains("dampening"));
  et::optim::SGD overlapped(et::optim::parameters(w), {.lr = 1.0});
  overlapped.overlap_with_backward();
  CHECK_THROWS_WITH(scaler.step(overlapped), Catch::Contains("overlap_with_backward"));
}

/// The documented lists, checked on the types: 16-bit activations stay 16-bit through the
/// lower-precision ops and the elementwise ones; losses of them are float.
template <class D, class L>
void check_autocast_types() {
  using X2 = et::Tensor<L, 2, D>;
  using X4 = et::Tensor<L, 4, D>;
  et::nn::Linear<float, D> fc(D{}, 6, 3, 1);
  et::nn::Conv2d<float, D> conv(D{}, 2, 4, 3, {.padding = {1, 1}}, 2);
  const X2 x = et::cast<L>(et::randn<float>(D{}, {5, 6}, 3));
  const X4 image = et::cast<L>(et::randn<float>(D{}, {2, 2, 5, 5}, 4));
  const auto labels = et::from_vector(D{}, std::vector<std::int64_t>{0, 2, 1, 1, 0}, {5});
  et::amp::Autocast<L> autocast;
  const auto y = fc(x);
  const auto z = conv(image);
  const auto pooled = et::max_pool2d(z, {.kernel = {2, 2}});
  const auto activated = et::eval(et::relu(y));
  static_assert(std::is_same_v<std::decay_t<decltype(y)>, X2>, "linear computes in the activations' type");
  static_assert(std::is_same_v<std::decay_t<decltype(z)>, X4>, "conv2d computes in the activations' type");
  static_assert(std::is_same_v<std::decay_t<decltype(pooled)>, X4>, "pooling keeps the type");
  static_assert(std::is_same_v<std::decay_t<decltype(activated)>, X2>, "elementwise code keeps the type");
  static_assert(std::is_same_v<decltype(et::eval(et::matmul(x, x.transpose(0, 1)))), X2>, "matmul too");
  const auto ce = et::nn::cross_entropy(y, labels);
  const auto mse = et::nn::mse_loss(y, y);
  static_assert(std::is_same_v<std::decay_t<decltype(ce)>, et::Tensor<float, 0, D>>, "losses are float");
  static_assert(std::is_same_v<std::decay_t<decltype(mse)>, et::Tensor<float, 0, D>>, "losses are float");
  // cross_entropy of 16-bit logits is that of their float values
  const auto want = et::nn::cross_entropy(et::Tensor<float, 2, D>(et::cast<float>(y)), labels).item();
  CHECK(ce.item() == Approx(want).epsilon(1e-6));
  CHECK(mse.item() == 0.0f);
}

/// Linear and Conv2d under the guard against double references of their rounded operands;
/// the cast cache; the permission.
template <class D, class L>
void check_autocast_values() {
  et::nn::Linear<float, D> fc(D{}, 37, 9, 5);
  const et::Tensor<L, 2, D> x = et::cast<L>(et::randn<float>(D{}, {13, 37}, 6));
  const auto as_double = [](const auto& t) {
    const auto values = et::Tensor<double, std::decay_t<decltype(t)>::rank, D>(et::cast<double>(t)).to_vector();
    return values;
  };
  et::Tensor<L, 2, D> y;
  const std::uint64_t before = et::amp::cast_copies();
  {
    et::amp::Autocast<L> autocast;
    y = fc(x);
    const auto again = fc(x);
    CHECK(et::amp::cast_copies() - before == 2);  // the weight and the bias, once
    CHECK(again.to_vector() == y.to_vector());
    {
      et::NoGradGuard no_grad;
      fc.weight += 0.0f;  // a new version: cast again
    }
    (void)fc(x);
    CHECK(et::amp::cast_copies() - before == 3);
  }
  {
    et::amp::Autocast<L> autocast;  // a new scope: a new cache
    (void)fc(x);
    CHECK(et::amp::cast_copies() - before == 5);
  }
  const auto xs = as_double(x), ws = as_double(et::Tensor<L, 2, D>(et::cast<L>(fc.weight.detach())));
  const auto bs = as_double(et::Tensor<L, 1, D>(et::cast<L>(fc.bias.detach())));
  const auto got = as_double(y);
  for (int i = 0; i < 13; ++i)
    for (int j = 0; j < 9; ++j) {
      double sum = 0, scale = 0;
      for (int k = 0; k < 37; ++k) {
        sum += xs[std::size_t(i * 37 + k)] * ws[std::size_t(j * 37 + k)];
        scale += std::abs(xs[std::size_t(i * 37 + k)] * ws[std::size_t(j * 37 + k)]);
      }
      // the product rounded to L, then the sum with the bias (unless one epilogue adds it)
      const double unit = std::is_same_v<L, et::bfloat16> ? 0x1p-8 : 0x1p-11, with_bias = sum + bs[std::size_t(j)];
      CHECK(std::abs(got[std::size_t(i * 9 + j)] - with_bias) <=
            unit * (std::abs(sum) + std::abs(with_bias)) + 1e-6 * scale);
    }

  et::nn::Conv2d<float, D> conv(D{}, 3, 5, 3, {.stride = {2, 2}, .padding = {1, 1}}, 7);
  const et::Tensor<L, 4, D> image = et::cast<L>(et::randn<float>(D{}, {2, 3, 7, 6}, 8));
  et::Tensor<L, 4, D> z;
  {
    et::amp::Autocast<L> autocast;
    z = conv(image);
  }
  const ConvGeometry geometry{.n = 2, .c = 3, .h = 7, .w = 6, .k = 5, .r = 3, .s = 3, .stride = {2, 2},
                              .padding = {1, 1}, .dilation = {1, 1}, .groups = 1, .bias = true};
  const auto cb = as_double(et::Tensor<L, 1, D>(et::cast<L>(conv.bias.detach())));
  const auto want = conv_forward(geometry, as_double(image),
                                 as_double(et::Tensor<L, 4, D>(et::cast<L>(conv.weight.detach()))), &cb);
  const auto zs = as_double(z);
  REQUIRE(zs.size() == want.size());
  const std::size_t plane = zs.size() / (2 * 5);  // [2, 5, P, Q]
  for (std::size_t i = 0; i < zs.size(); ++i) {
    // the convolution rounded to L, then the sum with the bias (cuDNN adds it apart)
    const double unit = std::is_same_v<L, et::bfloat16> ? 0x1p-8 : 0x1p-11;
    const double convolution = want[i] - cb[(i / plane) % 5];
    CHECK(std::abs(zs[i] - want[i]) <= unit * (std::abs(convolution) + std::abs(want[i])) + 1e-5);
  }

  CHECK_THROWS_WITH(fc(x), Catch::Contains("outside et::amp::Autocast"));
  {
    using Other = std::conditional_t<std::is_same_v<L, et::half>, et::bfloat16, et::half>;
    et::amp::Autocast<Other> other;
    CHECK_THROWS_WITH(fc(x), Catch::Contains("inside et::amp::Autocast"));
  }
  {
    et::amp::Autocast<L> on;
    et::amp::Autocast<L> off(false);
    CHECK_THROWS_WITH(fc(x), Catch::Contains("outside et::amp::Autocast"));
  }
}

/// Each list of `got` within `relative` of `want`'s in the 2-norm, and not equal to it (the
/// 16-bit computation did round).
inline void check_close_lists(const std::vector<std::vector<float>>& want, const std::vector<std::vector<float>>& got,
                              double relative) {
  REQUIRE(got.size() == want.size());
  for (std::size_t p = 0; p < want.size(); ++p) {
    CAPTURE(p);
    REQUIRE(got[p].size() == want[p].size());
    double norm = 0, error = 0;
    for (std::size_t i = 0; i < want[p].size(); ++i) {
      norm += double(want[p][i]) * want[p][i];
      error += (double(got[p][i]) - want[p][i]) * (double(got[p][i]) - want[p][i]);
    }
    CHECK(std::sqrt(error) <= relative * std::sqrt(norm));
    CHECK(std::sqrt(error) > 0.0);
  }
}

/// A two-layer network's gradients under autocast (16-bit activations, float weights)
/// against the float network's, within the 16-bit type's precision; the gradients are float.
template <class D, class L>
void check_autocast_gradients() {
  et::nn::Linear<float, D> fc1(D{}, 24, 32, 11), fc2(D{}, 32, 10, 12);
  const auto x = et::randn<float>(D{}, {16, 24}, 13);
  const auto labels = et::from_vector(D{}, std::vector<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16});
  const auto run = [&](auto input) {
    for (auto* p : {&fc1.weight, &fc2.weight}) p->zero_grad();
    fc1.bias.zero_grad(), fc2.bias.zero_grad();
    auto loss = et::nn::cross_entropy(fc2(et::eval(et::tanh(fc1(input)))), labels);
    loss.backward();
    return std::vector<std::vector<float>>{fc1.weight.grad().to_vector(), fc1.bias.grad().to_vector(),
                                           fc2.weight.grad().to_vector(), fc2.bias.grad().to_vector()};
  };
  const auto want = run(x);
  std::vector<std::vector<float>> got;
  {
    et::amp::Autocast<L> autocast;
    got = run(et::Tensor<L, 2, D>(et::cast<L>(x)));
  }
  static_assert(std::is_same_v<decltype(fc1.weight.grad()), et::Tensor<float, 2, D>>, "master gradients are float");
  const double unit = std::is_same_v<L, et::bfloat16> ? 0x1p-8 : 0x1p-11;
  check_close_lists(want, got, 16 * unit);  // a few roundings of 2^-8 / 2^-11 each
}

/// The LSTM under autocast (16-bit input and states, float weights): outputs and the
/// weights' float gradients against the float LSTM's, within the 16-bit type's precision
/// (on a GPU: cuDNN's LSTM in 16 bits; elsewhere the GEMMs and fused cells in 16 bits).
template <class D, class L>
void check_autocast_lstm() {
  et::nn::LSTM<float, D> lstm(D{}, 12, 16, {.num_layers = 2}, 21);
  const auto x = et::randn<float>(D{}, {5, 3, 12}, 22);
  const auto run = [&](const auto& input) {
    for (const auto& p : lstm.parameters()) p.clear_grad();
    auto [y, h, c] = lstm(input);
    const et::Tensor<float, 0, D> loss = et::sum(et::cast<float>(y) * et::cast<float>(y)) + et::sum(et::cast<float>(c));
    loss.backward();
    std::vector<std::vector<float>> out{et::Tensor<float, 3, D>(et::cast<float>(y)).to_vector()};
    for (const auto& p : lstm.parameters()) out.push_back(p.grad().to_vector());
    return out;
  };
  const auto want = run(x);
  std::vector<std::vector<float>> got;
  {
    et::amp::Autocast<L> autocast;
    got = run(et::Tensor<L, 3, D>(et::cast<L>(x)));
  }
  const double unit = std::is_same_v<L, et::bfloat16> ? 0x1p-8 : 0x1p-11;
  check_close_lists(want, got, 32 * unit);
}

}  // namespace test
