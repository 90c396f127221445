// Randomized differential tests of mixed element types (random_cases.hpp has the
// machinery): every pair of the eight element types (bool, uint8, int32, int64, half,
// bfloat16, float, double) over random shapes, broadcasts and layouts, in
//   where(a < b, a + b, a * b - b)   the promoted type (promotion.hpp's table, checked
//                                    statically), integers wrapping, bool as PyTorch's
//   a / b                            true division, division by zero included
//   a * 3 - 1, a + 0.5               a scalar keeps an integer type (bool becomes int64);
//                                    a floating scalar lifts integers and bool to float
// against a reference of its own: integers in 64-bit unsigned arithmetic reduced to the
// result's width, exactly; bool as (integer result) != 0; floating types in double, rounded
// to the result type (half overflows to infinity), to that type's rounding on the scale of
// the terms (a * b - b cancels). Where both types are integers (or bool) the values reach the ends of
// uint8, int32 and +-2^40, so sums and products wrap; beside a floating type they stay small
// integers, exact in every type. Every pair with every expression runs once on elements
// before the random cases (which draw A, B and the expression). Shared by the CPU and GPU tests.
#pragma once

#include "promotion.hpp"
#include "random_cases.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <type_traits>
#include <vector>

namespace test {

template <class T>
constexpr std::size_t type_index = []<std::size_t... Is>(std::index_sequence<Is...>) {
  return ((std::is_same_v<T, TypeAt<Is>> ? Is : 0) + ...);
}(std::make_index_sequence<type_count>{});

template <class A, class B>
using promoted_t = TypeAt<static_cast<std::size_t>(promoted[type_index<A>][type_index<B>])>;

/// A value of the reference's integer arithmetic (64-bit unsigned) reduced to P: two's
/// complement wrap to P's width, or, for bool, whether it is nonzero.
template <class P>
std::uint64_t wrapped(std::uint64_t value) {
  if constexpr (std::is_same_v<P, bool>) return value != 0;
  else return static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<P>(value)));  // modular since C++20
}
inline double as_value(std::uint64_t value) { return static_cast<double>(static_cast<std::int64_t>(value)); }
inline std::uint64_t as_bits(double integer) { return static_cast<std::uint64_t>(static_cast<std::int64_t>(integer)); }

/// The values an operand of type T takes beside an operand of type U.
template <class T, class U>
double promotion_value(std::mt19937_64& rng) {
  constexpr bool integers = !et::detail::is_floating_v<T> && !et::detail::is_floating_v<U>;
  if constexpr (std::is_same_v<T, bool>) return static_cast<double>(rng() % 2);
  else if constexpr (et::detail::is_floating_v<T>) return std::uniform_real_distribution<double>(-3.0, 3.0)(rng);
  else if constexpr (std::is_same_v<T, std::uint8_t>) return static_cast<double>(rng() % (integers ? 256 : 101));
  else if (!integers || rng() % 2 == 0) return static_cast<double>(static_cast<std::int64_t>(rng() % 201) - 100);
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(rng())));
  else return static_cast<double>(static_cast<std::int64_t>(rng() % (std::uint64_t{1} << 41)) - (std::int64_t{1} << 40));
}

/// The expressions, each with the result type the table gives and the reference.
struct WherePromoted {
  static constexpr const char* name = "where(a < b, a + b, a * b - b)";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return et::where(a < b, a + b, a * b - b); }
  template <class A, class B>
  using type = promoted_t<A, B>;
  /// The size of the terms a floating result rounds (a * b - b cancels).
  static double scale(double a, double b) { return std::fabs(a) + std::fabs(b) + std::fabs(a * b); }
  template <class P>
  static double ref(double a, double b) {
    if constexpr (et::detail::is_floating_v<P>) return a < b ? a + b : a * b - b;
    else {
      const std::uint64_t u = as_bits(a), v = as_bits(b);
      if (a < b) return as_value(wrapped<P>(u + v));
      return as_value(wrapped<P>(wrapped<P>(u * v) - v));  // bool: a * b is (a and b), then - b
    }
  }
};
struct TrueDivision {
  static constexpr const char* name = "a / b";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return a / b; }
  template <class A, class B>
  using type = std::conditional_t<et::detail::is_floating_v<promoted_t<A, B>>, promoted_t<A, B>, float>;
  static double scale(double a, double b) { return std::fabs(a / b); }
  template <class P>
  static double ref(double a, double b) { return a / b; }
};
struct IntegerScalar {
  static constexpr const char* name = "a * 3 - 1";
  template <class A, class B>
  static auto expr(const A& a, const B&) { return a * 3 - 1; }
  template <class A, class B>
  using type = std::conditional_t<std::is_same_v<A, bool>, std::int64_t, A>;
  static double scale(double a, double) { return std::fabs(a * 3) + 1; }
  template <class P>
  static double ref(double a, double) {
    if constexpr (et::detail::is_floating_v<P>) return a * 3 - 1;
    else return as_value(wrapped<P>(as_bits(a) * 3 - 1));
  }
};
struct FloatingScalar {
  static constexpr const char* name = "a + 0.5";
  template <class A, class B>
  static auto expr(const A& a, const B&) { return a + 0.5; }
  template <class A, class B>
  using type = std::conditional_t<et::detail::is_floating_v<A>, A, float>;
  static double scale(double a, double) { return std::fabs(a) + 0.5; }
  template <class P>
  static double ref(double a, double) { return a + 0.5; }
};

/// The tolerance of a result of type P: exact for integers and bool.
template <class P>
constexpr double promotion_tolerance() {
  if constexpr (et::detail::is_floating_v<P>) return random_tolerance<P>();
  else return 0;
}

/// One case: a of type A in a random layout, b of type B broadcast along random axes (a
/// shape with elements where `nonempty`).
template <class A, class B, class Case, class D>
bool run_promotion_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index, bool nonempty = false) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 4, 5, 7, 8, 13};
  RShape shape{}, b_shape{};
  for (int d = 0; d < 3; ++d) {
    shape[d] = nonempty ? extents[1 + rng() % 9] : extents[rng() % 10];
    b_shape[d] = rng() % 3 == 0 ? 1 : shape[d];
  }
  const auto a = random_operand<A>(dev, shape, rng, promotion_value<A, B>);
  const auto b = random_operand<B>(dev, b_shape, rng, promotion_value<B, A>);
  using P = typename Case::template type<A, B>;
  const auto result = et::eval(Case::expr(a.tensor, b.tensor));
  static_assert(std::is_same_v<typename decltype(result)::value_type, P>, "the table's type");
  const std::vector<P> got = result.to_vector();
  RShape i{};
  std::size_t k = 0, wrong = 0, first_wrong = 0;
  double first_got = 0, first_want = 0;
  for (i[0] = 0; i[0] < shape[0]; ++i[0])
    for (i[1] = 0; i[1] < shape[1]; ++i[1])
      for (i[2] = 0; i[2] < shape[2]; ++i[2], ++k) {
        const double u = a.values[k], v = b.values[static_cast<std::size_t>(offset_of(b_shape, i))];
        double want = Case::template ref<P>(u, v);
        if constexpr (et::detail::is_floating_v<P>) want = static_cast<double>(static_cast<P>(want));  // half overflows
        const double value = k < got.size() ? static_cast<double>(got[k]) : std::nan("");
        const bool ok = std::isnan(want)   ? std::isnan(value)
                        : std::isinf(want) ? value == want
                                           : std::fabs(value - want) <= promotion_tolerance<P>() * std::max(1.0, Case::scale(u, v));
        if (!ok && wrong++ == 0) first_wrong = k, first_got = value, first_want = want;
      }
  if (wrong != 0 || got.size() != a.values.size()) {
    INFO("seed " << seed << ", case " << index << ": " << Case::name << ", a " << type_name(A{}) << " "
                 << shape_text(shape) << " " << a.layout << ", b " << type_name(B{}) << " " << shape_text(b_shape) << " "
                 << b.layout << ": " << wrong << " wrong, the first at " << first_wrong << ": got " << first_got
                 << ", want " << first_want);
    CHECK(wrong == 0);
    CHECK(got.size() == a.values.size());
    return false;
  }
  return true;
}

/// The family's expressions, by number: where(a < b, a + b, a * b - b), a / b, a * 3 - 1, a + 0.5.
inline constexpr int promotion_expressions = 4;
template <class A, class B, class D>
bool run_promotion_expression(int which, D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index,
                              bool nonempty = false) {
  switch (which) {
    case 0: return run_promotion_case<A, B, WherePromoted>(dev, rng, seed, index, nonempty);
    case 1: return run_promotion_case<A, B, TrueDivision>(dev, rng, seed, index, nonempty);
    case 2: return run_promotion_case<A, B, IntegerScalar>(dev, rng, seed, index, nonempty);
    default: return run_promotion_case<A, B, FloatingScalar>(dev, rng, seed, index, nonempty);
  }
}

/// The promotion family: first every pair of the eight types with every expression once, on
/// elements (256 cases, whatever the case count), then A, B and the expression drawn at random.
template <class D>
void run_promotion_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 8;
  std::mt19937_64 rng(seed);
  std::int64_t every_failed = 0, every = 0;
  auto every_expression = [&]<class A, class B>() {
    for (int which = 0; which != promotion_expressions; ++which)
      every_failed += !run_promotion_expression<A, B>(which, dev, rng, seed, every++, true);
  };
  [&]<std::size_t... Pairs>(std::index_sequence<Pairs...>) {
    (every_expression.template operator()<TypeAt<Pairs / type_count>, TypeAt<Pairs % type_count>>(), ...);
  }(std::make_index_sequence<type_count * type_count>{});
  std::printf("type promotion on %s: every pair with every expression, %lld cases, %lld failed\n", where,
              static_cast<long long>(every), static_cast<long long>(every_failed));
  CHECK(every_failed == 0);
  run_family_over<bool, std::uint8_t, std::int32_t, std::int64_t, et::half, et::bfloat16, float, double>(
      "type promotion", where, seed, rng, [&](auto a_tag, std::int64_t c) {
        using A = decltype(a_tag);
        const auto pick = rng() % type_count;
        bool ok = true;
        [&]<std::size_t... Js>(std::index_sequence<Js...>) {
          ((Js == pick ? void(ok = run_promotion_expression<A, TypeAt<Js>>(
                                  static_cast<int>(rng() % promotion_expressions), dev, rng, seed, c))
                       : void()),
           ...);
        }(std::make_index_sequence<type_count>{});
        return ok;
      });
}

}  // namespace test
