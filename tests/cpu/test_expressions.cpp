// Lazy elementwise expressions on the CPU, against double-precision loops.
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <cmath>
#include <limits>

using Catch::Matchers::Contains;
using test::check_all_close;
using test::random_values;

namespace {

template <class MakeExpr, class Reference>
void check_unary(MakeExpr make, Reference reference, double lo, double hi, double tolerance) {
  const std::int64_t n = GENERATE(0, 1, 2, 3, 17, 1000, 100003);
  CAPTURE(n);
  const auto values = random_values<float>(static_cast<std::size_t>(n), 11 + static_cast<std::uint64_t>(n), lo, hi);
  const auto x = et::from_vector(et::cpu, values, {n});
  const et::Tensor<float, 1> y = make(x);
  std::vector<double> expected(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) expected[i] = reference(static_cast<double>(values[i]));
  check_all_close(y.to_vector(), expected, tolerance);
}

}  // namespace

TEST_CASE("unary functions against double precision", "[expr]") {
  const double f = 2e-6;  // float results of double-accurate functions
  SECTION("exp") { check_unary([](const auto& x) { return et::exp(x); }, [](double v) { return std::exp(v); }, -10, 10, f); }
  SECTION("log") { check_unary([](const auto& x) { return et::log(x); }, [](double v) { return std::log(v); }, 1e-3, 1e3, f); }
  SECTION("log1p") { check_unary([](const auto& x) { return et::log1p(x); }, [](double v) { return std::log1p(v); }, -0.9, 10, f); }
  SECTION("sqrt") { check_unary([](const auto& x) { return et::sqrt(x); }, [](double v) { return std::sqrt(v); }, 0, 100, f); }
  SECTION("rsqrt") { check_unary([](const auto& x) { return et::rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 1e-2, 100, f); }
  SECTION("sin") { check_unary([](const auto& x) { return et::sin(x); }, [](double v) { return std::sin(v); }, -10, 10, f); }
  SECTION("cos") { check_unary([](const auto& x) { return et::cos(x); }, [](double v) { return std::cos(v); }, -10, 10, f); }
  SECTION("tanh") { check_unary([](const auto& x) { return et::tanh(x); }, [](double v) { return std::tanh(v); }, -5, 5, f); }
  SECTION("sigmoid") { check_unary([](const auto& x) { return et::sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }, -20, 20, f); }
  SECTION("gelu") {
    check_unary([](const auto& x) { return et::gelu(x); },
                [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, -6, 6, f);
  }
  SECTION("abs") { check_unary([](const auto& x) { return et::abs(x); }, [](double v) { return std::fabs(v); }, -5, 5, 0); }
  SECTION("square") { check_unary([](const auto& x) { return et::square(x); }, [](double v) { return v * v; }, -5, 5, 1e-7); }
  SECTION("relu") { check_unary([](const auto& x) { return et::relu(x); }, [](double v) { return v < 0 ? 0.0 : v; }, -5, 5, 0); }
  SECTION("negate") { check_unary([](const auto& x) { return -x; }, [](double v) { return -v; }, -5, 5, 0); }
  SECTION("pow") { check_unary([](const auto& x) { return et::pow(x, 2.5f); }, [](double v) { return std::pow(v, 2.5); }, 0, 5, f); }
  SECTION("clamp") {
    check_unary([](const auto& x) { return et::clamp(x, -1.0f, 0.5f); }, [](double v) { return std::min(std::max(v, -1.0), 0.5); },
                -3, 3, 0);
  }
}

TEST_CASE("binary operators broadcast like NumPy", "[expr]") {
  const std::int64_t rows = GENERATE(1, 3, 64), cols = GENERATE(1, 5, 129);
  CAPTURE(rows, cols);
  const auto av = random_values<double>(static_cast<std::size_t>(rows * cols), 1);
  const auto rv = random_values<double>(static_cast<std::size_t>(cols), 2, 0.5, 3.0);  // a row, no zeros
  const auto cv = random_values<double>(static_cast<std::size_t>(rows), 3);           // a column
  const auto a = et::from_vector(et::cpu, av, {rows, cols});
  const auto row = et::from_vector(et::cpu, rv, {cols});
  const auto column = et::from_vector(et::cpu, cv, {rows, 1});
  std::vector<double> expected(av.size());
  auto each = [&](auto f) {
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        expected[static_cast<std::size_t>(r * cols + c)] =
            f(av[static_cast<std::size_t>(r * cols + c)], rv[static_cast<std::size_t>(c)], cv[static_cast<std::size_t>(r)]);
  };
  SECTION("+ - * / against a row and a column") {
    const et::Tensor<double, 2> y = (a + row) * column - a / row;
    each([](double x, double r, double c) { return (x + r) * c - x / r; });
    check_all_close(y.to_vector(), expected, 1e-14);
  }
  SECTION("maximum, minimum, where, comparisons") {
    const et::Tensor<double, 2> y = et::where(a > column, et::maximum(a, row), et::minimum(column, 0.0) - 1.0);
    each([](double x, double r, double c) { return x > c ? std::max(x, r) : std::min(c, 0.0) - 1.0; });
    check_all_close(y.to_vector(), expected, 0);
  }
  SECTION("scalars on either side") {
    const et::Tensor<double, 2> y = 2.0 - a * 3 + 1.5 / row;
    each([](double x, double r, double) { return 2.0 - x * 3 + 1.5 / r; });
    check_all_close(y.to_vector(), expected, 1e-14);
  }
  SECTION("outer product of a column and a row") {
    const et::Tensor<double, 2> y = column * row;
    each([](double, double r, double c) { return c * r; });
    check_all_close(y.to_vector(), expected, 1e-15);
  }
}

TEST_CASE("mixed ranks and size-1 axes", "[expr]") {
  const auto a = et::from_vector(et::cpu, random_values<float>(24, 5), {2, 3, 4});
  const auto b = et::from_vector(et::cpu, random_values<float>(12, 6), {3, 1, 1, 4});
  const et::Tensor<float, 4> y = a + b;  // [2,3,4] + [3,1,1,4] -> [3,2,3,4]
  CHECK(y.shape() == et::Shape<4>{3, 2, 3, 4});
  const auto av = a.to_vector(), bv = b.to_vector(), yv = y.to_vector();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k)
        for (int l = 0; l < 4; ++l)
          REQUIRE(yv[static_cast<std::size_t>(((i * 2 + j) * 3 + k) * 4 + l)] ==
                  av[static_cast<std::size_t>((j * 3 + k) * 4 + l)] + bv[static_cast<std::size_t>(i * 4 + l)]);
  const auto scalar = et::full<float>(et::cpu, et::Shape<0>{}, 2.0f);
  const et::Tensor<float, 3> scaled = a * scalar;
  CHECK(scaled.to_vector()[5] == 2.0f * av[5]);
  CHECK_THROWS_MATCHES(a + et::zeros<float>(et::cpu, {3}), et::ShapeError,
                       Catch::Matchers::Message("et: shapes [2, 3, 4] and [3] do not broadcast: axis -1 has extents 4 and 3"));
}

TEST_CASE("type promotion follows PyTorch", "[expr][types]") {
  const auto i32 = et::from_vector(et::cpu, std::vector<std::int32_t>{7, -3, 2}, {3});
  const auto i64 = et::from_vector(et::cpu, std::vector<std::int64_t>{1, 2, 3}, {3});
  const auto f32 = et::from_vector(et::cpu, std::vector<float>{0.5f, 1.5f, 2.5f}, {3});
  const auto f64 = et::from_vector(et::cpu, std::vector<double>{0.25, 0.5, 1.0}, {3});
  const auto mask = et::from_vector(et::cpu, std::vector<bool>{true, false, true}, {3});
  static_assert(std::is_same_v<decltype(i32 + f32)::value_type, float>);
  static_assert(std::is_same_v<decltype(i32 + i64)::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(f32 * f64)::value_type, double>);
  static_assert(std::is_same_v<decltype(f32 * 2.0)::value_type, float>);       // scalars do not widen
  static_assert(std::is_same_v<decltype(i32 + std::int64_t{5})::value_type, std::int32_t>);
  static_assert(std::is_same_v<decltype(i32 * 2.5)::value_type, float>);       // a float scalar lifts ints
  static_assert(std::is_same_v<decltype(i32 / i32)::value_type, float>);       // true division
  static_assert(std::is_same_v<decltype(et::exp(i64))::value_type, float>);
  static_assert(std::is_same_v<decltype(mask + 1)::value_type, std::int64_t>);
  static_assert(std::is_same_v<decltype(i32 < f32)::value_type, bool>);
  static_assert(std::is_same_v<decltype(et::where(mask, i32, f64))::value_type, double>);
  static_assert(std::is_same_v<decltype(et::abs(i32))::value_type, std::int32_t>);

  CHECK(et::eval(i32 / 2).to_vector() == std::vector<float>{3.5f, -1.5f, 1.0f});
  CHECK(et::eval(i32 * 2.5).to_vector() == std::vector<float>{17.5f, -7.5f, 5.0f});
  CHECK(et::eval(f32 * 0.1).to_vector()[0] == 0.5f * 0.1f);  // computed in float, as PyTorch does
  CHECK(et::eval(mask + 1).to_vector() == std::vector<std::int64_t>{2, 1, 2});
  CHECK(et::eval(et::where(mask, i32, f64)).to_vector() == std::vector<double>{7.0, 0.5, 2.0});
  CHECK(et::eval(et::cast<std::int32_t>(f32 * 3.0f)).to_vector() == std::vector<std::int32_t>{1, 4, 7});
  CHECK(et::eval(et::cast<bool>(i32 - 2)).to_vector() == std::vector<bool>{true, true, false});
  CHECK(et::eval(et::abs(i32)).to_vector() == std::vector<std::int32_t>{7, 3, 2});
}

TEST_CASE("integer arithmetic wraps instead of being undefined", "[expr][types]") {
  const auto big = et::full<std::int32_t>(et::cpu, {2}, std::numeric_limits<std::int32_t>::max());
  CHECK(et::eval(big + 1).to_vector()[0] == std::numeric_limits<std::int32_t>::min());
  CHECK(et::eval(big * 2).to_vector()[1] == -2);
  const auto smallest = et::full<std::int64_t>(et::cpu, {1}, std::numeric_limits<std::int64_t>::min());
  CHECK(et::eval(-smallest).item() == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("NaN propagates through maximum, minimum, relu and clamp", "[expr]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto x = et::from_vector(et::cpu, std::vector<float>{nan, 1.0f, -2.0f, nan}, {4});
  const auto y = et::from_vector(et::cpu, std::vector<float>{0.0f, nan, 3.0f, nan}, {4});
  const auto max = et::eval(et::maximum(x, y)).to_vector();
  const auto min = et::eval(et::minimum(x, y)).to_vector();
  for (int i : {0, 1, 3}) {
    CHECK(std::isnan(max[static_cast<std::size_t>(i)]));
    CHECK(std::isnan(min[static_cast<std::size_t>(i)]));
  }
  CHECK(max[2] == 3.0f);
  CHECK(min[2] == -2.0f);
  CHECK(std::isnan(et::eval(et::relu(x)).to_vector()[0]));
  CHECK(std::isnan(et::eval(et::clamp(x, -1.0f, 1.0f)).to_vector()[0]));
  CHECK(et::eval(x != x).to_vector() == std::vector<bool>{true, false, false, true});
}

TEST_CASE("assignment evaluates into existing storage", "[expr]") {
  auto z = et::zeros<double>(et::cpu, {3, 4});
  const double* storage = z.data();
  const auto row = et::arange<double>(et::cpu, 4);
  z = row * 2.0;  // broadcast into [3, 4]
  CHECK(z.data() == storage);
  CHECK(z.to_vector()[4 + 3] == 6.0);
  z += 1;
  z *= et::from_vector(et::cpu, std::vector<double>{1, 10, 100}, {3, 1});
  CHECK(z.to_vector()[2 * 4 + 1] == 300.0);
  z -= z;
  z /= 4.0;
  for (double v : z.to_vector()) CHECK(v == 0.0);
  z = 7;
  for (double v : z.to_vector()) CHECK(v == 7.0);
  z.copy_(et::arange<std::int32_t>(et::cpu, 4));
  CHECK(z.to_vector()[5] == 1.0);

  CHECK_THROWS_MATCHES(z = et::zeros<double>(et::cpu, {4, 3}) + 1.0, et::ShapeError,
                       Catch::Matchers::Message("et: cannot assign an expression of shape [4, 3] to a tensor of shape [3, 4]"));

  et::Tensor<float, 2> undefined;
  undefined = et::ones<float>(et::cpu, {2, 2}) * 3.0f;  // an undefined tensor takes the expression's shape
  CHECK(undefined.shape() == et::Shape<2>{2, 2});
  CHECK(undefined.to_vector() == std::vector<float>{3, 3, 3, 3});
  et::Tensor<float, 1> nothing;
  CHECK_THROWS_WITH(undefined + nothing, Contains("undefined (default-constructed) tensor cannot be an operand"));
  CHECK_THROWS_WITH(nothing += 1.0f, Contains("undefined"));
}

TEST_CASE("aliasing: x = f(x) and overlapping views are right", "[expr]") {
  auto x = et::arange<float>(et::cpu, 100003);
  x = x * 2.0f + 1.0f;
  const auto v = x.to_vector();
  for (std::size_t i = 0; i < v.size(); i += 997) CHECK(v[i] == 2.0f * static_cast<float>(i) + 1.0f);

  // Writing the transpose of a square matrix into itself needs a temporary.
  const std::int64_t n = GENERATE(1, 2, 7, 300);
  CAPTURE(n);
  auto m = et::arange<std::int64_t>(et::cpu, n * n);
  et::Tensor<std::int64_t, 2> square(m.storage(), 0, {n, n}, {n, 1});
  const et::Tensor<std::int64_t, 2> transposed(m.storage(), 0, {n, n}, {1, n});
  square = transposed + 0;
  const auto t = square.to_vector();
  for (std::int64_t r = 0; r < n; ++r)
    for (std::int64_t c = 0; c < n; ++c) REQUIRE(t[static_cast<std::size_t>(r * n + c)] == c * n + r);
}

TEST_CASE("non-contiguous operands and destinations take the strided path", "[expr]") {
  const std::int64_t rows = GENERATE(1, 3, 67), cols = GENERATE(1, 4, 129);
  CAPTURE(rows, cols);
  const auto base = et::from_vector(et::cpu, random_values<double>(static_cast<std::size_t>(rows * cols), 9), {cols, rows});
  const et::Tensor<double, 2> transposed(base.storage(), 0, {rows, cols}, {1, rows});
  const auto b = et::from_vector(et::cpu, random_values<double>(static_cast<std::size_t>(rows * cols), 10), {rows, cols});
  const et::Tensor<double, 2> y = et::sin(transposed) * b + 1.0;
  const auto bv = base.to_vector(), b2 = b.to_vector(), yv = y.to_vector();
  std::vector<double> expected(yv.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      expected[static_cast<std::size_t>(r * cols + c)] =
          std::sin(bv[static_cast<std::size_t>(c * rows + r)]) * b2[static_cast<std::size_t>(r * cols + c)] + 1.0;
  check_all_close(yv, expected, 1e-15);

  // Writing into a transposed destination.
  auto out_base = et::zeros<double>(et::cpu, {cols, rows});
  et::Tensor<double, 2> out_view(out_base.storage(), 0, {rows, cols}, {1, rows});
  out_view = b * 2.0;
  const auto ov = out_base.to_vector();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      REQUIRE(ov[static_cast<std::size_t>(c * rows + r)] == 2.0 * b2[static_cast<std::size_t>(r * cols + c)]);
}

TEST_CASE("a ten-operation chain over three inputs", "[expr]") {
  const std::int64_t n = GENERATE(1, 1001, 1 << 18);
  CAPTURE(n);
  const auto xv = random_values<float>(static_cast<std::size_t>(n), 21), yv = random_values<float>(static_cast<std::size_t>(n), 22),
             wv = random_values<float>(static_cast<std::size_t>(n), 23);
  const auto x = et::from_vector(et::cpu, xv, {n}), y = et::from_vector(et::cpu, yv, {n}), w = et::from_vector(et::cpu, wv, {n});
  auto chain = et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f -
               et::sqrt(et::square(y) + 1.0f) / (1.0f + et::relu(w));
  const et::Tensor<float, 1> z = chain;  // `chain` holds its operands by value: no dangling
  std::vector<double> expected(xv.size());
  for (std::size_t i = 0; i < xv.size(); ++i) {
    const double a = xv[i], b = yv[i], c = wv[i];
    expected[i] = std::tanh(a * 0.5 + b) / (1 + std::exp(-c)) + std::exp(-std::fabs(a)) * 0.25 -
                  std::sqrt(b * b + 1.0) / (1.0 + std::max(c, 0.0));
  }
  check_all_close(z.to_vector(), expected, 5e-6);
}

TEST_CASE("an expression holds each use of a named operand once: temporaries move in", "[expr]") {
  // Building from temporaries moves them (expr/node.hpp): the counts below include every
  // copy an expression keeps, so a copy left over per tree level would show.
  const auto x = et::from_vector(et::cpu, std::vector<float>{-1.5f, 0.0f, 2.0f});
  auto y = et::from_vector(et::cpu, std::vector<float>{0.5f, 1.0f, -3.0f});
  const long x_alone = x.storage().use_count(), y_alone = y.storage().use_count();
  {
    const auto e = et::tanh(x * 0.5f + y) * et::exp(-et::abs(x)) - 1.0f;  // x twice, y once
    CHECK(x.storage().use_count() == x_alone + 2);
    CHECK(y.storage().use_count() == y_alone + 1);
    auto named = x + y;                     // a named subexpression used twice is copied...
    const auto squared = named * named;
    CHECK(x.storage().use_count() == x_alone + 2 + 3);
    const auto scaled = std::move(named) * 2.0f;  // ...and one moved in takes its copy along
    CHECK(x.storage().use_count() == x_alone + 2 + 3);
    const auto by_value = et::exp(y.clone());     // a temporary tensor moves in too
    CHECK(std::get<0>(by_value.children()).storage().use_count() == 1);  // held by the expression alone
    const et::Tensor<float, 1> z = e + squared - scaled + by_value;
    const std::vector<double> xs{-1.5, 0.0, 2.0}, ys{0.5, 1.0, -3.0};
    std::vector<double> expected;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double s = xs[i] + ys[i];
      expected.push_back(std::tanh(xs[i] * 0.5 + ys[i]) * std::exp(-std::fabs(xs[i])) - 1.0 + s * s - 2.0 * s +
                         std::exp(ys[i]));
    }
    check_all_close(z.to_vector(), expected, 1e-6);
  }
  CHECK(x.storage().use_count() == x_alone);
  CHECK(y.storage().use_count() == y_alone);
}

TEST_CASE("tanh on the CPU: relative accuracy at every scale, saturation and special values", "[expr]") {
  // The CPU computes float tanh inline (expr/vector_math.hpp: a rational approximation, so
  // that the loop vectorizes); checked here well past the unary test's range and near 0,
  // where the absolute tolerance of that test would hide a relative error.
  std::vector<float> values{0.0f, -0.0f, 1e-30f, -1e-20f, 3.9e-4f, 4.1e-4f, -4.1e-4f, 1e-3f, 0.1f, -0.5f, 1.0f,
                            2.5f, -3.75f, 7.8f, 7.95f, 8.0f, -8.5f, 9.0f, 20.0f, -1e30f, 3e38f};
  for (int k = -400; k <= 400; ++k) values.push_back(static_cast<float>(k) * 0.0231f);
  const auto x = et::from_vector(et::cpu, values);
  const std::vector<float> y = et::Tensor<float, 1>(et::tanh(x)).to_vector();
  for (std::size_t i = 0; i < values.size(); ++i) {
    CAPTURE(values[i]);
    const double expected = std::tanh(static_cast<double>(values[i]));
    CHECK(std::fabs(y[i] - expected) <= 5e-7 * std::fabs(expected));
    CHECK(std::fabs(y[i]) <= 1.0f);
    CHECK(std::signbit(y[i]) == std::signbit(values[i]));  // -0 stays -0
  }
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const auto special_values = et::from_vector(et::cpu, std::vector<float>{inf, -inf, nan});
  const std::vector<float> special = et::Tensor<float, 1>(et::tanh(special_values)).to_vector();
  CHECK(special[0] == 1.0f);
  CHECK(special[1] == -1.0f);
  CHECK(std::isnan(special[2]));
}
