// Test helpers: seeded random host data and a double-precision comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace test {

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double lo = -3.0, double hi = 3.0) {
  std::mt19937_64 engine(seed);
  std::vector<T> out(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution coin(0.5);
    for (std::size_t i = 0; i < n; ++i) out[i] = coin(engine);
  } else if constexpr (std::is_integral_v<T>) {
    std::uniform_int_distribution<T> dist(static_cast<T>(lo), static_cast<T>(hi));
    for (auto& v : out) v = dist(engine);
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& v : out) v = static_cast<T>(dist(engine));
  }
  return out;
}

/// n random doubles in [-1, 1): the values of the shape tests' inputs.
inline std::vector<double> values_of(std::int64_t n, std::uint64_t seed) {
  return random_values<double>(static_cast<std::size_t>(n), seed, -1.0, 1.0);
}

/// |got - expected| <= tolerance * max(1, |expected|); NaN only matches NaN.
inline bool close(double got, double expected, double tolerance) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= tolerance * std::max(1.0, std::fabs(expected));
}

/// Checks every element; reports the first mismatch with its index.
template <class T>
void check_all_close(const std::vector<T>& got, const std::vector<double>& expected, double tolerance) {
  REQUIRE(got.size() == expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!close(static_cast<double>(got[i]), expected[i], tolerance)) {
      CAPTURE(i, static_cast<double>(got[i]), expected[i], tolerance);
      FAIL("element differs from the double-precision reference");
    }
  }
}

}  // namespace test
