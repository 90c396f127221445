// Test helpers: seeded random host data (random_values.hpp) and the comparisons with a
// double-precision reference.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <vector>

#include "random_values.hpp"

namespace test {

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

/// Every element within `tolerance` times the larger of 1 and the largest |expected|:
/// sums of many rounded products (convolutions) err in proportion to that scale.
/// `what` is the failure's message.
inline void check_scaled_close(const std::vector<double>& got, const std::vector<double>& expected, double tolerance,
                               const char* what) {
  REQUIRE(got.size() == expected.size());
  double scale = 1;
  for (double v : expected) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - expected[i]) <= tolerance * scale)) {
      CAPTURE(i, got[i], expected[i], tolerance, scale);
      FAIL(what);
    }
  }
}

/// |got - expected| <= abs + rel * |expected|. NaN matches only NaN; infinities only themselves.
struct Tolerance {
  double rel = 0, abs = 0;
};
inline constexpr Tolerance exact{};

inline bool close(double got, double expected, Tolerance tol) {
  if (std::isnan(expected)) return std::isnan(got);
  if (std::isinf(expected)) return got == expected;
  return std::fabs(got - expected) <= tol.abs + tol.rel * std::fabs(expected);
}

/// One assertion for a whole result; on failure it names how many elements differ and
/// the first of them. `against`: what the result is compared with.
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

}  // namespace test
