// Weight initialization (et/nn/init.hpp), shared by the CPU and GPU tests (test_modules):
// every value against the formula evaluated in double on the host from the generators'
// contract (element i from (seed, i) alone), PyTorch's gains and fans, and bad input.
#pragma once

#include "reference.hpp"

#include <et/nn.hpp>
#include <et/nn/init.hpp>

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// values[i] == generator(i) * scale + shift for every element i (row-major), within the
/// rounding of float arithmetic on a value of that size.
template <class Gen>
void check_filled(const std::vector<float>& values, std::uint64_t seed, double scale, double shift) {
  const Gen gen{seed};
  int wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double expected = double(gen(static_cast<std::int64_t>(i))) * scale + shift;
    if (!(std::abs(values[i] - expected) <= 1e-6 * (std::abs(expected) + std::abs(scale) + std::abs(shift)))) ++wrong;
  }
  CHECK(wrong == 0);
}

template <class D>
void check_init() {
  namespace init = et::nn::init;
  using Uniform = et::detail::UniformGenerator<float>;
  using Normal = et::detail::NormalGenerator<float>;
  // PyTorch's torch.nn.init.calculate_gain.
  CHECK(init::calculate_gain(init::Nonlinearity::linear) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::sigmoid) == 1.0);
  CHECK(init::calculate_gain(init::Nonlinearity::tanh) == Approx(5.0 / 3.0));
  CHECK(init::calculate_gain(init::Nonlinearity::relu) == Approx(std::sqrt(2.0)));
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu) == Approx(std::sqrt(2.0 / (1 + 0.01 * 0.01))));
  CHECK(init::calculate_gain(init::Nonlinearity::leaky_relu, 0.2) == Approx(std::sqrt(2.0 / 1.04)));
  CHECK(init::calculate_gain(init::Nonlinearity::selu) == 0.75);
  CHECK_THROWS_WITH(init::calculate_gain(static_cast<init::Nonlinearity>(99)), Catch::Contains("unknown nonlinearity 99"));

  SECTION("xavier_uniform_ and xavier_normal_ of a Linear weight [out, in]") {
    et::nn::Linear<float, D> fc(D{}, 300, 100, 1);
    REQUIRE(&init::xavier_uniform_(fc.weight, 7) == &fc.weight);
    const double a = std::sqrt(6.0 / (300 + 100));
    check_filled<Uniform>(fc.weight.to_vector(), 7, 2 * a, -a);
    init::xavier_uniform_(fc.weight, 7, 2.5);  // gain
    check_filled<Uniform>(fc.weight.to_vector(), 7, 5 * a, -2.5 * a);
    init::xavier_normal_(fc.weight, 8);
    check_filled<Normal>(fc.weight.to_vector(), 8, std::sqrt(2.0 / 400), 0);
    // Not recorded: the weight stays a leaf that requires grad, and trains as before.
    CHECK(fc.weight.requires_grad());
    CHECK(fc.weight.is_leaf());
  }
  SECTION("kaiming_normal_ and kaiming_uniform_ of a conv weight [out, in, kh, kw]") {
    auto w = et::zeros<float>(D{}, {16, 3, 5, 3});
    const double fan_in = 3 * 5 * 3, fan_out = 16 * 5 * 3;
    init::kaiming_normal_(w, 3);  // leaky_relu with a = 0: gain sqrt(2)
    check_filled<Normal>(w.to_vector(), 3, std::sqrt(2.0) / std::sqrt(fan_in), 0);
    init::kaiming_normal_(w, 3, {.mode = init::FanMode::fan_out, .nonlinearity = init::Nonlinearity::relu});
    check_filled<Normal>(w.to_vector(), 3, std::sqrt(2.0) / std::sqrt(fan_out), 0);
    init::kaiming_uniform_(w, 4, {.a = std::sqrt(5.0)});  // what PyTorch's Conv2d uses
    const double bound = std::sqrt(3.0) * std::sqrt(2.0 / 6.0) / std::sqrt(fan_in);
    check_filled<Uniform>(w.to_vector(), 4, 2 * bound, -bound);
    const auto values = w.to_vector();
    for (const float v : values) REQUIRE(std::abs(double(v)) <= bound);
  }
  SECTION("a non-contiguous tensor is filled in its logical order, its storage's other elements untouched") {
    auto base = et::full<float>(D{}, {8, 6}, 9.0f);
    init::xavier_uniform_(base.transpose(0, 1), 11);  // [6, 8]: fan_in 8, fan_out 6
    const double a = std::sqrt(6.0 / (6 + 8));
    check_filled<Uniform>(base.transpose(0, 1).to_vector(), 11, 2 * a, -a);
    auto other = et::full<float>(D{}, {8, 6}, 9.0f);
    init::kaiming_normal_(other.slice(0, 0, 8, 2), 2);  // rows 0, 2, 4, 6: [4, 6], fan_in 6
    check_filled<Normal>(other.slice(0, 0, 8, 2).to_vector(), 2, std::sqrt(2.0 / 6.0), 0);
    const auto odd_rows = other.slice(0, 1, 8, 2).to_vector();
    for (const float v : odd_rows) REQUIRE(v == 9.0f);
  }
  SECTION("bad input: no fans, undefined; no elements: left as it is") {
    auto vector = et::zeros<float>(D{}, {5});
    CHECK_THROWS_AS(init::xavier_uniform_(vector, 1), et::ShapeError);
    CHECK_THROWS_WITH(init::kaiming_normal_(vector, 1),
                      Catch::Contains("kaiming_normal_") && Catch::Contains("rank 2 or more") && Catch::Contains("[5]"));
    CHECK_THROWS_AS(init::xavier_normal_(et::Tensor<float, 2, D>{}, 1), et::Error);
    auto empty = et::zeros<float>(D{}, {0, 4});
    CHECK_NOTHROW(init::kaiming_normal_(empty, 1));
    CHECK_NOTHROW(init::xavier_uniform_(empty, 1));
  }
  SECTION("constant_, zeros_, ones_: every element, through a view too, unrecorded") {
    auto w = et::randn<float>(D{}, {3, 5}, 4);
    w.requires_grad_(true);
    CHECK(init::constant_(w, 0.25).to_vector() == std::vector<float>(15, 0.25f));
    CHECK(init::zeros_(w).to_vector() == std::vector<float>(15, 0.0f));
    CHECK(w.is_leaf());
    init::ones_(w.slice(1, 0, 5, 2));
    const auto values = w.to_vector();
    for (int k = 0; k < 15; ++k) CHECK(values[k] == (k % 5 % 2 == 0 ? 1.0f : 0.0f));
    CHECK_THROWS_AS(init::zeros_(et::Tensor<float, 2, D>{}), et::Error);
  }
}

}  // namespace test
