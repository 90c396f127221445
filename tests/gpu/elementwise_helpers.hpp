// Shared by the GPU elementwise tests (test_elementwise.cu, test_elementwise_layouts.cu):
// tolerances, seeded random operands, double-precision host references and checks.
#pragma once

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

#include "../common/reference.hpp"
#include "cupti_counter.hpp"

namespace {

using Gpu = et::Cuda<0>;
using Catch::Matchers::Contains;

// ---------------------------------------------------------------------------------
// Host data and comparisons (Tolerance, check_close and random_values: ../common/reference.hpp)
// ---------------------------------------------------------------------------------

using test::as_doubles;
using test::check_close;
using test::exact;
using test::random_values;
using test::Tolerance;

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

inline double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
inline double relu_ref(double x) { return x < 0 ? 0.0 : x; }

/// The benchmark's chain (bench/elementwise.cu): 17 operations over 3 inputs.
auto chain(const auto& x, const auto& y, const auto& w) {
  return et::tanh(x * 0.5f + y) * et::sigmoid(w) + et::exp(-et::abs(x)) * 0.25f -
         et::sqrt(et::square(y) + 1.0f) / (1.0f + et::relu(w));
}
inline double chain_ref(double x, double y, double w) {
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
inline std::size_t broadcast_index(const std::array<std::int64_t, 3>& shape, std::int64_t i0, std::int64_t i1,
                            std::int64_t i2) {
  const std::int64_t a = shape[0] == 1 ? 0 : i0, b = shape[1] == 1 ? 0 : i1, c = shape[2] == 1 ? 0 : i2;
  return static_cast<std::size_t>((a * shape[1] + b) * shape[2] + c);
}

}  // namespace
