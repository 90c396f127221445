// gradcheck, like torch.autograd.gradcheck: the gradients autograd computes for a function
// of double-precision tensors against central differences of the same function, element
// by element. The function's output is weighted by fixed random weights before it is
// summed (L = sum(f(x...) * w)), so every element of the upstream gradient differs and a
// transposed or misplaced gradient cannot pass. Inputs are given as host values and
// shapes; they are made on device D for each evaluation, so the differences never go
// through autograd.
#pragma once

#include "reference.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace test {

/// One input of a gradient check: its shape and host values (row-major).
template <std::size_t R>
struct GradInput {
  std::array<std::int64_t, R> shape;
  std::vector<double> values;
  bool requires_grad = true;
};

/// An input of random values in [lo, hi): the cases choose ranges away from the points
/// where a function has no derivative (0 for abs and relu, ties for max).
template <std::size_t R>
GradInput<R> grad_input(const std::array<std::int64_t, R>& shape, std::uint64_t seed, double lo = -2.0,
                        double hi = 2.0) {
  std::size_t n = 1;
  for (const auto extent : shape) n *= static_cast<std::size_t>(extent);
  return {shape, random_values<double>(n, seed, lo, hi), true};
}

template <class D, std::size_t R>
et::Tensor<double, int(R), D> make_input(const GradInput<R>& input, bool requires_grad) {
  auto t = et::from_vector(D{}, input.values, input.shape);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

/// L = sum(out * weights) for the output of f; the weights are made on first use.
template <class D, class Out>
auto weighted_loss(const Out& out, std::vector<double>& weights) {
  if (weights.empty()) weights = random_values<double>(static_cast<std::size_t>(out.numel()), 977, 0.5, 1.5);
  const auto w = et::from_vector(D{}, weights, out.shape());
  return et::sum(out * w);
}

/// Checks the gradients of f at `inputs` on device D: every input that requires grad,
/// every element, against central differences (step h), to `tolerance` relative to
/// max(1, |numeric|). `what` names the case in failures.
template <class D, class F, std::size_t... Rs>
void gradcheck(const std::string& what, F f, const GradInput<Rs>&... inputs) {
  constexpr double h = 1e-6, tolerance = 1e-6;
  std::vector<double> weights;
  // The analytic gradients.
  auto leaves = std::make_tuple(make_input<D>(inputs, inputs.requires_grad)...);
  auto loss = std::apply([&](const auto&... x) { return weighted_loss<D>(f(x...), weights); }, leaves);
  REQUIRE(loss.requires_grad());
  loss.backward();
  // The differences, one input element at a time.
  auto originals = std::make_tuple(inputs...);
  auto evaluate = [&](const auto& perturbed) {
    et::NoGradGuard no_grad;
    auto xs = std::apply([](const auto&... in) { return std::make_tuple(make_input<D>(in, false)...); }, perturbed);
    return std::apply([&](const auto&... x) { return weighted_loss<D>(f(x...), weights); }, xs).item();
  };
  auto check_input = [&]<std::size_t K>(std::integral_constant<std::size_t, K>) {
    const auto& input = std::get<K>(originals);
    if (!input.requires_grad) return;
    const auto grad = std::get<K>(leaves).grad();
    std::vector<double> analytic(input.values.size(), 0.0);
    if (grad.defined()) analytic = grad.to_vector();
    REQUIRE(analytic.size() == input.values.size());
    for (std::size_t j = 0; j < input.values.size(); ++j) {
      auto plus = originals, minus = originals;
      std::get<K>(plus).values[j] += h;
      std::get<K>(minus).values[j] -= h;
      const double numeric = (evaluate(plus) - evaluate(minus)) / (2 * h);
      const bool ok = std::abs(analytic[j] - numeric) <= tolerance * std::max(1.0, std::abs(numeric));
      if (!ok) {
        std::ostringstream out;
        out << what << ": input " << K << ", element " << j << ": autograd " << analytic[j] << ", differences "
            << numeric;
        FAIL_CHECK(out.str());
      }
    }
  };
  [&]<std::size_t... Ks>(std::index_sequence<Ks...>) {
    (check_input(std::integral_constant<std::size_t, Ks>{}), ...);
  }(std::make_index_sequence<sizeof...(Rs)>{});
}

}  // namespace test
