// half and bfloat16 on the GPU: the device's conversions agree with the host's bit for
// bit; fused 16-bit expressions match etensor's CPU backend (bit for bit where float
// arithmetic is correctly rounded on both sides, within an ulp of the type otherwise)
// and an fp64 reference; a fused chain rounds once; rand and randn are bit-identical
// to the CPU's. The CPU tests (tests/cpu/test_dtypes.cpp) hold the exhaustive reference
// checks of the host conversions themselves.
#include <catch2/catch.hpp>

#include <et/et.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <type_traits>
#include <utility>
#include <vector>

#include "../common/random_values.hpp"

namespace {

using Gpu = et::Cuda<0>;

/// The raw bits of a 16-bit element, or of a float; other types as themselves.
template <class T>
auto raw(T value) {
  if constexpr (et::detail::is_16bit_float_v<T>) {
    return value.bits;
  } else if constexpr (std::is_same_v<T, float>) {
    std::uint32_t u;
    std::memcpy(&u, &value, sizeof u);
    return u;
  } else {
    return value;
  }
}

template <class T>
bool is_nan(T value) {
  if constexpr (et::detail::is_floating_v<T>) return std::isnan(static_cast<double>(value));
  else return false;
}

/// How a GPU result must relate to the CPU backend's: the same bits (NaN: both NaN), or
/// within `rel` relative (+ `abs`) of it.
struct Agreement {
  double rel = 0, abs = 0;
};
constexpr Agreement bit_exact{};

/// `other`: the CPU backend's result, or an fp64 reference (then never bit_exact).
template <class T, class U>
void check_agrees(const std::vector<T>& gpu, const std::vector<U>& other, Agreement agreement, const char* what) {
  REQUIRE(gpu.size() == other.size());
  std::size_t mismatches = 0, first = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double g = static_cast<double>(gpu[i]), c = static_cast<double>(other[i]);
    bool ok;
    if (is_nan(gpu[i]) || is_nan(other[i])) {
      ok = is_nan(gpu[i]) && is_nan(other[i]);
    } else if (agreement.rel == 0 && agreement.abs == 0) {
      if constexpr (std::is_same_v<T, U>) ok = raw(gpu[i]) == raw(other[i]);
      else ok = g == c;
    } else {
      ok = g == c || std::fabs(g - c) <= agreement.abs + agreement.rel * std::fabs(c);
    }
    if (!ok && mismatches++ == 0) first = i;
  }
  std::ostringstream report;
  report.precision(17);
  report << what << ": " << mismatches << " of " << gpu.size() << " elements differ";
  if (mismatches) report << "; first at " << first << ": GPU " << static_cast<double>(gpu[first]) << ", other "
                         << static_cast<double>(other[first]);
  INFO(report.str());
  CHECK(mismatches == 0);
}

/// The largest relative error of one rounding to T (and of float's own math inside).
template <class T>
constexpr double type_rel() {
  if constexpr (std::is_same_v<T, et::half>) return 1e-3;
  else if constexpr (std::is_same_v<T, et::bfloat16>) return 8e-3;
  else return 1e-5;  // float: CUDA's math functions are within a few ulp
}

using test::random_values;

/// Evaluates make(...) over GPU tensors and over CPU tensors of the same values.
template <class Make, class... Hs>
auto on_both(Make make, const std::vector<Hs>&... inputs) {
  const std::size_t sizes[] = {inputs.size()...};
  const auto n = static_cast<std::int64_t>(sizes[0]);
  const auto gpu = et::eval(make(et::from_vector(et::cuda<0>, inputs, {n})...));
  const auto cpu = et::eval(make(et::from_vector(et::cpu, inputs, {n})...));
  return std::make_pair(gpu.to_vector(), cpu.to_vector());
}

/// Inputs where rounding is decided: every 16-bit value, the midpoint to its upper
/// neighbour and the floats either side of it (both signs); specials; every 4099th float.
template <class H>
std::vector<float> rounding_inputs() {
  std::vector<float> out;
  const std::uint16_t max_finite = std::is_same_v<H, et::half> ? 0x7bff : 0x7f7f;
  for (std::uint32_t k = 0; k < max_finite; ++k) {
    const float lower = H::from_bits(static_cast<std::uint16_t>(k)), upper = H::from_bits(static_cast<std::uint16_t>(k + 1));
    const auto mid = static_cast<float>((static_cast<double>(lower) + upper) / 2);  // exact
    for (float v : {lower, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  for (float v : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), 65520.0f, std::numeric_limits<float>::quiet_NaN()}) {
    out.push_back(v);
    out.push_back(-v);
  }
  for (std::uint64_t u = 0; u <= 0xffffffffu; u += 4099) {
    const auto bits = static_cast<std::uint32_t>(u);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    out.push_back(f);
  }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("device conversions agree with the host's bit for bit", "[dtypes][conversion]", et::half,
                   et::bfloat16) {
  using H = TestType;
  SECTION("16 bits -> float: every pattern") {
    std::vector<H> all(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) all[b] = H::from_bits(static_cast<std::uint16_t>(b));
    const auto [gpu, cpu] = on_both([](const auto& h) { return et::cast<float>(h); }, all);
    check_agrees(gpu, cpu, bit_exact, "cast<float>");
  }
  SECTION("float -> 16 bits: ties, their neighbours, subnormals, overflow, NaN, a sweep") {
    const auto [gpu, cpu] = on_both([](const auto& f) { return et::cast<H>(f); }, rounding_inputs<H>());
    check_agrees(gpu, cpu, bit_exact, "cast<H>(float)");
  }
  SECTION("double and int64 -> 16 bits round once") {
    std::vector<double> doubles;
    std::vector<std::int64_t> integers;
    for (const float f : rounding_inputs<H>()) {
      for (double d : {static_cast<double>(f), std::nextafter(static_cast<double>(f), 0.0), std::nextafter(static_cast<double>(f), 1e300)})
        doubles.push_back(d);
      if (std::isfinite(f) && std::fabs(f) < 9e18f)
        integers.push_back(static_cast<std::int64_t>(f) + static_cast<std::int64_t>(integers.size() % 3) - 1);
    }
    const auto [gpu_d, cpu_d] = on_both([](const auto& d) { return et::cast<H>(d); }, doubles);
    check_agrees(gpu_d, cpu_d, bit_exact, "cast<H>(double)");
    const auto [gpu_i, cpu_i] = on_both([](const auto& i) { return et::cast<H>(i); }, integers);
    check_agrees(gpu_i, cpu_i, bit_exact, "cast<H>(int64)");
  }
}

TEMPLATE_TEST_CASE("16-bit expressions on the GPU match the CPU backend and fp64", "[dtypes][ops]", et::half,
                   et::bfloat16) {
  using H = TestType;
  // 1 and 3: scalar tail only; 1000003: 8-wide vector loads plus a tail.
  const std::size_t n = GENERATE(1, 3, 1000003);
  CAPTURE(n);
  std::vector<H> x = random_values<H>(n, 10 + n, -3, 3), y = random_values<H>(n, 20 + n, -3, 3);
  const std::vector<H> p = random_values<H>(n, 30 + n, 0.05, 5);
  for (std::size_t i = 0; i < n; i += 3) y[i] = x[i];
  const std::vector<float> f = random_values<float>(n, 40 + n, -3, 3);
  const std::vector<et::bfloat16> b = random_values<et::bfloat16>(n, 50 + n, -3, 3);

  SECTION("correctly rounded float arithmetic: bit for bit") {
    auto exact = [&](auto make, const char* what, const auto&... in) {
      const auto [gpu, cpu] = on_both(make, in...);
      check_agrees(gpu, cpu, bit_exact, what);
    };
    exact([](const auto& u, const auto& v) { return u + v; }, "x + y", x, y);
    exact([](const auto& u, const auto& v) { return u / v; }, "x / p", x, p);
    exact([](const auto& u) { return et::sqrt(u); }, "sqrt(p)", p);
    exact([](const auto& u) { return -et::abs(u) * 0.1; }, "-abs(x) * 0.1", x);
    exact([](const auto& u, const auto& v) { return et::where(u > v, et::relu(u), et::maximum(v, 0.5)); },
          "where(x > y, relu(x), maximum(y, 0.5))", x, y);
    exact([](const auto& u, const auto& v) { return u - v; }, "x - (float) w", x, f);
    exact([](const auto& u, const auto& v) { return u * v; }, "x * (bfloat16) b", x, b);
    exact([](const auto& u) { return et::cast<std::int32_t>(u * 4) + 1; }, "cast<int32>(x * 4) + 1", x);
  }
  SECTION("math functions: within an ulp of the CPU's, within the type's rounding of fp64") {
    auto close = [&](auto make, auto reference, const auto& in) {
      const auto [gpu, cpu] = on_both(make, in);
      check_agrees(gpu, cpu, Agreement{2 * type_rel<H>(), 1e-5}, "GPU vs CPU");
      std::vector<double> expected(n);
      for (std::size_t i = 0; i < n; ++i) expected[i] = reference(static_cast<double>(in[i]));
      check_agrees(gpu, expected, Agreement{type_rel<H>(), 1e-5}, "GPU vs fp64");
    };
    close([](const auto& u) { return et::exp(u); }, [](double v) { return std::exp(v); }, x);
    close([](const auto& u) { return et::tanh(u); }, [](double v) { return std::tanh(v); }, x);
    close([](const auto& u) { return et::gelu(u); }, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, x);
    close([](const auto& u) { return et::sin(u * 3); }, [](double v) { return std::sin(v * 3); }, x);
    close([](const auto& u) { return et::rsqrt(u); }, [](double v) { return 1 / std::sqrt(v); }, p);
    close([](const auto& u) { return et::pow(u, 1.5); }, [](double v) { return std::pow(v, 1.5); }, p);
  }
  SECTION("the strided path and an unaligned start (no vector loads)") {
    const auto count = static_cast<std::int64_t>(n);
    const auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(n)));
    const auto gx = et::from_vector(et::cuda<0>, x, {count});
    const auto cx = et::from_vector(et::cpu, x, {count});
    auto transposed_minus_shifted = [&](const auto& t) {
      using D = typename std::remove_cvref_t<decltype(t)>::device_type;
      const et::Tensor<H, 2, D> transposed(t.storage(), 0, {side, side}, {1, side});
      const et::Tensor<H, 2, D> shifted(t.storage(), 1, {side, side}, {side, 1});
      return et::eval(transposed - shifted * 2);
    };
    if (count > 1) check_agrees(transposed_minus_shifted(gx).to_vector(), transposed_minus_shifted(cx).to_vector(),
                                bit_exact, "transpose(x) - shifted(x) * 2");
  }
}

TEMPLATE_TEST_CASE("a fused 16-bit chain rounds once on the GPU", "[dtypes][rounding]", et::half, et::bfloat16) {
  using H = TestType;
  const std::size_t n = 100003;
  const std::vector<H> x = random_values<H>(n, 77, 0.5, 1.0), w = random_values<H>(n, 78, 0.8, 1.25),
                       u = random_values<H>(n, 79, 0.8, 1.25);
  // 15 operations whose errors are not damped (tests/cpu/test_dtypes.cpp runs 30 and shows
  // that rounding after each of them misses the reference by more than an ulp). Kept this
  // shallow because nvcc's compile time grows steeply with an expression's depth.
  auto step = [](const auto& v, const auto& a, const auto& b) { return v * a / b * et::exp(b - a); };
  const auto [gpu, cpu] = on_both(
      [&](const auto& v, const auto& a, const auto& b) { return step(step(step(v, a, b), b, a), a, b); }, x, w, u);
  std::size_t over = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double r = x[i];
    for (int k = 0; k < 3; ++k) {
      const double a = k % 2 ? u[i] : w[i], b = k % 2 ? w[i] : u[i];
      r = r * a / b * std::exp(b - a);
    }
    const H rounded(r);
    const double ulp = double(H::from_bits(static_cast<std::uint16_t>(rounded.bits + 1))) - double(rounded);
    over += std::fabs(double(gpu[i]) - double(rounded)) > ulp;
  }
  CHECK(over == 0);
  check_agrees(gpu, cpu, Agreement{2 * type_rel<H>(), 0}, "GPU vs CPU");
}

TEMPLATE_TEST_CASE("16-bit creation and copies on the GPU are bit-identical to the CPU's", "[dtypes][creation]",
                   et::half, et::bfloat16) {
  using H = TestType;
  SECTION("rand and randn") {
    check_agrees(et::rand<H>(et::cuda<0>, {1000003}, 5).to_vector(), et::rand<H>(et::cpu, {1000003}, 5).to_vector(),
                 bit_exact, "rand");
    check_agrees(et::randn<H>(et::cuda<0>, {1000003}, 6).to_vector(), et::randn<H>(et::cpu, {1000003}, 6).to_vector(),
                 bit_exact, "randn");
    check_agrees(et::randn<H>(et::cuda<0>, {33, 65}, 7).to_vector(), et::randn<H>(et::cpu, {33, 65}, 7).to_vector(),
                 bit_exact, "randn [33, 65]");
  }
  SECTION("full, ones, zeros, arange, linspace") {
    check_agrees(et::full<H>(et::cuda<0>, {1001}, 0.1).to_vector(), et::full<H>(et::cpu, {1001}, 0.1).to_vector(),
                 bit_exact, "full");
    check_agrees(et::ones<H>(et::cuda<0>, {7}).to_vector(), std::vector<H>(7, H(1.0f)), bit_exact, "ones");
    check_agrees(et::zeros<H>(et::cuda<0>, {7}).to_vector(), std::vector<H>(7, H(0.0f)), bit_exact, "zeros");
    check_agrees(et::arange<H>(et::cuda<0>, 70000).to_vector(), et::arange<H>(et::cpu, 70000).to_vector(), bit_exact,
                 "arange");
    check_agrees(et::linspace<H>(et::cuda<0>, -1.0, 3.0, 100001).to_vector(),
                 et::linspace<H>(et::cpu, -1.0, 3.0, 100001).to_vector(), bit_exact, "linspace");
  }
  SECTION("from_vector, to_vector, item and .to() keep every bit, NaN payloads included") {
    std::vector<H> all(65536);
    for (std::uint32_t b = 0; b < 65536; ++b) all[b] = H::from_bits(static_cast<std::uint16_t>(b));
    const auto on_gpu = et::from_vector(et::cuda<0>, all, {256, 256});
    std::size_t wrong = 0;
    const std::vector<H> back = on_gpu.to_vector(), round_trip = on_gpu.to(et::cpu).to(et::cuda<0>).to_vector();
    for (std::size_t i = 0; i < all.size(); ++i) wrong += back[i].bits != all[i].bits || round_trip[i].bits != all[i].bits;
    CHECK(wrong == 0);
    CHECK(et::Tensor<H, 1, Gpu>(on_gpu.storage(), 0x7e01, {1}, {1}).item().bits == 0x7e01);
  }
}

TEST_CASE("uint8 on the GPU gives the CPU's values: wrapping, saturating casts, argmax, sums", "[dtypes][uint8]") {
  // 1000003 bytes: the vectorized path (16 bytes a load) and an odd tail; a transposed view:
  // the strided path.
  std::mt19937_64 rng(11);
  std::vector<std::uint8_t> bytes(1000003);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  const auto a = et::from_vector(et::cpu, bytes, {1000003});
  const auto ag = a.to(et::cuda<0>);
  const auto b = et::eval(a * 7 + 3);
  const auto bg = et::eval(ag * 7 + 3);
  CHECK(bg.to_vector() == b.to_vector());
  CHECK(et::eval(ag - bg).to_vector() == et::eval(a - b).to_vector());
  CHECK(et::eval(-ag).to_vector() == et::eval(-a).to_vector());
  CHECK(et::eval(et::cast<float>(ag) / 255.0f).to_vector() == et::eval(et::cast<float>(a) / 255.0f).to_vector());
  const auto square = a.slice(0, 0, 1000000).reshape(std::array<std::int64_t, 2>{1000, 1000});
  const auto square_g = square.to(et::cuda<0>);
  CHECK(et::eval(square_g.transpose(0, 1) + square_g).to_vector() == et::eval(square.transpose(0, 1) + square).to_vector());
  // Casts from float saturate alike on both devices (NaN and the infinities included).
  const std::vector<float> edges{-1e10f, -1, -0.5f, 0, 0.5f, 127.5f, 254.9f, 255, 255.5f, 256, 1e10f,
                                 std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity()};
  const auto f = et::from_vector(et::cpu, edges, {static_cast<std::int64_t>(edges.size())});
  const std::vector<std::uint8_t> want{0, 0, 0, 0, 0, 127, 254, 255, 255, 255, 255, 0, 255, 0};
  CHECK(et::eval(et::cast<std::uint8_t>(f)).to_vector() == want);
  CHECK(et::eval(et::cast<std::uint8_t>(f.to(et::cuda<0>))).to_vector() == want);
  // Sums to int64; max and argmax order bytes above 127 after those below.
  CHECK(et::sum(ag).item() == et::sum(a).item());
  CHECK(et::max(ag).item() == 255);
  CHECK(et::argmax(square_g, 1).to_vector() == et::argmax(square, 1).to_vector());
  // Sorting uint8 (CUB) is in test_index.cu.
}
