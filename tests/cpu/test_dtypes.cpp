// half and bfloat16 on the CPU: conversions (exhaustive over the 16-bit patterns, checked
// against an independent reference rounding and, where the CUDA headers are available,
// against CUDA's own host conversions), the promoted type of every pair of element types
// (statically; their values: the promotion family, test_random.cpp), every elementwise
// operation on every floating type against an fp64 reference, rounding once in fused
// expressions, casts between all types, and creation.
#include "../common/promotion.hpp"
#include "../common/reference.hpp"

#include <et/et.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(ET_HAS_CUDA_RUNTIME)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace {

using test::check_close;
using test::exact;
using test::random_values;
using test::Tolerance;

// ---------------------------------------------------------------------------------
// An independent model of the two formats: decoding with ldexp, rounding by comparing
// with the exact midpoints between neighbours (both exact in double and long double).
// ---------------------------------------------------------------------------------

template <class H>
struct Format;
template <>
struct Format<et::half> {
  static constexpr int mantissa_bits = 10, exponent_bits = 5, bias = 15;
  static constexpr std::uint16_t max_finite = 0x7bff, infinity = 0x7c00;
};
template <>
struct Format<et::bfloat16> {
  static constexpr int mantissa_bits = 7, exponent_bits = 8, bias = 127;
  static constexpr std::uint16_t max_finite = 0x7f7f, infinity = 0x7f80;
};

template <class H>
bool is_nan_pattern(std::uint16_t bits) {
  return (bits & 0x7fffu) > Format<H>::infinity;
}

template <class H>
long double decode(std::uint16_t bits) {
  using F = Format<H>;
  const int exponent = (bits >> F::mantissa_bits) & ((1 << F::exponent_bits) - 1);
  const int mantissa = bits & ((1 << F::mantissa_bits) - 1);
  long double magnitude;
  if (exponent == (1 << F::exponent_bits) - 1) magnitude = mantissa ? std::numeric_limits<long double>::quiet_NaN()
                                                                    : std::numeric_limits<long double>::infinity();
  else if (exponent == 0) magnitude = std::ldexp(static_cast<long double>(mantissa), 1 - F::bias - F::mantissa_bits);
  else magnitude = std::ldexp(static_cast<long double>(mantissa + (1 << F::mantissa_bits)), exponent - F::bias - F::mantissa_bits);
  return (bits & 0x8000u) ? -magnitude : magnitude;
}

/// Round to nearest, ties to even; past the largest finite value's upper midpoint, infinity;
/// NaN gives CUDA's canonical 0x7FFF.
template <class H>
std::uint16_t reference_round(long double x) {
  using F = Format<H>;
  if (std::isnan(x)) return 0x7fff;
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const long double a = std::fabs(x);
  const long double top = decode<H>(F::max_finite);
  if (a >= top + (top - decode<H>(F::max_finite - 1)) / 2) return sign | F::infinity;  // the tie goes to even: inf
  std::uint16_t lo = 0, hi = F::max_finite;  // the largest k with decode(k) <= a
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (decode<H>(mid) <= a) lo = mid;
    else hi = static_cast<std::uint16_t>(mid - 1);
  }
  if (lo == F::max_finite) return sign | lo;
  const long double midpoint = (decode<H>(lo) + decode<H>(static_cast<std::uint16_t>(lo + 1))) / 2;
  const bool up = a > midpoint || (a == midpoint && (lo & 1u));
  return static_cast<std::uint16_t>(sign | (lo + (up ? 1 : 0)));
}

[[maybe_unused]] std::uint32_t bits_of(float f) {  // used where the CUDA runtime is present
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

#if defined(ET_HAS_CUDA_RUNTIME)
std::uint16_t cuda_bits(__half h) { return static_cast<__half_raw>(h).x; }
std::uint16_t cuda_bits(__nv_bfloat16 b) { return static_cast<__nv_bfloat16_raw>(b).x; }
template <class H>
std::uint16_t cuda_round(float f) {
  if constexpr (std::is_same_v<H, et::half>) return cuda_bits(__float2half_rn(f));
  else return cuda_bits(__float2bfloat16_rn(f));
}
template <class H>
std::uint16_t cuda_round(double d) {
  if constexpr (std::is_same_v<H, et::half>) return cuda_bits(__double2half(d));
  else return cuda_bits(__double2bfloat16(d));
}
template <class H>
float cuda_widen(std::uint16_t bits) {
  if constexpr (std::is_same_v<H, et::half>) return __half2float(__half(__half_raw{bits}));
  else return __bfloat162float(__nv_bfloat16(__nv_bfloat16_raw{bits}));
}
#endif

/// Values where rounding is decided: every 16-bit value, the midpoints to its upper
/// neighbour and the floats just either side of them, with both signs; specials; and a
/// sweep over float bit patterns.
template <class H>
std::vector<float> rounding_inputs() {
  std::vector<float> out;
  for (std::uint32_t k = 0; k < Format<H>::max_finite; ++k) {
    const auto lower = static_cast<float>(decode<H>(static_cast<std::uint16_t>(k)));
    const auto mid = static_cast<float>((decode<H>(static_cast<std::uint16_t>(k)) +
                                         decode<H>(static_cast<std::uint16_t>(k + 1))) / 2);
    for (float v : {lower, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, inf, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::denorm_min(), 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e10f,
                  0x1p-24f, 0x1p-25f, std::nextafter(0x1p-25f, 1.0f), 0x3p-26f, 0x1p-14f, 0x1p-126f, 0x1.fffffep127f}) {
    out.push_back(v);
    out.push_back(-v);
  }
  for (std::uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu, 0xff812345u}) out.push_back(float_of(nan));
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 4099) out.push_back(float_of(static_cast<std::uint32_t>(u)));
  return out;
}

// ---------------------------------------------------------------------------------
// Comparisons with the fp64 reference (Tolerance, check_close: ../common/reference.hpp)
// ---------------------------------------------------------------------------------

/// One rounding to the result type (plus float's own error inside): half 2^-11, bfloat16
/// 2^-8 relative; an absolute floor for results near zero.
template <class T>
constexpr Tolerance tolerance() {
  if constexpr (std::is_same_v<T, et::half>) return {1e-3, 1e-5};
  else if constexpr (std::is_same_v<T, et::bfloat16>) return {8e-3, 1e-5};
  else if constexpr (std::is_same_v<T, float>) return {2e-6, 1e-6};
  else if constexpr (std::is_same_v<T, double>) return {1e-13, 1e-14};
  else return exact;  // integers and bool
}

using test::promoted;
using test::TypeAt;

template <class T>
using Vector = et::Tensor<T, 1>;
/// An operand of type T in an unevaluated expression.
template <class T>
const Vector<T>& tensor_of();
template <class E>
using element_of = typename std::remove_cvref_t<E>::value_type;

template <std::size_t I, std::size_t J>
constexpr bool pair_promotes() {
  using A = TypeAt<I>;
  using B = TypeAt<J>;
  using P = TypeAt<static_cast<std::size_t>(promoted[I][J])>;
  using Floating = std::conditional_t<et::detail::is_floating_v<P>, P, float>;
  static_assert(std::is_same_v<element_of<decltype(tensor_of<A>() + tensor_of<B>())>, P>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<A>() * tensor_of<B>())>, P>);
  static_assert(std::is_same_v<element_of<decltype(et::maximum(tensor_of<A>(), tensor_of<B>()))>, P>);
  static_assert(std::is_same_v<element_of<decltype(et::where(tensor_of<bool>(), tensor_of<A>(), tensor_of<B>()))>, P>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<A>() / tensor_of<B>())>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(et::pow(tensor_of<A>(), tensor_of<B>()))>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<A>() < tensor_of<B>())>, bool>);
  static_assert(std::is_same_v<element_of<decltype(et::cast<B>(tensor_of<A>()))>, B>);
  static_assert(std::is_same_v<et::detail::promote_t<A, B>, P>);
  return true;
}

template <std::size_t I>
constexpr bool type_keeps_its_kind() {
  using T = TypeAt<I>;
  using Floating = std::conditional_t<et::detail::is_floating_v<T>, T, float>;
  // Scalars do not widen a tensor; a floating scalar lifts integers and bool to float.
  static_assert(std::is_same_v<element_of<decltype(tensor_of<T>() * 2.0)>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<T>() * et::half(2.0f))>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(2.0f - tensor_of<T>())>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<T>() + 1)>, std::conditional_t<std::is_same_v<T, bool>, std::int64_t, T>>);
  static_assert(std::is_same_v<element_of<decltype(et::exp(tensor_of<T>()))>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(et::sigmoid(tensor_of<T>()) * tensor_of<T>())>, Floating>);
  static_assert(std::is_same_v<element_of<decltype(tensor_of<T>() == 0.5)>, bool>);
  if constexpr (!std::is_same_v<T, bool>) {
    static_assert(std::is_same_v<element_of<decltype(-tensor_of<T>())>, T>);
    static_assert(std::is_same_v<element_of<decltype(et::abs(tensor_of<T>()))>, T>);
    static_assert(std::is_same_v<element_of<decltype(et::square(tensor_of<T>()))>, T>);
    static_assert(std::is_same_v<element_of<decltype(et::relu(tensor_of<T>()))>, T>);
    static_assert(std::is_same_v<element_of<decltype(et::clamp(tensor_of<T>(), 0, 1))>, T>);
    static_assert(std::is_same_v<element_of<decltype(et::where(tensor_of<T>() > 0, tensor_of<T>(), 0))>, T>);
  }
  return true;
}

template <std::size_t... Pairs, std::size_t... Types>
constexpr bool all_types_promote(std::index_sequence<Pairs...>, std::index_sequence<Types...>) {
  return (pair_promotes<Pairs / test::type_count, Pairs % test::type_count>() && ...) && (type_keeps_its_kind<Types>() && ...);
}

}  // namespace

// ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("every 16-bit pattern widens exactly and round-trips", "[dtypes][conversion]", et::half, et::bfloat16) {
  using H = TestType;
  std::size_t wrong_value = 0, wrong_round_trip = 0, wrong_vs_cuda = 0;
  std::uint32_t first_bad = 0;
  for (std::uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto pattern = static_cast<std::uint16_t>(bits);
    const float wide = H::from_bits(pattern);
    const std::uint16_t back = H(wide).bits;
    bool bad = false;
    if (is_nan_pattern<H>(pattern)) {
      bad = !std::isnan(wide) || back != 0x7fff;  // NaN comes back as CUDA's canonical NaN
      wrong_round_trip += bad;
    } else {
      const bool value_ok = static_cast<long double>(wide) == decode<H>(pattern) &&
                            std::signbit(wide) == static_cast<bool>(pattern & 0x8000u);
      wrong_value += !value_ok;
      wrong_round_trip += back != pattern;
      bad = !value_ok || back != pattern;
    }
#if defined(ET_HAS_CUDA_RUNTIME)
    const bool cuda_ok = bits_of(cuda_widen<H>(pattern)) == bits_of(wide);
    wrong_vs_cuda += !cuda_ok;
    bad = bad || !cuda_ok;
#endif
    if (bad && first_bad == 0) first_bad = bits;
  }
  CAPTURE(first_bad);
  CHECK(wrong_value == 0);
  CHECK(wrong_round_trip == 0);
  CHECK(wrong_vs_cuda == 0);
  CHECK(H(std::numeric_limits<float>::quiet_NaN()).bits == 0x7fff);
  CHECK(H{}.bits == 0);  // value-initialized: +0
}

TEMPLATE_TEST_CASE("float, double and integers round to nearest even, once", "[dtypes][conversion]", et::half, et::bfloat16) {
  using H = TestType;
  SECTION("float: ties, neighbours of ties, subnormals, overflow to infinity, NaN, every 4099th float") {
    const std::vector<float> inputs = rounding_inputs<H>();
    std::size_t wrong = 0, wrong_vs_cuda = 0;
    float first_bad = 0;
    for (const float f : inputs) {
      const std::uint16_t got = H(f).bits;
      bool bad = got != reference_round<H>(f);
      wrong += bad;
#if defined(ET_HAS_CUDA_RUNTIME)
      wrong_vs_cuda += got != cuda_round<H>(f);
      bad = bad || got != cuda_round<H>(f);
#endif
      if (bad && wrong + wrong_vs_cuda == 1) first_bad = f;
    }
    CAPTURE(inputs.size(), first_bad);
    CHECK(wrong == 0);
    CHECK(wrong_vs_cuda == 0);
  }
  SECTION("double: a double just past a tie must not round like the tie (no double rounding)") {
    std::vector<double> inputs;
    for (std::uint32_t k = 0; k < Format<H>::max_finite; k += 3) {
      const double mid = static_cast<double>((decode<H>(static_cast<std::uint16_t>(k)) +
                                              decode<H>(static_cast<std::uint16_t>(k + 1))) / 2);
      for (double v : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
        inputs.push_back(v);
        inputs.push_back(-v);
      }
    }
    for (double v : random_values<double>(100000, 5, -70000, 70000)) inputs.push_back(v);
    for (double v : {1e300, -1e300, 1e-300, -1e-300, 0.0, -0.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()})
      inputs.push_back(v);
    std::size_t wrong = 0, wrong_vs_cuda = 0;
    double first_bad = 0;
    for (const double d : inputs) {
      const std::uint16_t got = H(d).bits;
      bool bad = got != reference_round<H>(d);
      wrong += bad;
#if defined(ET_HAS_CUDA_RUNTIME)
      wrong_vs_cuda += got != cuda_round<H>(d);
      bad = bad || got != cuda_round<H>(d);
#endif
      if (bad && wrong + wrong_vs_cuda == 1) first_bad = d;
    }
    CAPTURE(first_bad);
    CHECK(wrong == 0);
    CHECK(wrong_vs_cuda == 0);
  }
  SECTION("integers, up to the whole int64 range") {
    std::vector<std::int64_t> inputs;
    for (std::int64_t i = -70000; i <= 70000; ++i) inputs.push_back(i);
    for (int shift = 8; shift < 63; ++shift)
      for (std::int64_t low : {1, 2, 3}) {  // just past a tie at every scale: 2^s + 2^(s-8) + low
        const std::int64_t v = (std::int64_t{1} << shift) + (std::int64_t{1} << (shift - 8)) + low;
        inputs.push_back(v);
        inputs.push_back(-v);
      }
    inputs.push_back(std::numeric_limits<std::int64_t>::min());
    inputs.push_back(std::numeric_limits<std::int64_t>::max());
    static_assert(std::numeric_limits<long double>::digits >= 64, "the reference needs int64 exact in long double");
    std::size_t wrong = 0;
    std::int64_t first_bad = 0;
    for (const std::int64_t i : inputs) {
      const bool bad = H(i).bits != reference_round<H>(static_cast<long double>(i));
      if (bad && wrong++ == 0) first_bad = i;
    }
    CAPTURE(first_bad);
    CHECK(wrong == 0);
    CHECK(H(true).bits == H(1.0f).bits);
    CHECK(H(std::int32_t{-7}).bits == H(-7.0f).bits);
  }
}

TEST_CASE("promotion of every pair of element types (static)", "[dtypes][promotion]") {
  STATIC_REQUIRE(all_types_promote(std::make_index_sequence<test::type_count * test::type_count>{},
                                   std::make_index_sequence<test::type_count>{}));
  STATIC_REQUIRE(std::is_same_v<et::detail::compute_t<et::half>, float>);
  STATIC_REQUIRE(std::is_same_v<et::detail::compute_t<et::bfloat16>, float>);
  STATIC_REQUIRE(std::is_same_v<et::detail::compute_t<std::int32_t>, std::int32_t>);
  STATIC_REQUIRE(et::detail::is_floating_v<et::half>);
  STATIC_REQUIRE(!et::detail::is_floating_v<std::int64_t>);
  // The readers hand on compute types; the nodes keep the nominal type.
  using Reader = et::detail::program_t<1, std::int32_t, Vector<et::half>>;
  STATIC_REQUIRE(std::is_same_v<Reader::value_type, float>);
}

TEMPLATE_TEST_CASE("every elementwise operation on every floating type, against fp64", "[dtypes][ops]", et::half,
                   et::bfloat16, float, double) {
  using T = TestType;
  const std::int64_t n = GENERATE(0, 1, 7, 1003, 65537);
  CAPTURE(n);
  const auto count = static_cast<std::size_t>(n);
  std::vector<T> xv = random_values<T>(count, 100 + count, -3, 3), yv = random_values<T>(count, 200 + count, -3, 3),
                 pv = random_values<T>(count, 300 + count, 0.05, 5);
  for (std::size_t i = 0; i < count; i += 3) yv[i] = xv[i];  // ties for == <= >= and maximum
  const auto x = et::from_vector(et::cpu, xv, {n}), y = et::from_vector(et::cpu, yv, {n}), p = et::from_vector(et::cpu, pv, {n});
  const Tolerance tol = tolerance<T>();

  // The result has the expected element type and matches f(x, y, p) computed in double.
  auto check = [&]<class Expected = T>(const auto& expr, auto f, Tolerance t, const char* what) {
    const auto result = et::eval(expr);
    STATIC_REQUIRE(std::is_same_v<typename decltype(result)::value_type, Expected>);
    std::vector<double> expected(count);
    for (std::size_t i = 0; i < count; ++i) expected[i] = f(double(xv[i]), double(yv[i]), double(pv[i]));
    check_close(result.to_vector(), expected, t, what);
  };
  SECTION("arithmetic") {
    check(x + y, [](double a, double b, double) { return a + b; }, tol, "x + y");
    check(x - y, [](double a, double b, double) { return a - b; }, tol, "x - y");
    check(x * y, [](double a, double b, double) { return a * b; }, tol, "x * y");
    check(x / p, [](double a, double, double c) { return a / c; }, tol, "x / p");
    check(-x, [](double a, double, double) { return -a; }, exact, "-x");
    check(2.5 - x * 0.5f, [](double a, double, double) { return 2.5 - a * 0.5; }, tol, "2.5 - x * 0.5f");
    check(3 / p + y * 2, [](double, double b, double c) { return 3 / c + b * 2; }, tol, "3 / p + y * 2");
  }
  SECTION("abs, square, relu, maximum, minimum, clamp") {
    check(et::abs(x), [](double a, double, double) { return std::fabs(a); }, exact, "abs");
    check(et::square(x), [](double a, double, double) { return a * a; }, tol, "square");
    check(et::relu(x), [](double a, double, double) { return a < 0 ? 0.0 : a; }, exact, "relu");
    check(et::maximum(x, y), [](double a, double b, double) { return std::max(a, b); }, exact, "maximum");
    check(et::minimum(x, 0.5), [](double a, double, double) { return std::min(a, 0.5); }, exact, "minimum");
    check(et::clamp(x, -1, y), [](double a, double b, double) { return std::min(std::max(a, -1.0), b); }, exact, "clamp");
  }
  SECTION("math functions") {
    check(et::exp(x), [](double a, double, double) { return std::exp(a); }, tol, "exp");
    check(et::log(p), [](double, double, double c) { return std::log(c); }, tol, "log");
    check(et::log1p(x * 0.25f), [](double a, double, double) { return std::log1p(a * 0.25); }, tol, "log1p");
    check(et::sqrt(p), [](double, double, double c) { return std::sqrt(c); }, tol, "sqrt");
    check(et::rsqrt(p), [](double, double, double c) { return 1 / std::sqrt(c); }, tol, "rsqrt");
    check(et::sin(x * 3), [](double a, double, double) { return std::sin(a * 3); }, tol, "sin");
    check(et::cos(x * 3), [](double a, double, double) { return std::cos(a * 3); }, tol, "cos");
    check(et::tanh(x), [](double a, double, double) { return std::tanh(a); }, tol, "tanh");
    check(et::sigmoid(x), [](double a, double, double) { return 1 / (1 + std::exp(-a)); }, tol, "sigmoid");
    check(et::gelu(x), [](double a, double, double) { return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); }, tol, "gelu");
    check(et::pow(p, y), [](double, double b, double c) { return std::pow(c, b); }, tol, "pow(p, y)");
    check(et::pow(p, 2.5), [](double, double, double c) { return std::pow(c, 2.5); }, tol, "pow(p, 2.5)");
  }
  SECTION("comparisons and where are exact") {
    check.template operator()<bool>(x == y, [](double a, double b, double) { return double(a == b); }, exact, "==");
    check.template operator()<bool>(x != y, [](double a, double b, double) { return double(a != b); }, exact, "!=");
    check.template operator()<bool>(x < y, [](double a, double b, double) { return double(a < b); }, exact, "<");
    check.template operator()<bool>(x <= y, [](double a, double b, double) { return double(a <= b); }, exact, "<=");
    check.template operator()<bool>(x > y, [](double a, double b, double) { return double(a > b); }, exact, ">");
    check.template operator()<bool>(x >= 0.5, [](double a, double, double) { return double(a >= 0.5); }, exact, ">=");
    check(et::where(x > y, x, p), [](double a, double b, double c) { return a > b ? a : c; }, exact, "where");
    check(et::where(x < 0, 0, x), [](double a, double, double) { return a < 0 ? 0.0 : a; }, exact, "where, scalar");
  }
  SECTION("non-contiguous operands (the strided path) and broadcasting") {
    const std::int64_t side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
    const et::Tensor<T, 2> transposed(x.storage(), 0, {side, side}, {1, side});
    const et::Tensor<T, 2> row(y.storage(), 0, {1, side}, {side, 1});
    const et::Tensor<T, 2> result = transposed * row - 1;
    const auto s = static_cast<std::size_t>(side);
    std::vector<double> expected(s * s);
    for (std::size_t r = 0; r < s; ++r)
      for (std::size_t c = 0; c < s; ++c) expected[r * s + c] = double(xv[c * s + r]) * double(yv[c]) - 1;
    check_close(result.to_vector(), expected, tol, "transpose(x) * row - 1");
  }
}

/// The cast U(a) by its definition: integer to integer wraps (to bool: nonzero); floating to
/// integer truncates toward zero and saturates at U's limits (uint8: 0 and 255).
template <class U, class A>
U reference_cast(A a) {
  if constexpr (std::is_integral_v<A> && std::is_integral_v<U>) {
    return static_cast<U>(a);
  } else {
    const double v = static_cast<double>(a);
    if constexpr (std::is_same_v<U, bool>) return v != 0;
    else if constexpr (std::is_same_v<U, std::uint8_t>) return v <= 0 ? U(0) : v >= 255 ? U(255) : static_cast<U>(v);
    else if constexpr (et::detail::is_16bit_float_v<U>) return U(v);  // rounded once (tested above)
    else return static_cast<U>(v);
  }
}

TEST_CASE("casts between every pair of element types", "[dtypes][cast]") {
  const std::int64_t n = 2000;
  auto run_pair = [&]<std::size_t I, std::size_t J>(std::integral_constant<std::size_t, I>,
                                                     std::integral_constant<std::size_t, J>) {
    using A = TypeAt<I>;
    using U = TypeAt<J>;
    std::vector<A> av = random_values<A>(2000, 40 + I, -300, 300);
    av[0] = A(0);
    const auto a = et::from_vector(et::cpu, av, {n});
    const auto result = et::eval(et::cast<U>(a));
    STATIC_REQUIRE(std::is_same_v<typename decltype(result)::value_type, U>);
    const std::vector<U> got = result.to_vector();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < av.size(); ++i) {
      const U want = reference_cast<U>(av[i]);
      if constexpr (et::detail::is_16bit_float_v<U>) wrong += got[i].bits != want.bits;
      else wrong += got[i] != want;
    }
    INFO("cast from type " << I << " to type " << J);
    CHECK(wrong == 0);
  };
  [&]<std::size_t... Is>(std::index_sequence<Is...>) {
    (run_pair(std::integral_constant<std::size_t, Is / test::type_count>{},
              std::integral_constant<std::size_t, Is % test::type_count>{}),
     ...);
  }(std::make_index_sequence<test::type_count * test::type_count>{});

  SECTION("cast<half> inside an expression rounds there; the rest computes in float") {
    const auto x = et::from_vector(et::cpu, std::vector<float>{1.0f + 0x1p-12f, 3.0f}, {2});
    const auto y = et::eval(et::cast<et::half>(x) * 1.0f - x);  // float: the rounding error of cast<half>
    CHECK(y.to_vector() == std::vector<float>{-0x1p-12f, 0.0f});
    const auto z = et::eval(et::cast<et::bfloat16>(x * 100.0f) + 0.0f);
    CHECK(z.to_vector()[1] == 300.0f);
  }
}

TEMPLATE_TEST_CASE("a fused 16-bit expression rounds once, at the store", "[dtypes][rounding]", et::half, et::bfloat16) {
  using H = TestType;
  const std::int64_t n = 100003;
  const auto count = static_cast<std::size_t>(n);
  const std::vector<H> xv = random_values<H>(count, 77, 0.5, 1.0), wv = random_values<H>(count, 78, 0.8, 1.25),
                       uv = random_values<H>(count, 79, 0.8, 1.25);
  const auto x = et::from_vector(et::cpu, xv, {n}), w = et::from_vector(et::cpu, wv, {n}),
             u = et::from_vector(et::cpu, uv, {n});
  // 30 operations. Two consecutive steps cancel in exact arithmetic, so the result stays
  // near x and no error is damped: rounding after each operation lets the errors add up.
  auto step = [](const auto& v, const auto& a, const auto& b) { return v * a / b * et::exp(b - a); };
  const et::Tensor<H, 1> fused = step(step(step(step(step(step(x, w, u), u, w), w, u), u, w), w, u), u, w);
  auto step_ref = [](double v, double a, double b) { return v * a / b * std::exp(b - a); };

  // The same chain with every operation evaluated into an H tensor (rounded each time).
  et::Tensor<H, 1> v = x.clone();
  for (int k = 0; k < 6; ++k) {
    const auto& a = k % 2 ? u : w;
    const auto& b = k % 2 ? w : u;
    const et::Tensor<H, 1> scaled = v * a, divided = scaled / b, difference = b - a, factor = et::exp(difference);
    v = divided * factor;
  }

  const std::vector<H> got = fused.to_vector(), per_op = v.to_vector();
  std::size_t fused_over = 0, per_op_over = 0;
  double worst = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double r = xv[i];
    for (int k = 0; k < 6; ++k) r = k % 2 ? step_ref(r, double(uv[i]), double(wv[i])) : step_ref(r, double(wv[i]), double(uv[i]));
    const H rounded(r);  // the fp64 reference rounded once
    const double ulp = double(H::from_bits(static_cast<std::uint16_t>(rounded.bits + 1))) - double(rounded);
    const double fused_error = std::fabs(double(got[i]) - double(rounded)) / ulp;
    worst = std::max(worst, fused_error);
    fused_over += fused_error > 1;
    per_op_over += std::fabs(double(per_op[i]) - double(rounded)) / ulp > 1;
  }
  CAPTURE(worst, per_op_over);
  CHECK(fused_over == 0);
  // The check above could fail: rounding after every operation misses by more than 1 ulp.
  CHECK(per_op_over > count / 100);
}

TEMPLATE_TEST_CASE("creation, copies and assignment for 16-bit tensors", "[dtypes][creation]", et::half, et::bfloat16) {
  using H = TestType;
  auto bits_of_all = [](const std::vector<H>& values) {
    std::vector<std::uint16_t> out;
    for (const H& v : values) out.push_back(v.bits);
    return out;
  };
  SECTION("zeros, ones, full") {
    CHECK(bits_of_all(et::zeros<H>(et::cpu, {5}).to_vector()) == std::vector<std::uint16_t>(5, 0));
    CHECK(bits_of_all(et::ones<H>(et::cpu, {2, 3}).to_vector()) == std::vector<std::uint16_t>(6, H(1.0f).bits));
    CHECK(et::full<H>(et::cpu, {3}, 0.1).to_vector()[2].bits == H(0.1).bits);  // rounded once from double
    CHECK(et::full<H>(et::cpu, {1}, H(2.5f)).item().bits == H(2.5f).bits);
    CHECK(et::full<float>(et::cpu, {1}, H(0.1)).item() == float(H(0.1)));
  }
  SECTION("arange and linspace round each value once") {
    const auto range = et::arange<H>(et::cpu, 3000).to_vector();
    const auto spaced = et::linspace<H>(et::cpu, -1.0, 2.0, 1001).to_vector();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < range.size(); ++i) wrong += range[i].bits != H(static_cast<double>(i)).bits;
    for (std::size_t i = 0; i < spaced.size(); ++i) {
      const double step = 3.0 / 1000;
      const double exact_value = 2 * i < 1001 ? -1.0 + step * double(i) : 2.0 - step * double(1000 - i);
      wrong += spaced[i].bits != H(exact_value).bits;
    }
    CHECK(wrong == 0);
    CHECK(spaced.back().bits == H(2.0f).bits);
  }
  SECTION("rand draws exact values in [0, 1); randn is standard normal") {
    const std::vector<H> u = et::rand<H>(et::cpu, {200000}, 9).to_vector();
    const double grid = std::is_same_v<H, et::half> ? 2048 : 256;
    double mean = 0;
    std::size_t off_grid = 0, outside = 0;
    for (const H& v : u) {
      const double d = v;
      mean += d / static_cast<double>(u.size());
      outside += !(d >= 0 && d < 1);
      off_grid += d * grid != std::floor(d * grid);
    }
    CHECK(outside == 0);
    CHECK(off_grid == 0);
    CHECK(std::fabs(mean - 0.5) < 0.005);
    // Element i is the float draw's value with the type's number of bits, and depends on (seed, i) only.
    const et::detail::UniformGenerator<H> uniform{9};
    CHECK(u[12345].bits == uniform(12345).bits);
    const std::vector<H> z = et::randn<H>(et::cpu, {200000}, 10).to_vector();
    double sum = 0, sum_sq = 0;
    for (const H& v : z) {
      sum += double(v);
      sum_sq += double(v) * double(v);
    }
    const double m = sum / double(z.size()), var = sum_sq / double(z.size()) - m * m;
    CHECK(std::fabs(m) < 0.01);
    CHECK(std::fabs(var - 1) < 0.02);
    const et::detail::NormalGenerator<double> normal{10};
    CHECK(z[777].bits == H(normal(777)).bits);  // the double draw, rounded once
  }
  SECTION("from_vector, to_vector, item, clone and .to() keep every bit, NaN payloads included") {
    std::vector<H> all(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) all[b] = H::from_bits(static_cast<std::uint16_t>(b));
    const auto t = et::from_vector(et::cpu, all, {256, 256});
    CHECK(bits_of_all(t.to_vector()) == bits_of_all(all));
    CHECK(bits_of_all(t.clone().to_vector()) == bits_of_all(all));
    CHECK(t.to(et::cpu).data() == t.data());
    const et::Tensor<H, 2> copied = t + 0.0f;  // through float: non-NaN bits survive, -0 + 0 is +0
    const std::vector<H> back = copied.to_vector();
    std::size_t wrong = 0;
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto pattern = static_cast<std::uint16_t>(b);
      if (is_nan_pattern<H>(pattern)) wrong += back[b].bits != 0x7fff;
      else wrong += back[b].bits != (pattern == 0x8000 ? 0 : pattern);
    }
    CHECK(wrong == 0);
    CHECK(et::Tensor<H, 2>(t.storage(), 0x3c00, {1, 1}, {1, 1}).item().bits == 0x3c00);
  }
  SECTION("storing rounds once: float and double expressions into 16-bit tensors") {
    const std::vector<float> inputs = rounding_inputs<H>();
    const auto n = static_cast<std::int64_t>(inputs.size());
    auto stored = et::empty<H>(et::cpu, {n});
    stored = et::from_vector(et::cpu, inputs, {n});
    const auto got = stored.to_vector();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < inputs.size(); ++i) wrong += got[i].bits != reference_round<H>(inputs[i]);
    CHECK(wrong == 0);
    // A scalar operand keeps its compute-type value: x * 0.1 multiplies by 0.1f, not by half(0.1).
    const auto x = et::from_vector(et::cpu, random_values<H>(1000, 3, -3, 3), {1000});
    const std::vector<H> xs = x.to_vector(), scaled = et::eval(x * 0.1).to_vector();
    std::size_t wrong_scalar = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) wrong_scalar += scaled[i].bits != H(float(xs[i]) * 0.1f).bits;
    CHECK(wrong_scalar == 0);
    auto accumulated = et::from_vector(et::cpu, xs, {1000});
    accumulated += 1;
    accumulated *= x;
    const std::vector<H> acc = accumulated.to_vector();
    std::size_t wrong_compound = 0;
    for (std::size_t i = 0; i < xs.size(); ++i)
      wrong_compound += acc[i].bits != H(float(H(float(xs[i]) + 1.0f)) * float(xs[i])).bits;
    CHECK(wrong_compound == 0);
  }
}
