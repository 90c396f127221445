// Fused elementwise expressions on the GPU, checked against an independent reference:
// plain double-precision loops over host copies of the inputs (and, as a second
// opinion, etensor's own CPU backend). In CUB's test style: edge sizes (0, 1, 2, 3, 127,
// 1000003) plus random ones, one SECTION per operation, CAPTUREd inputs, seeded data.
// The launch counts come from CUPTI, not from etensor (cupti_counter.hpp).
#include "elementwise_helpers.hpp"


// ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("floating-point expressions match a double-precision host reference", "[elementwise]", float,
                   double) {
  using T = TestType;
  const std::int64_t n =
      GENERATE(values<std::int64_t>({0, 1, 2, 3, 127, 1000003}), take(2, random<std::int64_t>(4, 300000)));
  CAPTURE(n);
  const Operands<T> in = make_operands<T>(n, 1000 + static_cast<std::uint64_t>(n));
  const Tolerance arith = arithmetic_tolerance<T>(), trans = transcendental_tolerance<T>();

  SECTION("x + y") { check_op<T>(in, ET_EXPR(x + y), HOST_REF(x + y), arith); }
  SECTION("x - y") { check_op<T>(in, ET_EXPR(x - y), HOST_REF(x - y), arith); }
  SECTION("x * y") { check_op<T>(in, ET_EXPR(x * y), HOST_REF(x * y), arith); }
  SECTION("x / p") { check_op<T>(in, ET_EXPR(x / p), HOST_REF(x / p), arith); }
  SECTION("-x") { check_op<T>(in, ET_EXPR(-x), HOST_REF(-x), exact); }
  SECTION("scalars on either side keep the tensor's type") {
    check_op<T>(in, ET_EXPR(2.5 - x), HOST_REF(2.5 - x), arith);
    check_op<T>(in, ET_EXPR(x - 2.5f), HOST_REF(x - 2.5), arith);
    check_op<T>(in, ET_EXPR(3 / p), HOST_REF(3 / p), arith);
    check_op<T>(in, ET_EXPR(p / 3), HOST_REF(p / 3), arith);
    check_op<T>(in, ET_EXPR(0.5 * x + 1), HOST_REF(0.5 * x + 1), arith);
    check_op<T>(in, ET_EXPR(x * 2 + y * 3L), HOST_REF(x * 2 + y * 3), arith);
  }
  SECTION("abs") { check_op<T>(in, ET_EXPR(et::abs(x)), HOST_REF(std::fabs(x)), exact); }
  SECTION("square") { check_op<T>(in, ET_EXPR(et::square(x)), HOST_REF(x * x), arith); }
  SECTION("relu") { check_op<T>(in, ET_EXPR(et::relu(x)), HOST_REF(relu_ref(x)), exact); }
  SECTION("exp") { check_op<T>(in, ET_EXPR(et::exp(x)), HOST_REF(std::exp(x)), trans); }
  SECTION("log") { check_op<T>(in, ET_EXPR(et::log(p)), HOST_REF(std::log(p)), trans); }
  SECTION("log1p") { check_op<T>(in, ET_EXPR(et::log1p(x * 0.25f)), HOST_REF(std::log1p(x * 0.25)), trans); }
  SECTION("sqrt") { check_op<T>(in, ET_EXPR(et::sqrt(p)), HOST_REF(std::sqrt(p)), arith); }
  SECTION("rsqrt") { check_op<T>(in, ET_EXPR(et::rsqrt(p)), HOST_REF(1.0 / std::sqrt(p)), trans); }
  SECTION("sin") { check_op<T>(in, ET_EXPR(et::sin(x * 3)), HOST_REF(std::sin(x * 3)), trans); }
  SECTION("cos") { check_op<T>(in, ET_EXPR(et::cos(x * 3)), HOST_REF(std::cos(x * 3)), trans); }
  SECTION("tanh") { check_op<T>(in, ET_EXPR(et::tanh(x)), HOST_REF(std::tanh(x)), trans); }
  SECTION("sigmoid") { check_op<T>(in, ET_EXPR(et::sigmoid(x)), HOST_REF(sigmoid_ref(x)), trans); }
  SECTION("gelu") { check_op<T>(in, ET_EXPR(et::gelu(x)), HOST_REF(gelu_ref(x)), trans); }
  SECTION("pow") {
    check_op<T>(in, ET_EXPR(et::pow(p, y)), HOST_REF(std::pow(p, y)), trans);
    check_op<T>(in, ET_EXPR(et::pow(p, 2.5)), HOST_REF(std::pow(p, 2.5)), trans);
    check_op<T>(in, ET_EXPR(et::pow(x, 2)), HOST_REF(x * x), trans);
    check_op<T>(in, ET_EXPR(et::pow(2.0f, x)), HOST_REF(std::pow(2.0, x)), trans);
  }
  SECTION("maximum and minimum") {
    check_op<T>(in, ET_EXPR(et::maximum(x, y)), HOST_REF(std::max(x, y)), exact);
    check_op<T>(in, ET_EXPR(et::minimum(x, y)), HOST_REF(std::min(x, y)), exact);
    check_op<T>(in, ET_EXPR(et::maximum(0.5, x)), HOST_REF(std::max(0.5, x)), exact);
    check_op<T>(in, ET_EXPR(et::minimum(x, -1)), HOST_REF(std::min(x, -1.0)), exact);
  }
  SECTION("clamp") {
    check_op<T>(in, ET_EXPR(et::clamp(x, -1, 1.5)), HOST_REF(std::min(std::max(x, -1.0), 1.5)), exact);
    check_op<T>(in, ET_EXPR(et::clamp(x, y, p)), HOST_REF(std::min(std::max(x, y), p)), exact);
  }
  SECTION("where") {
    check_op<T>(in, ET_EXPR(et::where(x > y, x, p)), HOST_REF(x > y ? x : p), exact);
    check_op<T>(in, ET_EXPR(et::where(x < 0, 0, x * 2)), HOST_REF(x < 0 ? 0.0 : x * 2), exact);
  }
  SECTION("comparisons give bool masks") {
    check_op<bool>(in, ET_EXPR(x == y), HOST_REF(x == y), exact);
    check_op<bool>(in, ET_EXPR(x != y), HOST_REF(x != y), exact);
    check_op<bool>(in, ET_EXPR(x < y), HOST_REF(x < y), exact);
    check_op<bool>(in, ET_EXPR(x <= y), HOST_REF(x <= y), exact);
    check_op<bool>(in, ET_EXPR(x > y), HOST_REF(x > y), exact);
    check_op<bool>(in, ET_EXPR(x >= y), HOST_REF(x >= y), exact);
    check_op<bool>(in, ET_EXPR(0.5 < x), HOST_REF(0.5 < x), exact);
  }
  SECTION("cast") {
    // x * 4 is exact, so truncation toward zero is decided by the same value on both sides.
    check_op<std::int32_t>(in, ET_EXPR(et::cast<std::int32_t>(x * 4)), HOST_REF(std::trunc(x * 4)), exact);
    check_op<bool>(in, ET_EXPR(et::cast<bool>(x - y)), HOST_REF(x != y), exact);
  }
  SECTION("a 17-operation chain over three inputs") {
    check_op<T>(in, ET_EXPR(chain(x, y, p)), HOST_REF(chain_ref(x, y, p)), chain_tolerance<T>());
  }
}

TEMPLATE_TEST_CASE("integer expressions are exact and promote like PyTorch", "[elementwise][integer]", std::int32_t,
                   std::int64_t) {
  using T = TestType;
  const std::int64_t n = GENERATE(values<std::int64_t>({0, 1, 2, 3, 127, 1000003}), take(1, random<std::int64_t>(4, 300000)));
  CAPTURE(n);
  const Operands<T> in = make_operands<T>(n, 2000 + static_cast<std::uint64_t>(n));
  // Values stay below 2^24 in magnitude, so float results of integer inputs are exact
  // up to the one rounding of a division or a math function.
  const Tolerance float_arith = arithmetic_tolerance<float>(), float_trans = transcendental_tolerance<float>();

  SECTION("+ - * and unary -") {
    check_op<T>(in, ET_EXPR(x + y), HOST_REF(x + y), exact);
    check_op<T>(in, ET_EXPR(x - y), HOST_REF(x - y), exact);
    check_op<T>(in, ET_EXPR(x * y), HOST_REF(x * y), exact);
    check_op<T>(in, ET_EXPR(-x), HOST_REF(-x), exact);
    check_op<T>(in, ET_EXPR(7 - x * 2), HOST_REF(7 - x * 2), exact);
  }
  SECTION("abs, square, relu") {
    check_op<T>(in, ET_EXPR(et::abs(x)), HOST_REF(std::fabs(x)), exact);
    check_op<T>(in, ET_EXPR(et::square(x)), HOST_REF(x * x), exact);
    check_op<T>(in, ET_EXPR(et::relu(x)), HOST_REF(relu_ref(x)), exact);
  }
  SECTION("maximum, minimum, clamp") {
    check_op<T>(in, ET_EXPR(et::maximum(x, y)), HOST_REF(std::max(x, y)), exact);
    check_op<T>(in, ET_EXPR(et::minimum(x, y)), HOST_REF(std::min(x, y)), exact);
    check_op<T>(in, ET_EXPR(et::clamp(x, -100, 100)), HOST_REF(std::min(std::max(x, -100.0), 100.0)), exact);
  }
  SECTION("comparisons and where") {
    check_op<bool>(in, ET_EXPR(x == y), HOST_REF(x == y), exact);
    check_op<bool>(in, ET_EXPR(x < y), HOST_REF(x < y), exact);
    check_op<bool>(in, ET_EXPR(x >= 0), HOST_REF(x >= 0), exact);
    check_op<T>(in, ET_EXPR(et::where(x > y, x, y)), HOST_REF(x > y ? x : y), exact);
  }
  SECTION("true division gives float") {
    check_op<float>(in, ET_EXPR(x / p), HOST_REF(x / p), float_arith);
    check_op<float>(in, ET_EXPR(x / 4), HOST_REF(x / 4), float_arith);
  }
  SECTION("math functions compute in float") {
    check_op<float>(in, ET_EXPR(et::sqrt(et::abs(x))), HOST_REF(std::sqrt(std::fabs(x))), float_trans);
    check_op<float>(in, ET_EXPR(et::exp(x / 1000)), HOST_REF(std::exp(x / 1000)), float_trans);
  }
  SECTION("a floating scalar lifts to float, an integer scalar keeps the type") {
    check_op<float>(in, ET_EXPR(x + 2.5), HOST_REF(x + 2.5), float_arith);
    check_op<T>(in, ET_EXPR(x * 3), HOST_REF(x * 3), exact);
  }
  SECTION("cast to floating point and back") {
    check_op<double>(in, ET_EXPR(et::cast<double>(x) * 0.5), HOST_REF(x * 0.5), exact);
    check_op<T>(in, ET_EXPR(et::cast<T>(et::cast<float>(x))), HOST_REF(x), exact);
  }
}

TEMPLATE_TEST_CASE("integer arithmetic wraps around like two's complement", "[elementwise][integer]", std::int32_t,
                   std::int64_t) {
  using T = TestType;
  using U = std::make_unsigned_t<T>;
  constexpr T max = std::numeric_limits<T>::max(), min = std::numeric_limits<T>::min();
  const std::vector<T> values{max, min, T(12345), T(-1)};
  const auto x = et::from_vector(et::cuda<0>, values);
  const et::Tensor<T, 1, Gpu> sum = x + 1, difference = x - 1, product = x * 2;
  std::vector<T> expected_sum, expected_difference, expected_product;
  for (const T v : values) {  // unsigned arithmetic is defined modulo 2^bits
    expected_sum.push_back(static_cast<T>(static_cast<U>(v) + U{1}));
    expected_difference.push_back(static_cast<T>(static_cast<U>(v) - U{1}));
    expected_product.push_back(static_cast<T>(static_cast<U>(v) * U{2}));
  }
  CHECK(sum.to_vector() == expected_sum);
  CHECK(difference.to_vector() == expected_difference);
  CHECK(product.to_vector() == expected_product);
}

TEST_CASE("bool masks combine, select and convert", "[elementwise][bool]") {
  const std::int64_t n = GENERATE(values<std::int64_t>({0, 1, 2, 3, 17, 127, 1000003}));
  CAPTURE(n);
  const Operands<float> in = make_operands<float>(n, 3000 + static_cast<std::uint64_t>(n));
  const auto coins = sample<bool>(et::Shape<1>{n}, random_values<bool>(static_cast<std::size_t>(n), 3100, 0, 1));
  const auto count = static_cast<std::size_t>(n);

  SECTION("masks from comparisons, compared with each other") {
    const et::Tensor<bool, 1, Gpu> mask = in.x.gpu > in.y.gpu;
    const et::Tensor<bool, 1, et::Cpu> mask_cpu = in.x.cpu > in.y.cpu;
    const et::Tensor<bool, 1, Gpu> same = mask == coins.gpu, differ = mask != coins.gpu;
    const et::Tensor<bool, 1, et::Cpu> same_cpu = mask_cpu == coins.cpu, differ_cpu = mask_cpu != coins.cpu;
    std::vector<double> expected_same(count), expected_differ(count);
    for (std::size_t i = 0; i < count; ++i) {
      const bool m = in.x.host[i] > in.y.host[i];
      expected_same[i] = m == coins.host[i];
      expected_differ[i] = m != coins.host[i];
    }
    check_result(same, same_cpu, expected_same, exact);
    check_result(differ, differ_cpu, expected_differ, exact);
  }
  SECTION("where selects with a stored mask") {
    const et::Tensor<float, 1, Gpu> picked = et::where(coins.gpu, in.x.gpu, in.y.gpu * 2);
    const et::Tensor<float, 1, et::Cpu> picked_cpu = et::where(coins.cpu, in.x.cpu, in.y.cpu * 2);
    std::vector<double> expected(count);
    for (std::size_t i = 0; i < count; ++i) expected[i] = coins.host[i] ? in.x.host[i] : 2.0 * in.y.host[i];
    check_result(picked, picked_cpu, expected, exact);
  }
  SECTION("casts: bool -> float is 0 or 1, nonzero -> true") {
    const et::Tensor<float, 1, Gpu> weighted = et::cast<float>(coins.gpu) * in.x.gpu;
    const et::Tensor<float, 1, et::Cpu> weighted_cpu = et::cast<float>(coins.cpu) * in.x.cpu;
    const et::Tensor<bool, 1, Gpu> nonzero = et::cast<bool>(et::cast<std::int64_t>(coins.gpu) * 5);
    const et::Tensor<bool, 1, et::Cpu> nonzero_cpu = et::cast<bool>(et::cast<std::int64_t>(coins.cpu) * 5);
    std::vector<double> expected_weighted(count), expected_nonzero(count);
    for (std::size_t i = 0; i < count; ++i) {
      expected_weighted[i] = coins.host[i] ? in.x.host[i] : 0.0;
      expected_nonzero[i] = coins.host[i];
    }
    check_result(weighted, weighted_cpu, expected_weighted, exact);
    check_result(nonzero, nonzero_cpu, expected_nonzero, exact);
  }
}

TEST_CASE("type promotion follows PyTorch", "[elementwise][promotion]") {
  const std::int64_t n = GENERATE(values<std::int64_t>({1, 127, 100003}));
  CAPTURE(n);
  const auto i32 = random_sample<std::int32_t>(et::Shape<1>{n}, 4000, -1000, 1000);
  const auto i32_divisor = random_sample<std::int32_t>(et::Shape<1>{n}, 4001, 1, 50);
  const auto i64 = random_sample<std::int64_t>(et::Shape<1>{n}, 4002, -1000, 1000);
  const auto f32 = random_sample<float>(et::Shape<1>{n}, 4003, -3, 3);
  const auto f64 = random_sample<double>(et::Shape<1>{n}, 4004, -3, 3);
  const auto count = static_cast<std::size_t>(n);
  const Tolerance float_arith = arithmetic_tolerance<float>(), double_arith = arithmetic_tolerance<double>();
  auto expect = [&](auto f) {
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = f(i);
    return out;
  };

  SECTION("int32 tensor + float tensor -> float") {
    const auto z = et::eval(i32.gpu + f32.gpu);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<float, 1, Gpu>>);
    check_result(z, et::eval(i32.cpu + f32.cpu), expect([&](std::size_t i) { return double(i32.host[i]) + f32.host[i]; }),
                 float_arith);
  }
  SECTION("int32 / int32 is true division -> float") {
    const auto z = et::eval(i32.gpu / i32_divisor.gpu);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<float, 1, Gpu>>);
    check_result(z, et::eval(i32.cpu / i32_divisor.cpu),
                 expect([&](std::size_t i) { return double(i32.host[i]) / i32_divisor.host[i]; }), float_arith);
  }
  SECTION("float tensor * double scalar stays float") {
    const auto z = et::eval(f32.gpu * 0.1);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<float, 1, Gpu>>);
    // The scalar becomes 0.1f: the product of two floats, rounded once.
    check_result(z, et::eval(f32.cpu * 0.1),
                 expect([&](std::size_t i) { return double(f32.host[i]) * double(0.1f); }), float_arith);
  }
  SECTION("int32 tensor + 2.5 -> float") {
    const auto z = et::eval(i32.gpu + 2.5);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<float, 1, Gpu>>);
    check_result(z, et::eval(i32.cpu + 2.5), expect([&](std::size_t i) { return i32.host[i] + 2.5; }), float_arith);
  }
  SECTION("int32 tensor + int64 tensor -> int64; int64 tensor * 3 stays int64") {
    const auto z = et::eval(i32.gpu + i64.gpu * 3);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<std::int64_t, 1, Gpu>>);
    check_result(z, et::eval(i32.cpu + i64.cpu * 3),
                 expect([&](std::size_t i) { return double(i32.host[i]) + 3.0 * double(i64.host[i]); }), exact);
  }
  SECTION("float tensor + double tensor -> double") {
    const auto z = et::eval(f32.gpu + f64.gpu);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<double, 1, Gpu>>);
    check_result(z, et::eval(f32.cpu + f64.cpu), expect([&](std::size_t i) { return double(f32.host[i]) + f64.host[i]; }),
                 double_arith);
  }
  SECTION("int64 tensor compared with a float tensor -> bool") {
    const auto z = et::eval(i64.gpu < f32.gpu * 300);
    STATIC_REQUIRE(std::is_same_v<decltype(z), const et::Tensor<bool, 1, Gpu>>);
    // float(i64) is exact below 2^24, and f32 * 300 is computed in float on both sides.
    check_result(z, et::eval(i64.cpu < f32.cpu * 300), expect([&](std::size_t i) {
                   return double(i64.host[i]) < double(f32.host[i] * 300.0f);
                 }),
                 exact);
  }
}

TEST_CASE("broadcasting follows NumPy rules", "[elementwise][broadcast]") {
  const auto shape = GENERATE(values<std::array<std::int64_t, 3>>(
      {{1, 1, 1}, {2, 3, 5}, {3, 1, 7}, {2, 17, 1}, {4, 127, 129}, {2, 0, 3}, {3, 300, 1001}}));
  const std::int64_t k = shape[0], m = shape[1], n = shape[2];
  CAPTURE(k, m, n);
  const Tolerance tol = arithmetic_tolerance<float>();
  const auto a3 = random_sample<float>(et::Shape<3>{k, m, n}, 5000, -3, 3);
  const auto b2 = random_sample<float>(et::Shape<2>{m, n}, 5001, -3, 3);
  const auto c1 = random_sample<float>(et::Shape<1>{n}, 5002, -3, 3);
  const auto row = random_sample<float>(et::Shape<2>{1, n}, 5003, -3, 3);
  const auto column = random_sample<float>(et::Shape<2>{m, 1}, 5004, -3, 3);
  const auto one = random_sample<float>(et::Shape<1>{1}, 5005, 0.5, 2);

  // expected[(i0, i1, i2)] = f(i0, i1, i2) over a [d0, d1, d2] box (d0 = 1 for rank 2).
  auto reference = [](std::int64_t d0, std::int64_t d1, std::int64_t d2, auto f) {
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(d0 * d1 * d2));
    for (std::int64_t i0 = 0; i0 < d0; ++i0)
      for (std::int64_t i1 = 0; i1 < d1; ++i1)
        for (std::int64_t i2 = 0; i2 < d2; ++i2) out.push_back(f(i0, i1, i2));
    return out;
  };
  auto at = [](const auto& s, const std::array<std::int64_t, 3>& operand_shape, std::int64_t i0, std::int64_t i1,
               std::int64_t i2) { return static_cast<double>(s.host[broadcast_index(operand_shape, i0, i1, i2)]); };

  SECTION("row vectors: [m, n] with [1, n] and with [n]") {
    const et::Tensor<float, 2, Gpu> z = b2.gpu + row.gpu * 2 - c1.gpu;
    const et::Tensor<float, 2, et::Cpu> z_cpu = b2.cpu + row.cpu * 2 - c1.cpu;
    check_result(z, z_cpu, reference(1, m, n, [&](auto, auto i, auto j) {
                   return at(b2, {1, m, n}, 0, i, j) + at(row, {1, 1, n}, 0, i, j) * 2 - at(c1, {1, 1, n}, 0, i, j);
                 }),
                 tol);
  }
  SECTION("a column vector: [m, n] with [m, 1]") {
    const et::Tensor<float, 2, Gpu> z = b2.gpu * column.gpu;
    const et::Tensor<float, 2, et::Cpu> z_cpu = b2.cpu * column.cpu;
    check_result(z, z_cpu, reference(1, m, n, [&](auto, auto i, auto j) {
                   return at(b2, {1, m, n}, 0, i, j) * at(column, {1, m, 1}, 0, i, j);
                 }),
                 tol);
  }
  SECTION("mixed ranks 1, 2 and 3") {
    const et::Tensor<float, 3, Gpu> z = a3.gpu * b2.gpu + c1.gpu;
    const et::Tensor<float, 3, et::Cpu> z_cpu = a3.cpu * b2.cpu + c1.cpu;
    CHECK(z.shape() == et::Shape<3>{k, m, n});
    check_result(z, z_cpu, reference(k, m, n, [&](auto h, auto i, auto j) {
                   return at(a3, {k, m, n}, h, i, j) * at(b2, {1, m, n}, h, i, j) + at(c1, {1, 1, n}, h, i, j);
                 }),
                 tol);
  }
  SECTION("size-1 axes stretch on both sides: [k, 1, n] - [m, 1]") {
    const auto lhs = random_sample<float>(et::Shape<3>{k, 1, n}, 5006, -3, 3);
    const et::Tensor<float, 3, Gpu> z = lhs.gpu - column.gpu;
    const et::Tensor<float, 3, et::Cpu> z_cpu = lhs.cpu - column.cpu;
    CHECK(z.shape() == et::Shape<3>{k, m, n});
    check_result(z, z_cpu, reference(k, m, n, [&](auto h, auto i, auto j) {
                   return at(lhs, {k, 1, n}, h, i, j) - at(column, {1, m, 1}, h, i, j);
                 }),
                 tol);
  }
  SECTION("a one-element tensor stretches over everything") {
    const et::Tensor<float, 3, Gpu> z = a3.gpu / one.gpu;
    const et::Tensor<float, 3, et::Cpu> z_cpu = a3.cpu / one.cpu;
    check_result(z, z_cpu, reference(k, m, n, [&](auto h, auto i, auto j) {
                   return at(a3, {k, m, n}, h, i, j) / static_cast<double>(one.host[0]);
                 }),
                 tol);
  }
  SECTION("a rank-1 output with a one-element operand (the strided kernel, stride 0)") {
    const et::Tensor<float, 1, Gpu> z = c1.gpu * one.gpu - one.gpu;
    const et::Tensor<float, 1, et::Cpu> z_cpu = c1.cpu * one.cpu - one.cpu;
    const auto u = static_cast<double>(one.host[0]);
    check_result(z, z_cpu, reference(1, 1, n, [&](auto, auto, auto j) { return at(c1, {1, 1, n}, 0, 0, j) * u - u; }),
                 tol);
  }
  SECTION("assigning a lower-rank expression broadcasts into the destination") {
    auto z = et::empty<float>(et::cuda<0>, {k, m, n});
    auto z_cpu = et::empty<float>(et::cpu, {k, m, n});
    z = c1.gpu * 3 + column.gpu;
    z_cpu = c1.cpu * 3 + column.cpu;
    check_result(z, z_cpu, reference(k, m, n, [&](auto h, auto i, auto j) {
                   return at(c1, {1, 1, n}, h, i, j) * 3 + at(column, {1, m, 1}, h, i, j);
                 }),
                 tol);
  }
}
