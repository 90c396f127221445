// Reductions on the CPU against double-precision loops: every reduction, over all
// elements and over each axis, on random data with edge shapes, non-contiguous and
// broadcast operands, and the empty/NaN rules.
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <cmath>
#include <limits>
#include <numeric>

using Catch::Matchers::Contains;
using test::random_values;

namespace {

/// Reference reduction of a row-major [outer, length, inner] array along its middle axis.
template <class F>
std::vector<double> reduce_reference(const std::vector<double>& v, std::int64_t outer, std::int64_t length,
                                     std::int64_t inner, double init, F f) {
  std::vector<double> out(static_cast<std::size_t>(outer * inner), init);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < length; ++j)
      for (std::int64_t k = 0; k < inner; ++k) {
        double& slot = out[static_cast<std::size_t>(o * inner + k)];
        slot = f(slot, v[static_cast<std::size_t>((o * length + j) * inner + k)]);
      }
  return out;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("full reductions against double precision", "[reductions]") {
  const std::int64_t n = GENERATE(1, 2, 3, 17, 1000, 100003);
  CAPTURE(n);
  const auto values = random_values<float>(static_cast<std::size_t>(n), 40 + static_cast<std::uint64_t>(n), -2, 2);
  const auto x = et::from_vector(et::cpu, values, {n});
  double sum = 0, sum_sq = 0, max = -INFINITY, min = INFINITY;
  for (float v : values) {
    sum += v;
    sum_sq += double(v) * v;
    max = std::max(max, double(v));
    min = std::min(min, double(v));
  }
  CHECK(et::sum(x).item() == Approx(sum).margin(1e-5 * std::sqrt(double(n))));
  CHECK(et::mean(x).item() == Approx(sum / double(n)).margin(1e-6));
  CHECK(et::max(x).item() == static_cast<float>(max));
  CHECK(et::min(x).item() == static_cast<float>(min));
  CHECK(et::norm(x).item() == Approx(std::sqrt(sum_sq)).epsilon(1e-6));
  static_assert(std::is_same_v<decltype(et::sum(x)), et::Tensor<float, 0, et::Cpu>>);
  // A fused operand: sum((x - y)^2) reads x and y once and builds no temporary.
  const auto y = et::from_vector(et::cpu, random_values<float>(static_cast<std::size_t>(n), 7), {n});
  const auto yv = y.to_vector();
  double sq = 0;
  for (std::size_t i = 0; i < values.size(); ++i) sq += (double(values[i]) - yv[i]) * (double(values[i]) - yv[i]);
  CHECK(et::sum((x - y) * (x - y)).item() == Approx(sq).epsilon(1e-5));
}

TEST_CASE("pairwise summation keeps float sums accurate", "[reductions]") {
  // 2^24 + 1 ones: a naive float accumulator stalls at 2^24; pairwise does not.
  const std::int64_t n = (std::int64_t{1} << 24) + 1;
  CHECK(et::sum(et::ones<float>(et::cpu, {n})).item() == static_cast<float>(n));
  const auto x = et::full<float>(et::cpu, {1 << 22}, 0.1f);
  CHECK(et::sum(x).item() == Approx(0.1 * (1 << 22)).epsilon(1e-6));
}

TEST_CASE("integer and bool reductions", "[reductions]") {
  const auto i = et::from_vector(et::cpu, std::vector<std::int32_t>{3, -7, 2, 9, 0, 4}, {2, 3});
  static_assert(std::is_same_v<decltype(et::sum(i))::value_type, std::int64_t>);
  CHECK(et::sum(i).item() == 11);
  CHECK(et::prod(i + 1).item() == 4 * -6 * 3 * 10 * 1 * 5);
  CHECK(et::max(i).item() == 9);
  CHECK(et::min(i).item() == -7);
  CHECK(et::sum(i, 0).to_vector() == std::vector<std::int64_t>{12, -7, 6});
  CHECK(et::argmax(i, 1).to_vector() == std::vector<std::int64_t>{0, 0});
  CHECK(et::argmin(i, 1).to_vector() == std::vector<std::int64_t>{1, 1});
  const auto mask = i > 0;
  CHECK(et::sum(mask).item() == 4);
  CHECK_FALSE(et::all(mask).item());
  CHECK(et::any(mask).item());
  CHECK(et::all(mask, 0).to_vector() == std::vector<bool>{true, false, true});
  CHECK(et::any(i < -5, 1).to_vector() == std::vector<bool>{true, false});
  // int32 sums widen to int64: no overflow at 2^31.
  CHECK(et::sum(et::full<std::int32_t>(et::cpu, {4}, 1 << 30)).item() == std::int64_t{1} << 32);
}

TEST_CASE("axis reductions over every axis of random shapes", "[reductions]") {
  const std::int64_t d0 = GENERATE(1, 3, 17), d1 = GENERATE(1, 2, 33), d2 = GENERATE(1, 5, 130);
  CAPTURE(d0, d1, d2);
  const auto values = random_values<float>(static_cast<std::size_t>(d0 * d1 * d2), 100 + static_cast<std::uint64_t>(d0 * d1 * d2));
  const auto x = et::from_vector(et::cpu, values, {d0, d1, d2});
  const auto v = as_double(values);
  const std::int64_t dims[3] = {d0, d1, d2};
  for (int axis = 0; axis < 3; ++axis) {
    CAPTURE(axis);
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= dims[d];
    for (int d = axis + 1; d < 3; ++d) inner *= dims[d];
    const std::int64_t length = dims[axis];
    const auto sums = reduce_reference(v, outer, length, inner, 0.0, [](double a, double b) { return a + b; });
    const auto maxes = reduce_reference(v, outer, length, inner, -INFINITY, [](double a, double b) { return std::max(a, b); });
    const auto mins = reduce_reference(v, outer, length, inner, INFINITY, [](double a, double b) { return std::min(a, b); });
    const auto squares = reduce_reference(v, outer, length, inner, 0.0, [](double a, double b) { return a + b * b; });
    const auto magnitudes = reduce_reference(v, outer, length, inner, 0.0, [](double a, double b) { return a + std::fabs(b); });
    // Float sums may cancel: bound the error by float epsilon times the sum of magnitudes.
    const auto got_sums = et::sum(x, axis).to_vector(), got_means = et::mean(x, axis).to_vector();
    const auto got_norms = et::norm(x, axis).to_vector();
    for (std::size_t k = 0; k < sums.size(); ++k) {
      CAPTURE(k);
      const double bound = 1e-6 * magnitudes[k] + 1e-7;
      REQUIRE(std::fabs(got_sums[k] - sums[k]) <= bound);
      REQUIRE(std::fabs(got_means[k] - sums[k] / double(length)) <= bound / double(length) + 1e-7);
      REQUIRE(got_norms[k] == Approx(std::sqrt(squares[k])).epsilon(1e-6));
    }
    test::check_all_close(et::max(x, axis).to_vector(), maxes, 0);
    test::check_all_close(et::min(x, axis).to_vector(), mins, 0);
    // argmax: the value at the returned index is the maximum.
    const auto arg = et::argmax(x, axis).to_vector();
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::int64_t k = 0; k < inner; ++k) {
        const auto index = arg[static_cast<std::size_t>(o * inner + k)];
        REQUIRE(index >= 0);
        REQUIRE(index < length);
        REQUIRE(v[static_cast<std::size_t>((o * length + index) * inner + k)] == maxes[static_cast<std::size_t>(o * inner + k)]);
      }
    // keepdim keeps the axis with extent 1 and the same values.
    const auto kept = et::sum(x, axis, true);
    CHECK(kept.shape()[static_cast<std::size_t>(axis)] == 1);
    CHECK(kept.to_vector() == et::sum(x, axis).to_vector());
  }
  static_assert(decltype(et::sum(x, 1))::rank == 2 && decltype(et::sum(x, 1, true))::rank == 3);
}

TEST_CASE("reductions read non-contiguous and broadcast operands", "[reductions]") {
  const std::int64_t rows = GENERATE(1, 7, 64), cols = GENERATE(1, 9, 300);
  CAPTURE(rows, cols);
  const auto base = et::from_vector(et::cpu, random_values<double>(static_cast<std::size_t>(rows * cols), 3), {cols, rows});
  const et::Tensor<double, 2> transposed(base.storage(), 0, {rows, cols}, {1, rows});
  const auto row = et::from_vector(et::cpu, random_values<double>(static_cast<std::size_t>(cols), 4), {cols});
  const auto bv = base.to_vector(), rv = row.to_vector();
  std::vector<double> expected_rows(static_cast<std::size_t>(rows), 0.0), expected_cols(static_cast<std::size_t>(cols), 0.0);
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double value = bv[static_cast<std::size_t>(c * rows + r)] * rv[static_cast<std::size_t>(c)];
      expected_rows[static_cast<std::size_t>(r)] += value;
      expected_cols[static_cast<std::size_t>(c)] += value;
      total += value;
    }
  test::check_all_close(et::sum(transposed * row, 1).to_vector(), expected_rows, 1e-12);
  test::check_all_close(et::sum(transposed * row, 0).to_vector(), expected_cols, 1e-12);
  CHECK(et::sum(transposed * row).item() == Approx(total).epsilon(1e-12).margin(1e-12));
}

TEST_CASE("a reduction inside a further expression is computed once", "[reductions]") {
  const auto x = et::from_vector(et::cpu, random_values<float>(6 * 50, 11), {6, 50});
  const et::Tensor<float, 2> centered = x - et::max(x, 1, true);
  const auto c = centered.to_vector(), xv = x.to_vector();
  for (int r = 0; r < 6; ++r) {
    float row_max = -INFINITY;
    for (int k = 0; k < 50; ++k) row_max = std::max(row_max, xv[static_cast<std::size_t>(r * 50 + k)]);
    for (int k = 0; k < 50; ++k) REQUIRE(c[static_cast<std::size_t>(r * 50 + k)] == xv[static_cast<std::size_t>(r * 50 + k)] - row_max);
  }
}

TEST_CASE("empty inputs and NaN", "[reductions][errors]") {
  const auto empty = et::zeros<float>(et::cpu, {0});
  CHECK(et::sum(empty).item() == 0.0f);
  CHECK(et::prod(empty).item() == 1.0f);
  CHECK(et::all(empty).item());
  CHECK_FALSE(et::any(empty).item());
  CHECK_THROWS_MATCHES(et::max(empty), et::ShapeError,
                       Catch::Matchers::Message("et: max of an empty tensor (shape [0]) is undefined"));
  CHECK_THROWS_AS(et::mean(empty), et::ShapeError);
  CHECK_THROWS_AS(et::min(empty), et::ShapeError);
  const auto no_columns = et::zeros<float>(et::cpu, {3, 0});
  CHECK(et::sum(no_columns, 1).to_vector() == std::vector<float>{0, 0, 0});
  CHECK(et::sum(no_columns, 0).numel() == 0);
  CHECK_THROWS_MATCHES(et::argmax(no_columns, 1), et::ShapeError,
                       Catch::Matchers::Message("et: argmax over axis 1 of shape [3, 0] reduces an empty axis"));
  CHECK(et::max(no_columns, 0).numel() == 0);  // nothing to reduce, nothing to report
  CHECK_THROWS_AS(et::sum(no_columns, 2), et::ShapeError);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto x = et::from_vector(et::cpu, std::vector<float>{1, nan, 3, 4, 5, 6}, {2, 3});
  CHECK(std::isnan(et::max(x).item()));
  CHECK(std::isnan(et::min(x).item()));
  CHECK(std::isnan(et::sum(x).item()));
  const auto row_max = et::max(x, 1).to_vector();
  CHECK(std::isnan(row_max[0]));
  CHECK(row_max[1] == 6.0f);
  CHECK(et::argmax(x, 1).to_vector() == std::vector<std::int64_t>{1, 2});  // NaN wins, as in PyTorch
  CHECK(et::argmin(x, 1).to_vector() == std::vector<std::int64_t>{1, 0});
  // Ties pick the first index.
  CHECK(et::argmax(et::from_vector(et::cpu, std::vector<float>{2, 7, 7, 1}, {1, 4}), 1).item() == 1);
}
