// The LSTM (et/nn/lstm.hpp), shared by the CPU and GPU tests (test_modules.cpp / .cu):
// against a double-precision reference written here from PyTorch's equations (gates i, f,
// g, o), gradients against central differences, PyTorch's parameter names, order, shapes
// and initialization, the state carried between calls, and bad input.
#pragma once

#include "gradcheck.hpp"

#include <et/nn.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace test {

/// The LSTM's outputs computed in double on the host: y [S, B, H] then h_n and c_n
/// [L, B, H], from host copies of the parameters (layer by layer: w_ih [4H, in], w_hh [4H, H],
/// b_ih and b_hh [4H], or no biases) and of x, h0 and c0.
struct LstmReference {
  std::vector<double> y, h, c;
};
inline double sigmoid_of(double v) { return 1.0 / (1.0 + std::exp(-v)); }
inline LstmReference lstm_reference(const std::vector<double>& x, std::int64_t S, std::int64_t B, std::int64_t in,
                                    std::int64_t H, const std::vector<std::vector<double>>& params, bool bias,
                                    const std::vector<double>& h0, const std::vector<double>& c0) {
  const std::size_t per_layer = bias ? 4 : 2;
  const auto L = static_cast<std::int64_t>(params.size() / per_layer);
  LstmReference out;
  std::vector<double> input = x;
  std::int64_t width = in;
  for (std::int64_t l = 0; l < L; ++l) {
    const auto& w_ih = params[l * per_layer];
    const auto& w_hh = params[l * per_layer + 1];
    std::vector<double> h(h0.begin() + l * B * H, h0.begin() + (l + 1) * B * H);
    std::vector<double> c(c0.begin() + l * B * H, c0.begin() + (l + 1) * B * H);
    std::vector<double> y(static_cast<std::size_t>(S * B * H));
    for (std::int64_t t = 0; t < S; ++t) {
      std::vector<double> next_h(h.size()), next_c(c.size());
      for (std::int64_t b = 0; b < B; ++b) {
        for (std::int64_t j = 0; j < H; ++j) {
          double gate[4];
          for (int k = 0; k < 4; ++k) {
            const std::int64_t row = k * H + j;
            double v = bias ? params[l * per_layer + 2][row] + params[l * per_layer + 3][row] : 0.0;
            for (std::int64_t i = 0; i < width; ++i) v += w_ih[row * width + i] * input[(t * B + b) * width + i];
            for (std::int64_t i = 0; i < H; ++i) v += w_hh[row * H + i] * h[b * H + i];
            gate[k] = v;
          }
          const double cell = sigmoid_of(gate[1]) * c[b * H + j] + sigmoid_of(gate[0]) * std::tanh(gate[2]);
          next_c[b * H + j] = cell;
          next_h[b * H + j] = sigmoid_of(gate[3]) * std::tanh(cell);
        }
      }
      h = next_h;
      c = next_c;
      std::copy(h.begin(), h.end(), y.begin() + t * B * H);
    }
    out.h.insert(out.h.end(), h.begin(), h.end());
    out.c.insert(out.c.end(), c.begin(), c.end());
    input = y;
    width = H;
    if (l == L - 1) out.y = y;
  }
  return out;
}

template <class T, class D>
std::vector<std::vector<double>> lstm_parameter_values(const et::nn::LSTM<T, D>& lstm) {
  std::vector<std::vector<double>> values;
  for (const auto& p : lstm.parameters()) {
    const auto v = p.data().to_vector();
    values.emplace_back(v.begin(), v.end());
  }
  return values;
}

template <class D>
void check_lstm_against_reference() {
  // seq, batch, input, hidden, layers: single elements, odd sizes, a batch of none.
  for (const auto [S, B, in, H, L] : {std::array<std::int64_t, 5>{1, 1, 1, 1, 1}, {5, 3, 4, 6, 2}, {7, 2, 3, 5, 3},
                                      {4, 0, 3, 2, 2}, {3, 9, 17, 33, 1}}) {
    CAPTURE(S, B, in, H, L);
    for (const bool bias : {true, false}) {
      CAPTURE(bias);
      et::nn::LSTM<float, D> lstm(D{}, in, H, {.num_layers = L, .bias = bias}, 3);
      const auto params = lstm_parameter_values(lstm);
      REQUIRE(params.size() == static_cast<std::size_t>(L * (bias ? 4 : 2)));
      const auto xv = values_of(S * B * in, 11), hv = values_of(L * B * H, 12), cv = values_of(L * B * H, 13);
      const auto x = et::from_vector(D{}, std::vector<float>(xv.begin(), xv.end()), {S, B, in});
      const auto h0 = et::from_vector(D{}, std::vector<float>(hv.begin(), hv.end()), {L, B, H});
      const auto c0 = et::from_vector(D{}, std::vector<float>(cv.begin(), cv.end()), {L, B, H});
      // Given states, and zeros when none are given.
      const auto [y, h, c] = lstm(x, h0, c0);
      const auto expected = lstm_reference(xv, S, B, in, H, params, bias, hv, cv);
      CHECK(y.shape() == et::Shape<3>{S, B, H});
      CHECK(h.shape() == et::Shape<3>{L, B, H});
      CHECK(c.shape() == et::Shape<3>{L, B, H});
      check_all_close(y.to_vector(), expected.y, 2e-5);
      check_all_close(h.to_vector(), expected.h, 2e-5);
      check_all_close(c.to_vector(), expected.c, 2e-5);
      const std::vector<double> zero(static_cast<std::size_t>(L * B * H), 0.0);
      const auto [y0, h0_out, c0_out] = lstm(x);
      const auto from_zero = lstm_reference(xv, S, B, in, H, params, bias, zero, zero);
      check_all_close(y0.to_vector(), from_zero.y, 2e-5);
      check_all_close(c0_out.to_vector(), from_zero.c, 2e-5);
      // The states given are read, never written.
      CHECK(h0.to_vector() == std::vector<float>(hv.begin(), hv.end()));
      CHECK(c0.to_vector() == std::vector<float>(cv.begin(), cv.end()));
    }
  }
}

template <class D>
void check_lstm_module() {
  et::nn::LSTM<float, D> lstm(D{}, 3, 4, {.num_layers = 2}, 5);
  // PyTorch's names, order and shapes; every tensor uniform in +-1/sqrt(hidden).
  std::vector<std::string> names;
  std::vector<std::vector<std::int64_t>> shapes;
  et::nn::for_each_tensor(lstm, [&](const std::string& name, const auto& t) {
    names.push_back(name);
    shapes.emplace_back(t.shape().begin(), t.shape().end());
  });
  CHECK(names == std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1",
                                          "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"});
  CHECK(shapes == std::vector<std::vector<std::int64_t>>{{16, 3}, {16, 4}, {16}, {16}, {16, 4}, {16, 4}, {16}, {16}});
  CHECK(lstm.parameters().size() == 8);
  CHECK(lstm.num_layers() == 2);
  CHECK(lstm.hidden_size() == 4);
  const auto params = lstm_parameter_values(lstm);
  for (std::size_t k = 0; k < params.size(); ++k)
    for (const double v : params[k]) CHECK(std::abs(v) <= 0.5);
  CHECK(params[0] != params[4]);  // no two tensors alike
  CHECK(params[2] != params[3]);
  CHECK(params == lstm_parameter_values(et::nn::LSTM<float, et::Cpu>(et::cpu, 3, 4, {.num_layers = 2}, 5)));
  // A copy on the CPU: the same names and values.
  auto copy = lstm.to(et::cpu);
  CHECK(lstm_parameter_values(copy) == params);
  CHECK(copy.parameters().size() == 8);
  // Carrying the state: two calls give what one call over both halves gives.
  const auto xv = values_of(6 * 2 * 3, 21);
  const auto x = et::from_vector(D{}, std::vector<float>(xv.begin(), xv.end()), {6, 2, 3});
  const auto [y, h, c] = lstm(x);
  const auto [y1, h1, c1] = lstm(x.slice(0, 0, 2));
  const auto [y2, h2, c2] = lstm(x.slice(0, 2, 6), h1, c1);
  const auto whole = y.to_vector(), first = y1.to_vector(), second = y2.to_vector();
  std::vector<float> joined = first;
  joined.insert(joined.end(), second.begin(), second.end());
  std::vector<double> expected(whole.begin(), whole.end());
  check_all_close(joined, expected, 1e-6);
  const auto hv = h.to_vector();
  check_all_close(h2.to_vector(), std::vector<double>(hv.begin(), hv.end()), 1e-6);
  // One training step reaches every parameter.
  const auto [out, hn, cn] = lstm(x);
  et::sum(out * out).backward();
  for (const auto& p : lstm.parameters()) {
    REQUIRE(p.grad().defined());
    const auto g = p.grad().to_vector();
    CHECK(std::any_of(g.begin(), g.end(), [](float v) { return v != 0.0f; }));
  }
  // Bad sizes and shapes.
  CHECK_THROWS_AS((et::nn::LSTM<float, D>(D{}, 0, 4)), et::ShapeError);
  CHECK_THROWS_AS((et::nn::LSTM<float, D>(D{}, 3, 0)), et::ShapeError);
  CHECK_THROWS_AS((et::nn::LSTM<float, D>(D{}, 3, 4, {.num_layers = 0})), et::ShapeError);
  CHECK_THROWS_AS(lstm(et::zeros<float>(D{}, {2, 2, 4})), et::ShapeError);  // input 4, not 3
  CHECK_THROWS_AS(lstm(et::zeros<float>(D{}, {0, 2, 3})), et::ShapeError);  // no steps
  const auto state = et::zeros<float>(D{}, {2, 2, 4});
  CHECK_THROWS_AS(lstm(x, et::zeros<float>(D{}, {1, 2, 4}), state), et::ShapeError);  // one layer's state
  CHECK_THROWS_AS(lstm(x, state, et::zeros<float>(D{}, {2, 3, 4})), et::ShapeError);  // another batch
  CHECK_THROWS_AS((et::nn::LSTM<float, D>{}(x)), et::Error);
}

template <class D>
void check_lstm_gradients() {
  // One layer, then two: every parameter, the input and both initial states against central
  // differences, through the outputs y and through the last cell state.
  const std::int64_t S = 3, B = 2, in = 3, H = 2;
  auto layer_inputs = [&](std::int64_t width, std::uint64_t seed) {
    return std::array{grad_input<2>({4 * H, width}, seed, -0.8, 0.8), grad_input<2>({4 * H, H}, seed + 1, -0.8, 0.8)};
  };
  auto layer_of = [](const auto& w_ih, const auto& w_hh, const auto& b_ih, const auto& b_hh) {
    et::nn::LSTMLayer<double, D> layer;
    layer.weight_ih = w_ih;
    layer.weight_hh = w_hh;
    layer.bias_ih = b_ih;
    layer.bias_hh = b_hh;
    return layer;
  };
  const auto [w0, u0] = layer_inputs(in, 31);
  const auto [w1, u1] = layer_inputs(H, 41);
  const auto b0 = grad_input<1>({4 * H}, 33), c0b = grad_input<1>({4 * H}, 34);
  const auto b1 = grad_input<1>({4 * H}, 43), c1b = grad_input<1>({4 * H}, 44);
  const auto x = grad_input<3>({S, B, in}, 51), h0 = grad_input<3>({2, B, H}, 52), c0 = grad_input<3>({2, B, H}, 53);
  const auto h0_one = grad_input<3>({1, B, H}, 54), c0_one = grad_input<3>({1, B, H}, 55);
  gradcheck<D>(
      "LSTM, one layer, y",
      [&](const auto& xs, const auto& w, const auto& u, const auto& bi, const auto& bh, const auto& h, const auto& c) {
        return std::get<0>(et::nn::lstm(xs, h, c, {layer_of(w, u, bi, bh)}));
      },
      x, w0, u0, b0, c0b, h0_one, c0_one);
  gradcheck<D>(
      "LSTM, two layers, c_n",
      [&](const auto& xs, const auto& w, const auto& u, const auto& bi, const auto& bh, const auto& w2, const auto& u2,
          const auto& bi2, const auto& bh2, const auto& h, const auto& c) {
        return std::get<2>(et::nn::lstm(xs, h, c, {layer_of(w, u, bi, bh), layer_of(w2, u2, bi2, bh2)}));
      },
      x, w0, u0, b0, c0b, w1, u1, b1, c1b, h0, c0);
  const et::Tensor<double, 1, D> none;
  gradcheck<D>(
      "LSTM, two layers without biases, y",
      [&](const auto& xs, const auto& w, const auto& u, const auto& w2, const auto& u2, const auto& h, const auto& c) {
        return std::get<0>(et::nn::lstm(xs, h, c, {layer_of(w, u, none, none), layer_of(w2, u2, none, none)}));
      },
      x, w0, u0, w1, u1, h0, c0);
}

}  // namespace test
