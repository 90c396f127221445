// Losses (et::nn::mse_loss, et::nn::cross_entropy), shared by the CPU and GPU tests
// (test_nn.cpp / .cu): values against double-precision host formulas, gradients against
// central differences (gradcheck.hpp), and the errors.
#pragma once

#include "gradcheck.hpp"

#include <et/et.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace test {

/// mean over rows of logsumexp(row) - row[label], in long double on the host.
inline double cross_entropy_reference(const std::vector<double>& logits, const std::vector<std::int64_t>& labels,
                                      std::int64_t classes) {
  long double total = 0;
  const auto rows = static_cast<std::int64_t>(labels.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = logits.data() + r * classes;
    const double m = *std::max_element(row, row + classes);
    long double s = 0;
    for (std::int64_t c = 0; c < classes; ++c) s += std::exp(static_cast<long double>(row[c]) - m);
    total += m + std::log(s) - row[labels[static_cast<std::size_t>(r)]];
  }
  return static_cast<double>(total / rows);
}

template <class D>
void check_losses() {
  // cross_entropy: values, including logits far beyond exp's range (stability), and odd shapes.
  for (const auto& [rows, classes, scale] : {std::tuple{1, 1, 1.0}, std::tuple{5, 7, 3.0}, std::tuple{3, 2, 1000.0},
                                            std::tuple{64, 129, 10.0}}) {
    auto logits = grad_input(std::array<std::int64_t, 2>{rows, classes}, 100 + std::uint64_t(rows), -scale, scale);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) labels[static_cast<std::size_t>(r)] = (r * 5 + 3) % classes;
    const auto x = et::from_vector(D{}, logits.values, logits.shape);
    const auto y = et::from_vector(D{}, labels, {rows});
    const double got = et::nn::cross_entropy(x, y).item();
    const double want = cross_entropy_reference(logits.values, labels, classes);
    CAPTURE(rows, classes, scale);
    CHECK(got == Approx(want).epsilon(1e-12).margin(1e-12));
    const auto xf = et::cast<float>(x);
    CHECK(double(et::nn::cross_entropy(et::Tensor<float, 2, D>(xf), y).item()) == Approx(want).epsilon(1e-5));
    // Views read through their strides: the logits transposed in memory (column stride
    // `rows`), every label one apart from the next (a column of a [rows, 2] tensor).
    std::vector<double> columns(logits.values.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < classes; ++c)
        columns[static_cast<std::size_t>(c * rows + r)] = logits.values[static_cast<std::size_t>(r * classes + c)];
    std::vector<std::int64_t> pairs(2 * labels.size(), -7);
    for (std::size_t r = 0; r < labels.size(); ++r) pairs[2 * r + 1] = labels[r];
    const auto x_view = et::from_vector(D{}, columns, {classes, rows}).transpose(0, 1);
    const auto y_view = et::from_vector(D{}, pairs, {rows, 2}).select(1, 1);
    CHECK((rows == 1 || classes == 1 || !x_view.is_contiguous()));
    CHECK(et::nn::cross_entropy(x_view, y_view).item() == Approx(want).epsilon(1e-12).margin(1e-12));
  }
  // Gradients (one node, one fused kernel): against central differences.
  const std::vector<std::int64_t> labels{2, 0, 4, 4};
  const auto y = et::from_vector(D{}, labels, {4});
  gradcheck<D>("cross_entropy", [&](const auto& x) { return et::nn::cross_entropy(x, y); },
               grad_input(std::array<std::int64_t, 2>{4, 5}, 81));
  gradcheck<D>("cross_entropy of a transposed view",
               [&](const auto& x) { return et::nn::cross_entropy(et::Tensor<double, 2, D>(x.transpose(0, 1) * 2.0), y); },
               grad_input(std::array<std::int64_t, 2>{5, 4}, 82));
  gradcheck<D>("mse_loss", [](const auto& a, const auto& b) { return et::nn::mse_loss(a, b); },
               grad_input(std::array<std::int64_t, 3>{2, 3, 1}, 83), grad_input(std::array<std::int64_t, 3>{2, 3, 1}, 84));
  // mse_loss's value.
  const auto a = et::from_vector(D{}, std::vector<double>{1, 2, 3, 4}, {2, 2});
  const auto b = et::from_vector(D{}, std::vector<double>{0, 2, 5, 1}, {2, 2});
  CHECK(et::nn::mse_loss(a, b).item() == Approx((1.0 + 0 + 4 + 9) / 4));
  // Errors.
  const auto logits = et::zeros<double>(D{}, {4, 5});
  CHECK_THROWS_AS(et::nn::cross_entropy(logits, et::from_vector(D{}, std::vector<std::int64_t>{0, 1, 2}, {3})),
                  et::ShapeError);
  CHECK_THROWS_AS(et::nn::cross_entropy(et::zeros<double>(D{}, {0, 5}), et::zeros<std::int64_t>(D{}, {0})),
                  et::ShapeError);
  CHECK_THROWS_AS(et::nn::mse_loss(a, et::zeros<double>(D{}, {2, 3})), et::ShapeError);
  const auto out_of_range = et::from_vector(D{}, std::vector<std::int64_t>{0, 5, 1, -1}, {4});
  if constexpr (D::is_cuda) {
    CHECK(std::isnan(et::nn::cross_entropy(logits, out_of_range).item()));  // no wait for the GPU to check
  } else {
    CHECK_THROWS_WITH(et::nn::cross_entropy(logits, out_of_range), Catch::Contains("outside [0, 5)"));
  }
}

}  // namespace test
