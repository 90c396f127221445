// Fused elementwise expressions on the GPU, checked against an independent reference:
// plain double-precision loops over host copies of the inputs (and, as a second
// opinion, etensor's own CPU backend). In CUB's test style: edge sizes (0, 1, 2, 3, 127,
// 1000003) plus random ones, one SECTION per operation, CAPTUREd inputs, seeded data.
// The launch counts come from CUPTI, not from etensor (cupti_counter.hpp).
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "cupti_counter.hpp"

namespace {

using Gpu = et::Cuda<0>;
using Catch::Matchers::Contains;

// ---------------------------------------------------------------------------------
// Host data and comparisons
// ---------------------------------------------------------------------------------

/// |got - expected| <= abs + rel * |expected|. NaN matches only NaN; infinities only themselves.
struct Tolerance {
  double rel = 0, abs = 0;
};
constexpr Tolerance exact{};

// Float: one correctly rounded operation is within 6e-8 relative; short chains and
// cancellation near zero need an absolute floor. CUDA's float math functions are within
// 1-4 ulp. Double: the same reasoning at 2^-53.
template <class T>
constexpr Tolerance arithmetic_tolerance() {
  if constexpr (std::is_same_v<T, float>) return {1e-6, 1e-6};
  else return {1e-14, 1e-14};
}
template <class T>
constexpr Tolerance transcendental_tolerance() {
  if constexpr (std::is_same_v<T, float>) return {1e-5, 1e-6};
  else return {1e-12, 1e-14};
}

/// The 17-operation chain: errors of its terms add up, and its result can cancel to near zero.
template <class T>
constexpr Tolerance chain_tolerance() {
  if constexpr (std::is_same_v<T, float>) return {2e-5, 5e-6};
  else return {1e-12, 1e-13};
}

bool close(double got, double expected, Tolerance tol) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= tol.abs + tol.rel * std::fabs(expected);
}

/// One assertion for a whole result; on failure it names how many elements differ and
/// the first of them.
template <class R>
void check_close(const std::vector<R>& got, const std::vector<double>& expected, Tolerance tol,
                 const char* against) {
  REQUIRE(got.size() == expected.size());
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(static_cast<double>(got[i]), expected[i], tol) && mismatches++ == 0) first = i;
  }
  std::ostringstream report;
  report.precision(17);
  report << against << ": " << mismatches << " of " << got.size() << " elements outside rel " << tol.rel
         << " + abs " << tol.abs;
  if (mismatches) report << "; first at index " << first << ": got " << static_cast<double>(got[first])
                         << ", expected " << expected[first];
  INFO(report.str());
  CHECK(mismatches == 0);
}

template <class R>
std::vector<double> as_doubles(const std::vector<R>& values) {
  std::vector<double> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<double>(values[i]);
  return out;
}

/// Seeded host values in [lo, hi] (integers), [lo, hi) (floating), or fair coins (bool).
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::mt19937_64 engine(seed);
  std::vector<T> out(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution coin(0.5);
    for (std::size_t i = 0; i < n; ++i) out[i] = coin(engine);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<long long> dist(static_cast<long long>(lo), static_cast<long long>(hi));
    for (auto& v : out) v = static_cast<T>(dist(engine));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& v : out) v = static_cast<T>(dist(engine));
  }
  return out;
}

/// The same values three ways: on the host (for the reference), on the GPU, on the CPU backend.
template <class T, int R>
struct Sample {
  std::vector<T> host;
  et::Tensor<T, R, Gpu> gpu;
  et::Tensor<T, R, et::Cpu> cpu;
};

template <class T, std::size_t R>
Sample<T, int(R)> sample(const std::array<std::int64_t, R>& shape, std::vector<T> values) {
  Sample<T, int(R)> s{std::move(values), {}, {}};
  s.gpu = et::from_vector(et::cuda<0>, s.host, shape);
  s.cpu = et::from_vector(et::cpu, s.host, shape);
  return s;
}

template <class T, std::size_t R>
Sample<T, int(R)> random_sample(const std::array<std::int64_t, R>& shape, std::uint64_t seed, double lo, double hi) {
  std::size_t count = 1;
  for (auto extent : shape) count *= static_cast<std::size_t>(extent);
  return sample<T>(shape, random_values<T>(count, seed, lo, hi));
}

/// Compares a GPU result with the double reference and with etensor's CPU result.
template <class R, int Rank>
void check_result(const et::Tensor<R, Rank, Gpu>& on_gpu, const et::Tensor<R, Rank, et::Cpu>& on_cpu,
                  const std::vector<double>& expected, Tolerance tol) {
  CHECK(on_gpu.shape() == on_cpu.shape());
  const std::vector<R> got = on_gpu.to_vector();
  check_close(got, expected, tol, "GPU vs double-precision host reference");
  check_close(got, as_doubles(on_cpu.to_vector()), Tolerance{2 * tol.rel, 2 * tol.abs}, "GPU vs etensor's CPU backend");
}

// ---------------------------------------------------------------------------------
// One operation = one etensor expression over (x, y, p) + its double reference.
// ---------------------------------------------------------------------------------

/// x and y in [-3, 3) with every third y equal to x (ties for == <= >=); p in [0.05, 5)
/// (positive: log, sqrt, pow and division). Integers: x, y in [-1000, 1000], p in [1, 50].
template <class T>
struct Operands {
  Sample<T, 1> x, y, p;
};

template <class T>
Operands<T> make_operands(std::int64_t n, std::uint64_t seed) {
  const auto count = static_cast<std::size_t>(n);
  const bool integral = std::is_integral_v<T>;
  std::vector<T> x = random_values<T>(count, seed, integral ? -1000 : -3, integral ? 1000 : 3);
  std::vector<T> y = random_values<T>(count, seed + 1, integral ? -1000 : -3, integral ? 1000 : 3);
  for (std::size_t i = 0; i < count; i += 3) y[i] = x[i];
  std::vector<T> p = random_values<T>(count, seed + 2, integral ? 1 : 0.05, integral ? 50 : 5);
  const et::Shape<1> shape{n};
  return {sample<T>(shape, std::move(x)), sample<T>(shape, std::move(y)), sample<T>(shape, std::move(p))};
}

// The etensor side of an operation (x, y, p are tensors) and the reference side (doubles).
#define ET_EXPR(...) \
  []([[maybe_unused]] const auto& x, [[maybe_unused]] const auto& y, [[maybe_unused]] const auto& p) { return __VA_ARGS__; }
#define HOST_REF(...) \
  []([[maybe_unused]] double x, [[maybe_unused]] double y, [[maybe_unused]] double p) { return __VA_ARGS__; }

/// Evaluates make(x, y, p) on the GPU and on the CPU backend; checks the result's element
/// type (type promotion) and its values against reference(x, y, p) in double.
template <class Expected, class T, class Make, class Reference>
void check_op(const Operands<T>& in, Make make, Reference reference, Tolerance tol) {
  const auto on_gpu = et::eval(make(in.x.gpu, in.y.gpu, in.p.gpu));
  const auto on_cpu = et::eval(make(in.x.cpu, in.y.cpu, in.p.cpu));
  using R = typename std::remove_cvref_t<decltype(on_gpu)>::value_type;
  STATIC_REQUIRE(std::is_same_v<R, Expected>);
  std::vector<double> expected(in.x.host.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    expected[i] = static_cast<double>(reference(static_cast<double>(in.x.host[i]), static_cast<double>(in.y.host[i]),
                                                static_cast<double>(in.p.host[i])));
  check_result(on_gpu, on_cpu, expected, tol);
}

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double relu_ref(double x) { return x < 0 ? 0.0 : x; }

/// The benchmark's chain (bench/elementwise.cu): 17 operations over 3 inputs.
auto chain(const auto& x, const auto& y, const auto& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f -
         et::sqrt(et::square(y) + 1.0f) / (1.0f + et::relu(w));
}
double chain_ref(double x, double y, double w) {
  return std::tanh(x * 0.5 + y) * sigmoid_ref(w) + std::exp(-std::fabs(x)) * 0.25 -
         std::sqrt(y * y + 1.0) / (1.0 + relu_ref(w));
}

/// A view of another tensor's storage with its own layout (a transpose, an offset).
template <std::size_t N, class T, int R, class D>
et::Tensor<T, int(N), D> view(const et::Tensor<T, R, D>& base, std::int64_t offset,
                              const std::array<std::int64_t, N>& shape, const std::array<std::int64_t, N>& strides) {
  return et::Tensor<T, int(N), D>(base.storage(), offset, shape, strides);
}
template <std::size_t N, class T, int R, class D>
et::Tensor<T, int(N), D> view(const et::Tensor<T, R, D>& base, std::int64_t offset, const std::int64_t (&shape)[N],
                              const std::int64_t (&strides)[N]) {
  std::array<std::int64_t, N> shape_array{}, strides_array{};
  std::copy(shape, shape + N, shape_array.begin());
  std::copy(strides, strides + N, strides_array.begin());
  return view(base, offset, shape_array, strides_array);
}

/// Row-major element index of coordinate (i0, i1, i2) in an operand of shape `shape`
/// (rank 3, leading 1s for lower ranks) read with NumPy broadcasting: extent-1 axes stretch.
std::size_t broadcast_index(const std::array<std::int64_t, 3>& shape, std::int64_t i0, std::int64_t i1,
                            std::int64_t i2) {
  const std::int64_t a = shape[0] == 1 ? 0 : i0, b = shape[1] == 1 ? 0 : i1, c = shape[2] == 1 ? 0 : i2;
  return static_cast<std::size_t>((a * shape[1] + b) * shape[2] + c);
}

}  // namespace

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

TEST_CASE("tensors of more than 2^31 elements use 64-bit indices", "[elementwise][large]") {
  constexpr std::size_t needed = std::size_t{40} << 30;
  const et::MemoryInfo memory = et::memory_info(et::cuda<0>);
  // Run where it fits (the lent H100s and H200s); elsewhere exclude [large] by name, so
  // that the test is reported as not run instead of passing without running.
  INFO("the >2^31-element tests want 40 GiB free on cuda:0, and " << (memory.free >> 20) << " MiB are free");
  REQUIRE(memory.free >= needed);
  constexpr std::int64_t two_31 = std::int64_t{1} << 31;

  SECTION("x = x * 2 + 1 over 2^31 + 17 floats (linear path)") {
    const std::int64_t n = two_31 + 17;
    const std::uint64_t seed = 77;
    auto x = et::rand<float>(et::cuda<0>, {n}, seed);
    x = x * 2 + 1;
    // The generator gives element i from (seed, i) alone, so any index can be recomputed
    // on the host; 2 * u is exact and + 1 rounds the same way on both sides.
    const et::detail::UniformGenerator<float> uniform{seed};
    for (const std::int64_t i : {std::int64_t{0}, std::int64_t{1}, n / 2, two_31 - 1, two_31, two_31 + 1, n - 2, n - 1}) {
      CAPTURE(i);
      const float got = view(x, i, {1}, {1}).item();
      CHECK(got == uniform(i) * 2.0f + 1.0f);
    }
  }
  SECTION("a broadcast [65537, 1] + [1, 32769] result (strided path, 64-bit)") {
    const std::int64_t rows = 65537, cols = 32769;  // 2^31 + 98305 elements
    REQUIRE(rows * cols > two_31);
    const auto column = random_sample<float>(et::Shape<2>{rows, 1}, 8000, -3, 3);
    const auto row = random_sample<float>(et::Shape<2>{1, cols}, 8001, -3, 3);
    const et::Tensor<float, 2, Gpu> z = column.gpu - row.gpu;
    const std::int64_t total = rows * cols;
    for (const std::int64_t i : {std::int64_t{0}, cols + 5, total / 2, two_31 - 1, two_31, two_31 + 1, total - 1}) {
      const std::int64_t r = i / cols, c = i % cols;
      CAPTURE(i, r, c);
      const float got = et::Tensor<float, 1, Gpu>(z.storage(), i, {1}, {1}).item();
      CHECK(got == column.host[static_cast<std::size_t>(r)] - row.host[static_cast<std::size_t>(c)]);
    }
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
