// Seeded random host data: the one generator of the tests' input values. Needs neither
// Catch nor etensor, so the reference headers (conv_reference.hpp, matmul_reference.hpp)
// draw with it too.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace test {

/// Integers uniform in [lo, hi] (clipped to T's range: uint8 draws from [max(lo, 0), hi]);
/// floating values uniform in [lo, hi), drawn in double and then rounded to T (so every
/// floating type is given the same draw).
struct Uniform {
  double lo = -3.0, hi = 3.0;
};

/// Values that keep every bit busy (the run-time tests compare copies bit for bit):
/// integers over T's whole range, floating values normal(0, 100) drawn in T itself.
struct Wide {};
inline constexpr Wide wide{};

/// n values of T from std::mt19937_64(seed); bool is a fair coin whatever the spread.
template <class T, class Spread>
  requires std::same_as<Spread, Uniform> || std::same_as<Spread, Wide>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, [[maybe_unused]] Spread spread) {
  std::mt19937_64 engine(seed);
  std::vector<T> out(n);
  if constexpr (std::is_same_v<T, bool>) {
    std::bernoulli_distribution coin(0.5);
    for (std::size_t i = 0; i < n; ++i) out[i] = coin(engine);
  } else if constexpr (std::is_integral_v<T>) {
    // long long, not T: uniform_int_distribution is undefined for the char types (for the
    // others libstdc++ draws the same values either way).
    auto dist = [&] {
      if constexpr (std::is_same_v<Spread, Wide>) {
        return std::uniform_int_distribution<long long>(static_cast<long long>(std::numeric_limits<T>::min()),
                                                        static_cast<long long>(std::numeric_limits<T>::max()));
      } else {
        const auto low = static_cast<long long>(std::numeric_limits<T>::min());
        const auto high = static_cast<long long>(std::numeric_limits<T>::max());
        return std::uniform_int_distribution<long long>(std::max(low, static_cast<long long>(spread.lo)),
                                                        std::min(high, static_cast<long long>(spread.hi)));
      }
    }();
    for (auto& v : out) v = static_cast<T>(dist(engine));
  } else if constexpr (std::is_same_v<Spread, Wide>) {
    std::normal_distribution<T> dist(0, 100);
    for (auto& v : out) v = dist(engine);
  } else {
    std::uniform_real_distribution<double> dist(spread.lo, spread.hi);
    for (auto& v : out) v = static_cast<T>(dist(engine));
  }
  return out;
}

/// n values of T uniform in [lo, hi] (integers) or [lo, hi) (floating): the usual inputs.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, double lo = -3.0, double hi = 3.0) {
  return random_values<T>(n, seed, Uniform{lo, hi});
}

}  // namespace test
