// Autocast (et::amp::Autocast), shared by the CPU and GPU tests (test_amp.cpp / .cu):
//  - the types of each op against the documented lists (amp/autocast.hpp), the values of
//    Linear and Conv2d in 16 bits against double references of the rounded operands, the
//    cast cache (once per scope and version), the run-time permission;
//  - float inputs of the float modules under the guard, cast as PyTorch's autocast casts them;
//  - the cast cache across weights that reuse a freed block (the third probe's two sequences);
//  - the gradients of a small network and of the LSTM under autocast against float training.
#pragma once

#include "conv_reference.hpp"
#include "random_values.hpp"

#include <et/et.hpp>
#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace test {

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

/// Float inputs of the float modules under the guard (as PyTorch's autocast casts the inputs
/// of linear, conv and LSTM): the result is float, holds exactly the 16-bit path's values, and
/// its gradients reach the float input and weights; outside a guard (or under a disabled one)
/// the float path is untouched.
template <class D, class L>
void check_autocast_float_inputs() {
  using X2 = et::Tensor<float, 2, D>;
  et::nn::Linear<float, D> fc(D{}, 37, 9, 31);
  et::nn::Conv2d<float, D> conv(D{}, 3, 5, 3, {.padding = {1, 1}}, 32);
  et::nn::LSTM<float, D> lstm(D{}, 6, 4, {}, 33);
  X2 x = et::randn<float>(D{}, {13, 37}, 34);
  x.requires_grad_(true);
  const auto image = et::randn<float>(D{}, {2, 3, 5, 6}, 35);
  const auto sequence = et::randn<float>(D{}, {3, 2, 6}, 36);
  const X2 exact = fc(x);
  {
    et::amp::Autocast<L> autocast;
    const X2 y = fc(x);  // a float result
    const auto low = fc(et::Tensor<L, 2, D>(et::cast<L>(x.detach())));
    CHECK(y.to_vector() == X2(et::cast<float>(low)).to_vector());
    CHECK(et::max(et::abs(y - exact)).item() > 0.0f);  // it did compute in L
    et::sum(y * y).backward();
    const et::Tensor<float, 4, D> z = conv(image);
    CHECK(z.to_vector() == et::Tensor<float, 4, D>(et::cast<float>(conv(et::Tensor<L, 4, D>(et::cast<L>(image))))).to_vector());
    const auto [out, h, c] = lstm(sequence);
    const auto [out_low, h_low, c_low] = lstm(et::Tensor<L, 3, D>(et::cast<L>(sequence)));
    CHECK(out.to_vector() == et::Tensor<float, 3, D>(et::cast<float>(out_low)).to_vector());
    CHECK(c.to_vector() == et::Tensor<float, 3, D>(et::cast<float>(c_low)).to_vector());
    // et::matmul of float operands: inputs rounded to L (a math mode; CUDA products use it)
    CHECK(et::math_mode() == (std::is_same_v<L, et::bfloat16> ? et::MathMode::bf16 : et::MathMode::f16));
    {
      et::amp::Autocast<L> off(false);
      CHECK(fc(x).to_vector() == exact.to_vector());
      CHECK(et::math_mode() == et::MathMode::exact);
    }
  }
  CHECK(et::math_mode() == et::MathMode::exact);
  REQUIRE(x.grad().defined());
  REQUIRE(fc.weight.grad().defined());
  const double unit = std::is_same_v<L, et::bfloat16> ? 0x1p-8 : 0x1p-11;
  // d(sum y^2)/dx = 2 y W: against the float computation's, within a few roundings of L
  const auto want = X2(et::matmul(exact.detach() * 2.0f, fc.weight.detach())).to_vector();
  check_close_lists({want}, {x.grad().to_vector()}, 16 * unit);
  CHECK(fc(x).to_vector() == exact.to_vector());  // the guard closed: float again
}

/// The cast cache across weights that reuse a freed block (the third bad-input probe): in one
/// scope, models created, called and dropped in turn each compute with their own weights; a
/// weight replaced by a new tensor after the old one is released is cast anew.
template <class D, class L>
void check_autocast_cache_reuse() {
  et::NoGradGuard no_grad;
  const et::Tensor<L, 2, D> x = et::cast<L>(et::randn<float>(D{}, {4, 256}, 41));
  std::vector<std::vector<float>> want;
  for (std::uint64_t seed = 0; seed < 3; ++seed) {
    et::nn::Linear<float, D> model(D{}, 256, 256, seed);
    et::amp::Autocast<L> own_scope;
    want.push_back(et::Tensor<float, 2, D>(et::cast<float>(model(x))).to_vector());
  }
  {
    et::amp::Autocast<L> autocast;
    for (std::uint64_t seed = 0; seed < 3; ++seed) {
      CAPTURE(seed);
      et::nn::Linear<float, D> model(D{}, 256, 256, seed);
      CHECK(et::Tensor<float, 2, D>(et::cast<float>(model(x))).to_vector() == want[seed]);
    }
  }
  et::amp::Autocast<L> autocast;
  et::nn::Linear<float, D> layer(D{}, 4, 4, 1, false);
  const et::Tensor<L, 2, D> ones = et::cast<L>(et::ones<float>(D{}, {1, 4}));
  layer.weight = et::full<float>(D{}, {4, 4}, 1.0f);
  CHECK(et::Tensor<float, 2, D>(et::cast<float>(layer(ones))).to_vector() == std::vector<float>(4, 4.0f));
  layer.weight = et::full<float>(D{}, {4, 4}, 3.0f);  // the old weight is released here
  CHECK(et::Tensor<float, 2, D>(et::cast<float>(layer(ones))).to_vector() == std::vector<float>(4, 12.0f));
}

}  // namespace test
