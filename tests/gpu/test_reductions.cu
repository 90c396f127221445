// Reductions on the GPU: against double-precision host loops and etensor's CPU path,
// on random data with edge sizes, both axis kernels (rows, columns with and without row
// chunks), vector/linear/strided reads, NaN and empty rules, determinism, and launch
// counts (a fused operand adds no kernel).
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <cmath>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "../common/random_values.hpp"
#include "cupti_counter.hpp"
#include "../common/softmax_cases.hpp"

namespace {

using Gpu = et::Cuda<0>;

/// Row-major [outer, length, inner] reduced along the middle axis in double precision.
template <class F>
std::vector<double> reference(const std::vector<float>& v, std::int64_t outer, std::int64_t length, std::int64_t inner,
                              double init, F f) {
  std::vector<double> out(static_cast<std::size_t>(outer * inner), init);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < length; ++j)
      for (std::int64_t k = 0; k < inner; ++k) {
        double& slot = out[static_cast<std::size_t>(o * inner + k)];
        slot = f(slot, double(v[static_cast<std::size_t>((o * length + j) * inner + k)]));
      }
  return out;
}

}  // namespace

TEST_CASE("full reductions on the GPU", "[reductions]") {
  // 1000, 3000, 4096: one launch (one block finishes); 4097 and up: block partials, then a finish.
  const std::int64_t n = GENERATE(1, 3, 1000, 3000, 4096, 4097, 1000003, (std::int64_t{1} << 24) + 3);
  CAPTURE(n);
  const auto values = test::random_values<float>(static_cast<std::size_t>(n), 7 + static_cast<std::uint64_t>(n), -2, 2);
  const auto others = test::random_values<float>(static_cast<std::size_t>(n), 8 + static_cast<std::uint64_t>(n), -2, 2);
  const auto x = et::from_vector(et::cuda<0>, values, {n});
  const auto y = et::from_vector(et::cuda<0>, others, {n});
  double sum = 0, magnitude = 0, sq = 0, max = -INFINITY, min = INFINITY, diff_sq = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = values[i], d = v - double(others[i]);
    sum += v;
    magnitude += std::fabs(v);
    sq += v * v;
    max = std::max(max, v);
    min = std::min(min, v);
    diff_sq += d * d;
  }
  CHECK(std::fabs(et::sum(x).item() - sum) <= 1e-6 * magnitude + 1e-6);
  CHECK(et::mean(x).item() == Approx(sum / double(n)).margin(1e-6 * magnitude / double(n) + 1e-7));
  CHECK(et::max(x).item() == static_cast<float>(max));
  CHECK(et::min(x).item() == static_cast<float>(min));
  CHECK(et::norm(x).item() == Approx(std::sqrt(sq)).epsilon(1e-5));
  CHECK(et::sum((x - y) * (x - y)).item() == Approx(diff_sq).epsilon(1e-5));
  // The double path, and a misaligned (offset 1) operand that forces scalar reads.
  const auto xd = et::from_vector(et::cuda<0>, std::vector<double>(values.begin(), values.end()), {n});
  CHECK(et::sum(xd).item() == Approx(sum).epsilon(1e-12).margin(1e-9));
  if (n > 1) {
    const et::Tensor<float, 1, Gpu> shifted(x.storage(), 1, {n - 1}, {1});
    CHECK(et::max(shifted).item() == *std::max_element(values.begin() + 1, values.end()));
    const double shifted_sum = sum - values[0];
    CHECK(std::fabs(et::sum(shifted).item() - shifted_sum) <= 1e-6 * magnitude + 1e-6);
  }
}

TEST_CASE("integer and bool reductions on the GPU", "[reductions]") {
  std::vector<std::int32_t> values(100003);
  std::mt19937 engine(5);
  std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
  for (auto& v : values) v = dist(engine);
  const auto i = et::from_vector(et::cuda<0>, values, {100003});
  std::int64_t sum = 0;
  for (auto v : values) sum += v;
  CHECK(et::sum(i).item() == sum);
  CHECK(et::max(i).item() == *std::max_element(values.begin(), values.end()));
  CHECK(et::sum(i > 0).item() == std::count_if(values.begin(), values.end(), [](auto v) { return v > 0; }));
  CHECK(et::any(i == values[777]).item());
  CHECK_FALSE(et::all(i != values[12345]).item());
  CHECK(et::sum(et::full<std::int32_t>(et::cuda<0>, {8}, 1 << 30)).item() == std::int64_t{1} << 33);
}

TEST_CASE("axis reductions: rows, columns, chunked columns", "[reductions]") {
  // (outer, length, inner) families: innermost axis (rows kernel, vector and scalar reads),
  // a middle axis, and tall columns that split into row chunks.
  const auto shape = GENERATE(et::Shape<3>{1, 1, 1}, et::Shape<3>{3, 5, 7}, et::Shape<3>{2, 1000, 64},
                              et::Shape<3>{1, 4097, 3}, et::Shape<3>{5, 33, 1000}, et::Shape<3>{1, 16384, 40});
  CAPTURE(shape);
  const auto values = test::random_values<float>(static_cast<std::size_t>(shape[0] * shape[1] * shape[2]), 99, -2, 2);
  const auto xg = et::from_vector(et::cuda<0>, values, shape);
  const auto xc = et::from_vector(et::cpu, values, shape);
  for (int axis = 0; axis < 3; ++axis) {
    CAPTURE(axis);
    std::int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= shape[static_cast<std::size_t>(d)];
    for (int d = axis + 1; d < 3; ++d) inner *= shape[static_cast<std::size_t>(d)];
    const std::int64_t length = shape[static_cast<std::size_t>(axis)];
    const auto sums = reference(values, outer, length, inner, 0.0, [](double a, double b) { return a + b; });
    const auto magnitudes = reference(values, outer, length, inner, 0.0, [](double a, double b) { return a + std::fabs(b); });
    const auto maxes = reference(values, outer, length, inner, -INFINITY, [](double a, double b) { return std::max(a, b); });
    const auto got = et::sum(xg, axis).to_vector();
    const auto got_max = et::max(xg, axis).to_vector();
    const auto got_arg = et::argmax(xg, axis).to_vector();
    REQUIRE(got.size() == sums.size());
    for (std::size_t k = 0; k < sums.size(); ++k) {
      CAPTURE(k);
      REQUIRE(std::fabs(got[k] - sums[k]) <= 1e-6 * magnitudes[k] + 1e-7);
      REQUIRE(got_max[k] == static_cast<float>(maxes[k]));
    }
    CHECK(got_arg == et::argmax(xc, axis).to_vector());  // first index of the maximum on both
    CHECK(et::min(xg, axis, true).to_vector() == et::min(xc, axis, true).to_vector());
    // A fused, broadcast operand: (x * 2 - 1) read straight from x.
    const auto fused = et::mean(xg * 2.0f - 1.0f, axis).to_vector();
    for (std::size_t k = 0; k < sums.size(); ++k)
      REQUIRE(std::fabs(fused[k] - (2 * sums[k] / double(length) - 1)) <= 2e-6 * magnitudes[k] / double(length) + 1e-6);
  }
}

TEST_CASE("axis reductions of transposed (strided) operands", "[reductions]") {
  const std::int64_t rows = GENERATE(1, 31, 300), cols = GENERATE(1, 17, 1000);
  CAPTURE(rows, cols);
  const auto values = test::random_values<double>(static_cast<std::size_t>(rows * cols), 3, -2, 2);
  const auto base = et::from_vector(et::cuda<0>, values, {cols, rows});
  const et::Tensor<double, 2, Gpu> t(base.storage(), 0, {rows, cols}, {1, rows});
  const auto host_base = et::from_vector(et::cpu, values, {cols, rows});
  const et::Tensor<double, 2> th(host_base.storage(), 0, {rows, cols}, {1, rows});
  for (int axis = 0; axis < 2; ++axis) {
    const auto g = et::sum(t, axis).to_vector(), c = et::sum(th, axis).to_vector();
    REQUIRE(g.size() == c.size());
    for (std::size_t k = 0; k < g.size(); ++k) REQUIRE(g[k] == Approx(c[k]).epsilon(1e-12).margin(1e-12));
    CHECK(et::argmin(t, axis).to_vector() == et::argmin(th, axis).to_vector());
  }
}

TEST_CASE("softmax, log_softmax and logsumexp on the GPU match a long double reference", "[softmax]") {
  test::check_row_op_shapes<Gpu, double>();
  test::check_row_op_shapes<Gpu, float>();
  test::check_row_op_shapes<Gpu, et::half>();
  test::check_row_op_shapes<Gpu, et::bfloat16>();
  test::check_row_op_layouts<Gpu>();
  test::check_row_op_special_values<Gpu>();
  test::check_row_op_errors<Gpu>();
}

TEST_CASE("softmax, log_softmax and logsumexp are one kernel each", "[softmax][cupti]") {
  for (const std::int64_t cols : {10, 4096, 10000}) {  // a warp per row, a block, a block reading twice
    CAPTURE(cols);
    const auto x = et::randn<float>(et::cuda<0>, {64, cols}, 3);
    const auto xt = et::randn<float>(et::cuda<0>, {cols, 64}, 4).transpose(0, 1);
    for (int variant = 0; variant < 2; ++variant) {
      const auto& input = variant == 0 ? x : xt;
      test::LaunchCounter counter;
      const auto s = et::softmax(input, 1);
      const auto l = et::log_softmax(input, 1);
      const auto e = et::logsumexp(input, 1);
      CHECK(counter.stop().kernels() == 3);
    }
  }
}

TEST_CASE("empty inputs and NaN on the GPU", "[reductions]") {
  const auto empty = et::zeros<float>(et::cuda<0>, {0, 4});
  CHECK(et::sum(empty).item() == 0.0f);
  CHECK(et::prod(empty).item() == 1.0f);
  CHECK_THROWS_AS(et::max(empty), et::ShapeError);
  CHECK(et::sum(empty, 0).to_vector() == std::vector<float>{0, 0, 0, 0});
  CHECK_THROWS_AS(et::argmax(empty, 0), et::ShapeError);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> values = test::random_values<float>(3 * 5000, 2, -2, 2);
  values[2 * 5000 + 4321] = nan;
  const auto x = et::from_vector(et::cuda<0>, values, {3, 5000});
  CHECK(std::isnan(et::max(x).item()));
  CHECK(std::isnan(et::min(x).item()));
  const auto row_max = et::max(x, 1).to_vector();
  CHECK_FALSE(std::isnan(row_max[0]));
  CHECK(std::isnan(row_max[2]));
  CHECK(et::argmax(x, 1).to_vector()[2] == 4321);
  CHECK(std::isnan(et::max(x, 0).to_vector()[4321]));
}

TEST_CASE("GPU reductions are deterministic", "[reductions]") {
  const auto x = et::randn<float>(et::cuda<0>, {1 << 22}, 3);
  const auto m = et::randn<float>(et::cuda<0>, {4096, 1024}, 4);
  const float a = et::sum(x).item(), b = et::sum(x).item();
  CHECK(std::memcmp(&a, &b, sizeof a) == 0);
  CHECK(et::sum(m, 0).to_vector() == et::sum(m, 0).to_vector());
}

TEST_CASE("a reduction of a fused expression launches no elementwise kernel", "[reductions][cupti]") {
  const auto x = et::randn<float>(et::cuda<0>, {1 << 20}, 1);
  const auto y = et::randn<float>(et::cuda<0>, {1 << 20}, 2);
  const auto m = et::randn<float>(et::cuda<0>, {512, 2048}, 3);
  {
    test::LaunchCounter counter;
    const auto s = et::sum((x - y) * (x - y));
    CHECK(counter.stop().kernels() == 2);  // block partials + finish, nothing materialized
    CHECK(s.numel() == 1);
  }
  {
    test::LaunchCounter counter;
    const auto rows = et::sum(et::exp(m) * 2.0f, 1);
    CHECK(counter.stop().kernels() == 1);  // one block per row
    CHECK(rows.numel() == 512);
  }
  {
    // Inputs one block reads in one round are one launch: 4096 aligned floats (four vectors
    // a thread), 32 x 32 read transposed (strided, one element a thread: 1024); one more
    // element takes the two stages.
    const auto small = et::randn<float>(et::cuda<0>, {4097}, 4);
    const auto square = et::randn<float>(et::cuda<0>, {32, 32}, 5).transpose(0, 1);
    const std::vector<float> host_small = small.to_vector(), host_square = square.contiguous().to_vector();
    for (const std::int64_t n : {std::int64_t{4096}, std::int64_t{4097}}) {
      const auto head = small.slice(0, 0, n);
      double expected = 0;
      for (std::int64_t i = 0; i < n; ++i) expected += host_small[static_cast<std::size_t>(i)] * 2.0;
      test::LaunchCounter counter;
      const auto s = et::sum(head * 2.0f);
      CHECK(counter.stop().kernels() == (n == 4096 ? 1 : 2));
      CHECK(s.item() == Approx(expected).margin(1e-3));
    }
    double expected = 0;
    for (const float v : host_square) expected += double(v) * v;
    test::LaunchCounter counter;
    const auto s = et::sum(square * square);
    CHECK(counter.stop().kernels() == 1);
    CHECK(s.item() == Approx(expected).epsilon(1e-5));
  }
  {
    test::LaunchCounter counter;
    const auto centered = et::eval(m - et::max(m, 1, true));
    CHECK(counter.stop().kernels() == 2);  // the row max once, then one elementwise kernel
    CHECK(centered.numel() == m.numel());
  }
}
