// Fused elementwise expressions on the GPU, continued (test_elementwise.cu has the
// operations): shapes that do not broadcast, non-contiguous and misaligned operands,
// assignment forms and aliasing, and CUPTI-counted launches (arrays past 32-bit offsets:
// test_large_arrays.cu).
#include "elementwise_helpers.hpp"

TEST_CASE("shapes that do not broadcast throw ShapeError", "[elementwise][broadcast]") {
  const auto a = et::zeros<float>(et::cuda<0>, {2, 3});
  const auto b = et::zeros<float>(et::cuda<0>, {4});
  CHECK_THROWS_AS(a + b, et::ShapeError);
  CHECK_THROWS_WITH(a * b, Contains("[2, 3]") && Contains("[4]"));
  auto z = et::zeros<float>(et::cuda<0>, {2, 4});
  CHECK_THROWS_AS(z = a * 2, et::ShapeError);  // [2, 3] does not fit [2, 4]
  auto narrow = et::zeros<float>(et::cuda<0>, {2, 1});
  CHECK_THROWS_AS(narrow += a, et::ShapeError);  // the sum is [2, 3], the destination [2, 1]
}

TEST_CASE("non-contiguous and misaligned operands take the strided and unvectorized paths",
          "[elementwise][layout]") {
  const auto extents = GENERATE(values<std::array<std::int64_t, 2>>({{1, 1}, {2, 3}, {17, 33}, {128, 127}, {1000, 1003}}));
  const std::int64_t m = extents[0], n = extents[1];
  CAPTURE(m, n);
  const auto count = static_cast<std::size_t>(m * n);

  SECTION("transposed operands, every element type") {
    // base is [n, m]; its transpose is the [m, n] view with strides {1, m}.
    auto check_type = [&](auto type_tag, double lo, double hi) {
      using T = decltype(type_tag);
      CAPTURE(sizeof(T), std::is_integral_v<T>);
      const auto base = random_sample<T>(et::Shape<2>{n, m}, 6000, lo, hi);
      const auto other = random_sample<T>(et::Shape<2>{m, n}, 6001, lo, hi);
      const auto transposed = view(base.gpu, 0, {m, n}, {1, m});
      const auto transposed_cpu = view(base.cpu, 0, {m, n}, {1, m});
      CHECK(transposed.is_contiguous() == (m == 1 || n == 1));
      const et::Tensor<T, 2, Gpu> z = et::maximum(transposed, other.gpu);
      const et::Tensor<T, 2, et::Cpu> z_cpu = et::maximum(transposed_cpu, other.cpu);
      std::vector<double> expected(count);
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          const auto t = base.host[static_cast<std::size_t>(j * m + i)], o = other.host[static_cast<std::size_t>(i * n + j)];
          expected[static_cast<std::size_t>(i * n + j)] = static_cast<double>(t > o ? t : o);
        }
      check_result(z, z_cpu, expected, exact);
    };
    check_type(float{}, -3, 3);
    check_type(double{}, -3, 3);
    check_type(std::int32_t{}, -1000, 1000);
    check_type(std::int64_t{}, -1000, 1000);
    check_type(bool{}, 0, 1);
  }
  SECTION("a transposed operand in a float chain") {
    const auto base = random_sample<float>(et::Shape<2>{n, m}, 6002, -3, 3);
    const auto other = random_sample<float>(et::Shape<2>{m, n}, 6003, -3, 3);
    const et::Tensor<float, 2, Gpu> z = et::tanh(view(base.gpu, 0, {m, n}, {1, m}) * 2.0f - other.gpu);
    const et::Tensor<float, 2, et::Cpu> z_cpu = et::tanh(view(base.cpu, 0, {m, n}, {1, m}) * 2.0f - other.cpu);
    std::vector<double> expected(count);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        expected[static_cast<std::size_t>(i * n + j)] =
            std::tanh(base.host[static_cast<std::size_t>(j * m + i)] * 2.0 - other.host[static_cast<std::size_t>(i * n + j)]);
    check_result(z, z_cpu, expected, transcendental_tolerance<float>());
  }
  SECTION("a transposed destination") {
    const auto source = random_sample<float>(et::Shape<2>{m, n}, 6004, -3, 3);
    auto storage = et::zeros<float>(et::cuda<0>, {n, m});
    auto storage_cpu = et::zeros<float>(et::cpu, {n, m});
    view(storage, 0, {m, n}, {1, m}) = source.gpu * 3 + 1;  // writes through the view
    view(storage_cpu, 0, {m, n}, {1, m}) = source.cpu * 3 + 1;
    std::vector<double> expected(count);  // storage[j][i] = 3 * source[i][j] + 1
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j)
        expected[static_cast<std::size_t>(j * m + i)] = 3.0 * source.host[static_cast<std::size_t>(i * n + j)] + 1;
    check_result(storage, storage_cpu, expected, arithmetic_tolerance<float>());
  }
  SECTION("a permuted rank-3 view") {
    // base is [2, m, n]; the view reads it as [n, 2, m] (axes 2, 0, 1).
    const auto base = random_sample<double>(et::Shape<3>{2, m, n}, 6005, -3, 3);
    const et::Shape<3> permuted_shape{n, 2, m}, permuted_strides{1, m * n, n};
    const et::Tensor<double, 3, Gpu> z = view(base.gpu, 0, permuted_shape, permuted_strides) - 0.5;
    const et::Tensor<double, 3, et::Cpu> z_cpu = view(base.cpu, 0, permuted_shape, permuted_strides) - 0.5;
    std::vector<double> expected;
    for (std::int64_t a = 0; a < n; ++a)
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t c = 0; c < m; ++c) expected.push_back(base.host[static_cast<std::size_t>((b * m + c) * n + a)] - 0.5);
    check_result(z, z_cpu, expected, exact);
  }
  SECTION("operands and destination offset by one element (misaligned)") {
    const auto len = static_cast<std::int64_t>(count);
    auto check_type = [&](auto type_tag) {
      using T = decltype(type_tag);
      CAPTURE(sizeof(T));
      const auto padded = random_sample<T>(et::Shape<1>{len + 1}, 6006, -3, 3);
      const auto aligned = random_sample<T>(et::Shape<1>{len}, 6007, -3, 3);
      const auto shifted = view(padded.gpu, 1, {len}, {1});
      const auto shifted_cpu = view(padded.cpu, 1, {len}, {1});
      const et::Tensor<T, 1, Gpu> z = shifted * 3 - aligned.gpu;
      const et::Tensor<T, 1, et::Cpu> z_cpu = shifted_cpu * 3 - aligned.cpu;
      std::vector<double> expected(count);
      for (std::size_t i = 0; i < count; ++i)
        expected[i] = 3.0 * static_cast<double>(padded.host[i + 1]) - static_cast<double>(aligned.host[i]);
      check_result(z, z_cpu, expected, arithmetic_tolerance<T>());
      // A misaligned destination: element 0 of the storage must stay untouched.
      auto destination = et::full<T>(et::cuda<0>, {len + 1}, -7);
      view(destination, 1, {len}, {1}) = aligned.gpu + 1;
      std::vector<double> expected_destination{-7.0};
      for (std::size_t i = 0; i < count; ++i) expected_destination.push_back(static_cast<double>(aligned.host[i]) + 1);
      check_close(destination.to_vector(), expected_destination, arithmetic_tolerance<T>(), "misaligned destination");
    };
    check_type(float{});
    check_type(double{});
  }
}

TEST_CASE("operands broadcast along leading or trailing axes read at (i / div) % mod",
          "[elementwise][broadcast]") {
  // Each case: output [a, b, c], and an operand of the given shape broadcast into it; the
  // GPU's linear kernel reads it wrapped (vectorized where div or mod allow), the CPU
  // walks coordinates: the results must agree exactly.
  auto check = [](auto type_tag, const et::Shape<3>& out, const et::Shape<3>& operand, std::uint64_t seed) {
    using T = decltype(type_tag);
    CAPTURE(out, operand, sizeof(T));
    const auto m = random_sample<T>(out, seed, -4, 4);
    const auto b = random_sample<T>(operand, seed + 1, -4, 4);
    const et::Tensor<T, 3, Gpu> z = m.gpu * 2 + b.gpu;
    const et::Tensor<T, 3, Gpu> z2 = et::maximum(b.gpu, m.gpu) - b.gpu;  // the operand first, twice
    const et::Tensor<T, 3, et::Cpu> want = m.cpu * 2 + b.cpu;
    const et::Tensor<T, 3, et::Cpu> want2 = et::maximum(b.cpu, m.cpu) - b.cpu;
    CHECK(z.to_vector() == want.to_vector());
    CHECK(z2.to_vector() == want2.to_vector());
  };
  const std::vector<std::array<et::Shape<3>, 2>> cases{
      {et::Shape<3>{5, 64, 128}, et::Shape<3>{1, 1, 128}},   // a row vector: mod 128, vectorized
      {et::Shape<3>{5, 64, 128}, et::Shape<3>{1, 64, 1}},    // a column: div 128 % 4 == 0, splat
      {et::Shape<3>{7, 33, 129}, et::Shape<3>{1, 1, 129}},   // odd: scalar wrapped reads
      {et::Shape<3>{7, 33, 129}, et::Shape<3>{7, 1, 1}},     // div 33 * 129
      {et::Shape<3>{6, 3, 20}, et::Shape<3>{1, 3, 1}},       // a per-channel bias: div 20, mod 3
      {et::Shape<3>{6, 3, 20}, et::Shape<3>{1, 3, 20}},      // a repeated matrix
      {et::Shape<3>{2, 3, 4}, et::Shape<3>{1, 1, 1}},        // one element
      {et::Shape<3>{1, 1, 7}, et::Shape<3>{1, 1, 1}},
      {et::Shape<3>{0, 3, 4}, et::Shape<3>{1, 3, 4}},        // empty
      {et::Shape<3>{3, 1, 4}, et::Shape<3>{1, 1, 4}}};
  std::uint64_t seed = 7000;
  for (const auto& [out, operand] : cases) {
    check(float{}, out, operand, seed += 2);
    check(double{}, out, operand, seed += 2);
    check(et::half{}, out, operand, seed += 2);
    check(std::int32_t{}, out, operand, seed += 2);
  }
  // A broadcast operand beside a transposed one: the strided kernel, the same answer.
  const auto x = random_sample<float>(et::Shape<2>{40, 30}, 7100, -4, 4);
  const auto row = random_sample<float>(et::Shape<2>{1, 40}, 7101, -4, 4);
  const et::Tensor<float, 2, Gpu> mixed = x.gpu.transpose(0, 1) + row.gpu;
  const et::Tensor<float, 2, et::Cpu> mixed_cpu = x.cpu.transpose(0, 1) + row.cpu;
  CHECK(mixed.to_vector() == mixed_cpu.to_vector());
  // Misaligned (an offset view): wrapped but not vectorized.
  const auto wide = random_sample<float>(et::Shape<2>{9, 65}, 7102, -4, 4);
  const auto shifted = wide.gpu.slice(1, 1, 65);  // [9, 64], rows 65 apart: strided
  const auto bias = random_sample<float>(et::Shape<1>{65}, 7103, -4, 4);
  const auto bias_view = bias.gpu.slice(0, 1, 65);  // 4 bytes past an aligned start
  const et::Tensor<float, 2, Gpu> dense = shifted * 1.0f;
  const et::Tensor<float, 2, Gpu> offset_sum = dense + bias_view;
  const et::Tensor<float, 2, et::Cpu> offset_want = et::Tensor<float, 2, et::Cpu>(dense.to(et::cpu)) + bias.cpu.slice(0, 1, 65);
  CHECK(offset_sum.to_vector() == offset_want.to_vector());
}

TEST_CASE("operands read transposed go through shared-memory tiles", "[elementwise][layout]") {
  // Tiles of 32 x 32 of the last two axes; the results must equal the CPU's exactly.
  for (const auto& [m, n] : std::vector<std::array<std::int64_t, 2>>{{16, 16}, {33, 47}, {64, 64}, {100, 257}, {15, 300}}) {
    CAPTURE(m, n);
    const auto a = random_sample<float>(et::Shape<2>{n, m}, 7200, -4, 4);  // a.T is [m, n]
    const auto b = random_sample<float>(et::Shape<2>{n, m}, 7201, -4, 4);
    const auto c = random_sample<float>(et::Shape<2>{m, n}, 7202, -4, 4);
    const auto at = a.gpu.transpose(0, 1), bt = b.gpu.transpose(0, 1);
    const auto at_cpu = a.cpu.transpose(0, 1), bt_cpu = b.cpu.transpose(0, 1);
    // One and two staged operands, a shared subexpression, a generator.
    const et::Tensor<float, 2, Gpu> one = at + c.gpu;
    const et::Tensor<float, 2, Gpu> two = at * bt - c.gpu * 0.5f;
    const auto shared = et::exp(at - bt);
    const et::Tensor<float, 2, Gpu> bound = shared * shared + shared;
    // column_index: a generator leaf (0, 1, ..., n - 1 along the last axis; no tensor).
    const et::Tensor<float, 2, Gpu> generated = at + et::cast<float>(et::detail::column_index<Gpu>(n));
    CHECK(one.to_vector() == et::Tensor<float, 2, et::Cpu>(at_cpu + c.cpu).to_vector());
    // a * b - c * 0.5f: nvcc contracts it into an fma, g++ need not.
    check_close(two.to_vector(), as_doubles(et::Tensor<float, 2, et::Cpu>(at_cpu * bt_cpu - c.cpu * 0.5f).to_vector()),
                arithmetic_tolerance<float>(), "two transposed operands");
    const auto shared_cpu = et::exp(at_cpu - bt_cpu);
    check_close(bound.to_vector(), as_doubles(et::Tensor<float, 2, et::Cpu>(shared_cpu * shared_cpu + shared_cpu).to_vector()),
                transcendental_tolerance<float>(), "shared subexpression of transposed operands");
    CHECK(generated.to_vector() ==
          et::Tensor<float, 2, et::Cpu>(at_cpu + et::cast<float>(et::detail::column_index<et::Cpu>(n))).to_vector());
    // Written into a transposed destination (itself strided), and in place.
    auto out = et::zeros<float>(et::cuda<0>, {n, m});
    auto out_t = out.transpose(0, 1);
    out_t = at + c.gpu;
    CHECK(out_t.contiguous().to_vector() == one.to_vector());
    auto in_place = c.gpu.clone();
    in_place += at;
    CHECK(in_place.to_vector() == one.to_vector());
  }
  // Rank 3 (tiles per leading index), double, the last two axes swapped.
  const auto x = random_sample<double>(et::Shape<3>{3, 70, 40}, 7210, -2, 2);
  const auto y = random_sample<double>(et::Shape<3>{3, 40, 70}, 7211, -2, 2);
  const et::Tensor<double, 3, Gpu> z = et::exp(x.gpu.transpose(1, 2)) * y.gpu;
  const et::Tensor<double, 3, et::Cpu> want = et::exp(x.cpu.transpose(1, 2)) * y.cpu;
  check_close(z.to_vector(), as_doubles(want.to_vector()), transcendental_tolerance<double>(), "rank 3, double");
}

TEST_CASE("assignment forms: z = expr, compound assignment, aliasing", "[elementwise][assign]") {
  const std::int64_t n = GENERATE(values<std::int64_t>({1, 3, 127, 1000003}));
  CAPTURE(n);
  const auto count = static_cast<std::size_t>(n);
  const Tolerance tol = arithmetic_tolerance<float>();
  const auto x = random_sample<float>(et::Shape<1>{n}, 7000, -3, 3);
  const auto y = random_sample<float>(et::Shape<1>{n}, 7001, 0.5, 3);

  SECTION("z = expr evaluates into z's existing storage") {
    auto z = et::empty<float>(et::cuda<0>, {n});
    const auto storage_before = z.storage();
    z = x.gpu * y.gpu + 1;
    CHECK(z.storage() == storage_before);
    std::vector<double> expected(count);
    for (std::size_t i = 0; i < count; ++i) expected[i] = double(x.host[i]) * y.host[i] + 1;
    check_close(z.to_vector(), expected, tol, "z = x * y + 1");
  }
  SECTION("z += expr, -=, *=, /=") {
    auto z = et::from_vector(et::cuda<0>, x.host);
    const auto storage_before = z.storage();
    z += y.gpu * 2;
    z -= 0.25f;
    z *= y.gpu;
    z /= 4;
    CHECK(z.storage() == storage_before);
    std::vector<double> expected(count);
    for (std::size_t i = 0; i < count; ++i) expected[i] = ((double(x.host[i]) + 2.0 * y.host[i]) - 0.25) * y.host[i] / 4;
    check_close(z.to_vector(), expected, {4 * tol.rel, 4 * tol.abs}, "compound assignments");
  }
  SECTION("x = x * 2 + 1 reads and writes the same elements") {
    auto z = et::from_vector(et::cuda<0>, x.host);
    z = z * 2 + 1;
    std::vector<double> expected(count);
    for (std::size_t i = 0; i < count; ++i) expected[i] = 2.0 * x.host[i] + 1;
    check_close(z.to_vector(), expected, tol, "x = x * 2 + 1");
  }
  SECTION("an overlapping alias reads the old values: a = transpose(a) - a") {
    const std::int64_t side = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::sqrt(double(n))));
    const auto s = static_cast<std::size_t>(side);
    CAPTURE(side);
    const std::vector<float> start = random_values<float>(s * s, 7002, -3, 3);
    auto a = et::from_vector(et::cuda<0>, start, {side, side});
    a = view(a, 0, {side, side}, {1, side}) - a;
    std::vector<double> expected(s * s);
    for (std::size_t i = 0; i < s; ++i)
      for (std::size_t j = 0; j < s; ++j) expected[i * s + j] = double(start[j * s + i]) - start[i * s + j];
    check_close(a.to_vector(), expected, tol, "a = transpose(a) - a");
  }
  SECTION("z = scalar fills") {
    auto z = et::empty<double>(et::cuda<0>, {n});
    z = 2.75f;
    check_close(z.to_vector(), std::vector<double>(count, 2.75), exact, "z = 2.75f");
  }
  SECTION("assigning into another element type converts") {
    auto wide = et::empty<double>(et::cuda<0>, {n});
    wide = x.gpu * 3;  // computed in float, stored as double
    auto narrow = et::empty<float>(et::cuda<0>, {n});
    narrow = et::cast<std::int32_t>(x.gpu * 4) + 1;  // int32 values into float storage
    std::vector<double> expected_wide(count), expected_narrow(count);
    for (std::size_t i = 0; i < count; ++i) {
      expected_wide[i] = static_cast<double>(x.host[i] * 3.0f);
      expected_narrow[i] = std::trunc(4.0 * x.host[i]) + 1;
    }
    check_close(wide.to_vector(), expected_wide, exact, "float expression into double storage");
    check_close(narrow.to_vector(), expected_narrow, exact, "int32 expression into float storage");
  }
}

TEMPLATE_TEST_CASE("maximum, minimum, relu and clamp propagate NaN", "[elementwise][nan]", float, double) {
  using T = TestType;
  constexpr double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> a_pattern{nan, 1.0, nan, -2.0, inf, -inf, 0.5, -0.0, 3.0, nan, -1.5};
  const std::vector<double> b_pattern{1.0, nan, nan, 3.0, nan, 2.0, -0.5, 0.0, -inf, -4.0, 2.5};
  // Long enough that NaNs land in every lane of the vectorized path and in the tail.
  const std::size_t count = 1003;
  std::vector<T> a(count), b(count);
  for (std::size_t i = 0; i < count; ++i) {
    a[i] = static_cast<T>(a_pattern[i % a_pattern.size()]);
    b[i] = static_cast<T>(b_pattern[(i / 2) % b_pattern.size()]);
  }
  const auto ga = et::from_vector(et::cuda<0>, a), gb = et::from_vector(et::cuda<0>, b);
  const auto ca = et::from_vector(et::cpu, a), cb = et::from_vector(et::cpu, b);
  auto expect = [&](auto f) {
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) out[i] = f(double(a[i]), double(b[i]));
    return out;
  };
  auto nan_max = [](double x, double y) { return std::isnan(x) || std::isnan(y) ? nan : std::max(x, y); };
  auto nan_min = [](double x, double y) { return std::isnan(x) || std::isnan(y) ? nan : std::min(x, y); };

  SECTION("maximum") { check_result(et::eval(et::maximum(ga, gb)), et::eval(et::maximum(ca, cb)), expect(nan_max), exact); }
  SECTION("minimum") { check_result(et::eval(et::minimum(ga, gb)), et::eval(et::minimum(ca, cb)), expect(nan_min), exact); }
  SECTION("maximum with a scalar") {
    check_result(et::eval(et::maximum(ga, 0)), et::eval(et::maximum(ca, 0)),
                 expect([&](double x, double) { return nan_max(x, 0.0); }), exact);
  }
  SECTION("relu") {
    check_result(et::eval(et::relu(ga)), et::eval(et::relu(ca)),
                 expect([](double x, double) { return std::isnan(x) ? nan : (x < 0 ? 0.0 : x); }), exact);
  }
  SECTION("clamp") {
    check_result(et::eval(et::clamp(ga, -1, 1)), et::eval(et::clamp(ca, -1, 1)),
                 expect([&](double x, double) { return nan_min(nan_max(x, -1.0), 1.0); }), exact);
  }
}

namespace {
__global__ void control_kernel(float* data, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] += 1.0f;
}

bool any_name_contains(const std::vector<std::string>& names, const std::string& part) {
  return std::any_of(names.begin(), names.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}
}  // namespace

TEST_CASE("one fused assignment is one kernel launch, counted by CUPTI", "[elementwise][cupti]") {
  const std::int64_t rows = 1001, cols = 1003, n = rows * cols;
  const auto x = et::randn<float>(et::cuda<0>, {n}, 1), y = et::randn<float>(et::cuda<0>, {n}, 2),
             w = et::randn<float>(et::cuda<0>, {n}, 3);
  const std::vector<float> hx = x.to_vector(), hy = y.to_vector(), hw = w.to_vector();
  // chain_ref at element index_of(i) of the inputs, for i < count.
  auto expected_chain = [&](std::size_t count, auto index_of) {
    std::vector<double> out(count);
    for (std::size_t i = 0; i < count; ++i) {
      const std::size_t j = index_of(i);
      out[i] = chain_ref(hx[j], hy[j], hw[j]);
    }
    return out;
  };
  const Tolerance tol = chain_tolerance<float>();

  SECTION("a broadcast row (the linear kernel) and a transposed operand (tiles): one kernel each") {
    const auto m = et::randn<float>(et::cuda<0>, {rows, cols}, 4);
    const auto row = et::randn<float>(et::cuda<0>, {cols}, 5);
    const auto other = et::randn<float>(et::cuda<0>, {cols, rows}, 6);
    auto z = et::empty<float>(et::cuda<0>, {rows, cols});
    for (int variant = 0; variant < 2; ++variant) {
      test::LaunchCounter counter;
      if (variant == 0) z = m + row;
      else z = other.transpose(0, 1) + m;
      const test::Launches seen = counter.stop();
      CAPTURE(variant, seen.kernel_names);
      CHECK(seen.kernels() == 1);
      CHECK(any_name_contains(seen.kernel_names, variant == 0 ? "elementwise_linear" : "elementwise_strided"));
    }
  }
  SECTION("Tensor z = chain(x, y, w): 17 operations, 3 inputs, one kernel") {
    test::LaunchCounter counter;
    const et::Tensor<float, 1, Gpu> z = chain(x, y, w);
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 1);
    CHECK(any_name_contains(seen.kernel_names, "elementwise_linear"));
    check_close(z.to_vector(), expected_chain(hx.size(), [](std::size_t i) { return i; }), tol, "chain");
  }
  SECTION("z = chain(x, y, w) into existing storage, then z += chain(x, y, w)") {
    auto z = et::empty<float>(et::cuda<0>, {n});
    {
      test::LaunchCounter counter;
      z = chain(x, y, w);
      const test::Launches seen = counter.stop();
      CAPTURE(seen.kernel_names);
      CHECK(seen.kernels() == 1);
    }
    {
      test::LaunchCounter counter;
      z += chain(x, y, w);
      const test::Launches seen = counter.stop();
      CAPTURE(seen.kernel_names);
      CHECK(seen.kernels() == 1);
    }
    std::vector<double> twice = expected_chain(hx.size(), [](std::size_t i) { return i; });
    for (double& v : twice) v *= 2;
    check_close(z.to_vector(), twice, {2 * tol.rel, 2 * tol.abs}, "z = chain; z += chain");
  }
  SECTION("the chain over transposed views (strided path)") {
    // x, y, w read as [cols, rows] storage transposed to [rows, cols].
    const et::Shape<2> shape{rows, cols}, strides{1, rows};
    test::LaunchCounter counter;
    const et::Tensor<float, 2, Gpu> z = chain(view(x, 0, shape, strides), view(y, 0, shape, strides), view(w, 0, shape, strides));
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 1);
    CHECK(any_name_contains(seen.kernel_names, "elementwise_strided"));
    const auto r = static_cast<std::size_t>(rows), c = static_cast<std::size_t>(cols);
    check_close(z.to_vector(), expected_chain(hx.size(), [&](std::size_t i) { return (i % c) * r + i / c; }), tol, "strided chain");
  }
  SECTION("the chain over operands offset by one element (unvectorized linear path)") {
    const std::int64_t len = n - 1;
    test::LaunchCounter counter;
    const et::Tensor<float, 1, Gpu> z = chain(view(x, 1, {len}, {1}), view(y, 1, {len}, {1}), view(w, 1, {len}, {1}));
    const test::Launches seen = counter.stop();
    CAPTURE(seen.kernel_names);
    CHECK(seen.kernels() == 1);
    CHECK(any_name_contains(seen.kernel_names, "elementwise_linear"));
    check_close(z.to_vector(), expected_chain(hx.size() - 1, [](std::size_t i) { return i + 1; }), tol,
                "misaligned chain");
  }
  SECTION("creation: full, ones, rand, randn, arange, linspace launch one kernel; zeros, empty and from_vector none") {
    auto count_kernels = [](auto make) {
      test::LaunchCounter counter;
      const auto made = make();
      const test::Launches seen = counter.stop();
      CHECK(made.numel() > 0);
      return seen;
    };
    CHECK(count_kernels([] { return et::full<float>(et::cuda<0>, {1000, 3}, 1.5f); }).kernels() == 1);
    CHECK(count_kernels([] { return et::ones<std::int64_t>(et::cuda<0>, {1000}); }).kernels() == 1);
    CHECK(count_kernels([] { return et::rand<float>(et::cuda<0>, {4097}, 5); }).kernels() == 1);
    CHECK(count_kernels([] { return et::randn<double>(et::cuda<0>, {33, 65}, 6); }).kernels() == 1);
    CHECK(count_kernels([] { return et::arange<std::int32_t>(et::cuda<0>, 5000); }).kernels() == 1);
    CHECK(count_kernels([] { return et::linspace<float>(et::cuda<0>, -1.0, 1.0, 777); }).kernels() == 1);
    const test::Launches zeros = count_kernels([] { return et::zeros<float>(et::cuda<0>, {1000, 3}); });
    CHECK(zeros.kernels() == 0);
    CHECK(zeros.memsets == 1);
    CHECK(count_kernels([] { return et::empty<float>(et::cuda<0>, {1000}); }).kernels() == 0);
    const test::Launches uploaded = count_kernels([&] { return et::from_vector(et::cuda<0>, hx); });
    CHECK(uploaded.kernels() == 0);
    CHECK(uploaded.memcpys >= 1);
  }
  SECTION("controls: the counter sees every kernel") {
    {
      auto scratch = et::zeros<float>(et::cuda<0>, {1000});
      test::LaunchCounter counter;
      control_kernel<<<4, 256>>>(scratch.data(), 1000);
      REQUIRE(cudaGetLastError() == cudaSuccess);
      CHECK(counter.stop().kernels() == 1);
      CHECK(scratch.to_vector() == std::vector<float>(1000, 1.0f));
    }
    {
      test::LaunchCounter counter;
      const et::Tensor<float, 1, Gpu> a = x + y;
      const et::Tensor<float, 1, Gpu> b = a * w;
      CHECK(counter.stop().kernels() == 2);
    }
    {
      // A destination that overlaps an operand elementwise-differently is evaluated into a
      // temporary and copied back: two kernels, by design.
      auto matrix = et::randn<float>(et::cuda<0>, {300, 300}, 9);
      test::LaunchCounter counter;
      matrix = view(matrix, 0, {300, 300}, {1, 300}) + matrix;
      CHECK(counter.stop().kernels() == 2);
    }
  }
}
