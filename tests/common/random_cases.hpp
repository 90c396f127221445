// Randomized differential tests (issue 16), shared by the CPU and GPU tests: fused
// expressions and reductions (sum, mean, max, min; of all elements or along one axis) over
// random shapes (extents 0, 1, odd, up to 13; up to 31 for reductions), broadcast operands and
// non-contiguous layouts (permuted, stepped slices, expanded axes; on the device, the
// views are made there), in every floating element type, against a double-precision
// reference written from the definitions, read from the operands' host values with index
// arithmetic of its own. The seed is printed with the case count, and with every failure.
//
//   ET_RANDOM_CASES  cases per family (default 10000: the CI's quick mode; gpu-check runs more)
//   ET_RANDOM_SEED   the seed of the run (default 20261123)
#pragma once

#include "reference.hpp"

#include <et/et.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace test {

using RShape = std::array<std::int64_t, 3>;

inline std::int64_t random_case_count() {
  const char* text = std::getenv("ET_RANDOM_CASES");
  return text ? std::max<std::int64_t>(1, std::atoll(text)) : 10000;
}

inline std::uint64_t random_seed() {
  const char* text = std::getenv("ET_RANDOM_SEED");
  return text ? std::strtoull(text, nullptr, 10) : 20261123u;
}

inline std::int64_t count_of(const RShape& s) { return s[0] * s[1] * s[2]; }

inline std::string shape_text(const RShape& s) {
  return "[" + std::to_string(s[0]) + ", " + std::to_string(s[1]) + ", " + std::to_string(s[2]) + "]";
}

/// Row-major offset of index i in shape s, reading axes of extent 1 at 0 (broadcasting).
inline std::int64_t offset_of(const RShape& s, const RShape& i) {
  std::int64_t offset = 0;
  for (int d = 0; d < 3; ++d) offset = offset * s[d] + (s[d] == 1 ? 0 : i[d]);
  return offset;
}

/// Calls f(i), or f(i, k) with k the row-major position of i, for every index i of shape s.
template <class F>
void for_each_index(const RShape& s, F f) {
  RShape i{};
  std::size_t k = 0;
  for (i[0] = 0; i[0] < s[0]; ++i[0])
    for (i[1] = 0; i[1] < s[1]; ++i[1])
      for (i[2] = 0; i[2] < s[2]; ++i[2], ++k) {
        if constexpr (std::is_invocable_v<F&, const RShape&, std::size_t>) f(i, k);
        else f(i);
      }
}

/// An operand: a tensor on D of the given shape, read through a random layout, and its
/// logical values (row-major over the shape) as T rounds them.
template <class T, class D>
struct RandomOperand {
  et::Tensor<T, 3, D> tensor;
  std::vector<double> values;
  const char* layout = "";
};

/// Its values are draw(rng), converted to T.
template <class T, class D, class Draw>
RandomOperand<T, D> random_operand(D dev, const RShape& shape, std::mt19937_64& rng, Draw draw) {
  const int kind = static_cast<int>(rng() % 4);
  const int axis = static_cast<int>(rng() % 3);
  RShape base_shape = shape;
  std::array<int, 3> order{0, 1, 2};  // kind 1: tensor = base.permute(order)
  if (kind == 1) {
    std::shuffle(order.begin(), order.end(), rng);
    for (int d = 0; d < 3; ++d) base_shape[order[d]] = shape[d];
  } else if (kind == 2) {
    base_shape[axis] = 2 * shape[axis];  // tensor = every other element along `axis`
  } else if (kind == 3) {
    base_shape[axis] = 1;  // tensor = base expanded along `axis`
  }
  std::vector<T> base(static_cast<std::size_t>(count_of(base_shape)));
  for (std::size_t j = 0; j < base.size(); ++j) base[j] = static_cast<T>(draw(rng));  // std::vector<bool> too
  const auto on_device = et::from_vector(et::cpu, base, base_shape).to(dev);
  RandomOperand<T, D> out;
  out.layout = kind == 0 ? "contiguous" : kind == 1 ? "permuted" : kind == 2 ? "stepped slice" : "expanded";
  out.tensor = kind == 0   ? on_device
               : kind == 1 ? on_device.permute(order)
               : kind == 2 ? on_device.slice(axis, 0, 2 * shape[axis], 2)
                           : on_device.expand(shape);
  out.values.resize(static_cast<std::size_t>(count_of(shape)));
  RShape i{};
  std::size_t k = 0;
  for (i[0] = 0; i[0] < shape[0]; ++i[0])
    for (i[1] = 0; i[1] < shape[1]; ++i[1])
      for (i[2] = 0; i[2] < shape[2]; ++i[2]) {
        RShape b = i;
        if (kind == 1) for (int d = 0; d < 3; ++d) b[order[d]] = i[d];
        if (kind == 2) b[axis] = 2 * i[axis];
        if (kind == 3) b[axis] = 0;
        out.values[k++] = static_cast<double>(base[static_cast<std::size_t>(offset_of(base_shape, b))]);
      }
  return out;
}

/// An operand of values uniform in [-3, 3).
template <class T, class D>
RandomOperand<T, D> random_operand(D dev, const RShape& shape, std::mt19937_64& rng) {
  return random_operand<T>(dev, shape, rng, std::uniform_real_distribution<double>(-3.0, 3.0));
}

/// The fused expressions of the elementwise family, each with its reference.
struct MulAdd {
  static constexpr const char* name = "a * b + 2";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return a * b + 2.0f; }
  static double ref(double a, double b) { return a * b + 2.0; }
};
struct WhereExp {
  static constexpr const char* name = "where(a > b, exp(-abs(a)), b - a)";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return et::where(a > b, et::exp(-et::abs(a)), b - a); }
  static double ref(double a, double b) { return a > b ? std::exp(-std::fabs(a)) : b - a; }
};
struct MaxOverSquare {
  static constexpr const char* name = "maximum(a, b) / (1 + square(b))";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return et::maximum(a, b) / (1.0f + et::square(b)); }
  static double ref(double a, double b) { return std::max(a, b) / (1.0 + b * b); }
};
struct Activations {
  static constexpr const char* name = "tanh(a) * sigmoid(b) - relu(a - b)";
  template <class A, class B>
  static auto expr(const A& a, const B& b) { return et::tanh(a) * et::sigmoid(b) - et::relu(a - b); }
  static double ref(double a, double b) { return std::tanh(a) / (1.0 + std::exp(-b)) - std::max(a - b, 0.0); }
};

/// Relative tolerance for a result rounded to T from a float (or double) computation.
template <class T>
constexpr double random_tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  else if constexpr (std::is_same_v<T, float>) return 2e-6;
  else if constexpr (std::is_same_v<T, et::half>) return 2e-3;
  else return 1.6e-2;  // bfloat16
}

inline const char* type_name(float) { return "float"; }
inline const char* type_name(double) { return "double"; }
inline const char* type_name(et::half) { return "half"; }
inline const char* type_name(et::bfloat16) { return "bfloat16"; }
inline const char* type_name(std::int32_t) { return "int32"; }
inline const char* type_name(std::int64_t) { return "int64"; }
inline const char* type_name(std::uint8_t) { return "uint8"; }
inline const char* type_name(bool) { return "bool"; }

/// One case: random shape, a random layout for a, b broadcast along random axes, the
/// result evaluated (or assigned into a permuted view), compared element by element.
template <class T, class Case, class D>
bool run_elementwise_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 7, 8, 9, 11, 13, 13};
  RShape shape{}, b_shape{};
  for (int d = 0; d < 3; ++d) {
    shape[d] = extents[rng() % 16];
    b_shape[d] = rng() % 3 == 0 ? 1 : shape[d];
  }
  const auto a = random_operand<T>(dev, shape, rng);
  const auto b = random_operand<T>(dev, b_shape, rng);
  const bool into_view = rng() % 2 == 0;
  std::vector<T> got;
  if (into_view) {  // a destination read as its transpose: the strided write path
    auto target = et::empty<T>(dev, RShape{shape[2], shape[1], shape[0]}).permute({2, 1, 0});
    target = Case::expr(a.tensor, b.tensor);
    got = target.to_vector();
  } else {
    got = et::eval(Case::expr(a.tensor, b.tensor)).to_vector();
  }
  const double tolerance = random_tolerance<T>();
  RShape i{};
  std::size_t k = 0, wrong = 0, first_wrong = 0;
  for (i[0] = 0; i[0] < shape[0]; ++i[0])
    for (i[1] = 0; i[1] < shape[1]; ++i[1])
      for (i[2] = 0; i[2] < shape[2]; ++i[2], ++k) {
        const double want = Case::ref(a.values[k], b.values[static_cast<std::size_t>(offset_of(b_shape, i))]);
        if (k >= got.size() || !close(static_cast<double>(got[k]), want, tolerance)) {
          if (wrong++ == 0) first_wrong = k;
        }
      }
  if (wrong != 0 || got.size() != a.values.size()) {
    INFO("seed " << seed << ", case " << index << ": " << Case::name << " on " << type_name(T{}) << ", a "
                 << shape_text(shape) << " " << a.layout << ", b " << shape_text(b_shape) << " " << b.layout
                 << (into_view ? ", into a permuted view" : "") << ": " << wrong << " wrong, the first at "
                 << first_wrong);
    CHECK(wrong == 0);
    CHECK(got.size() == a.values.size());
    return false;
  }
  return true;
}

/// Runs `cases` cases of a family: each draws one of the types Ts, then one_case(a value of
/// that type, case number) draws the rest and says whether it passed. Prints the count and
/// the seed.
template <class... Ts, class OneCase>
void run_family_over(const char* family, const char* where, std::uint64_t seed, std::mt19937_64& rng,
                     OneCase one_case, std::int64_t cases = random_case_count()) {
  std::int64_t failed = 0;
  for (std::int64_t c = 0; c < cases; ++c) {
    const auto pick = rng() % sizeof...(Ts);
    std::size_t k = 0;
    bool ok = true;
    ((k++ == pick ? void(ok = one_case(Ts{}, c)) : void()), ...);
    failed += !ok;
  }
  std::printf("random differential, %s on %s: %lld cases, %lld failed, seed %llu\n", family, where,
              static_cast<long long>(cases), static_cast<long long>(failed), static_cast<unsigned long long>(seed));
  CHECK(failed == 0);
}

/// run_family_over the four floating types.
template <class OneCase>
void run_family(const char* family, const char* where, std::uint64_t seed, std::mt19937_64& rng, OneCase one_case,
                std::int64_t cases = random_case_count()) {
  run_family_over<float, double, et::half, et::bfloat16>(family, where, seed, rng, one_case, cases);
}

/// The elementwise family: the four expressions above over the four floating types.
template <class D>
void run_elementwise_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed();
  std::mt19937_64 rng(seed);
  run_family("elementwise", where, seed, rng, [&](auto tag, std::int64_t c) {
    using T = decltype(tag);
    switch (rng() % 4) {
      case 0: return run_elementwise_case<T, MulAdd>(dev, rng, seed, c);
      case 1: return run_elementwise_case<T, WhereExp>(dev, rng, seed, c);
      case 2: return run_elementwise_case<T, MaxOverSquare>(dev, rng, seed, c);
      default: return run_elementwise_case<T, Activations>(dev, rng, seed, c);
    }
  });
}

/// The reductions of the reduction family, each with its reference over double values.
struct SumReduction {
  static constexpr const char* name = "sum";
  static constexpr bool needs_elements = false;
  template <class E>
  static auto all(const E& e) { return et::sum(e); }
  template <class E>
  static auto along(const E& e, int axis) { return et::sum(e, axis); }
  static double ref(const std::vector<double>& v) {
    double total = 0;
    for (const double x : v) total += x;
    return total;
  }
};
struct MeanReduction {
  static constexpr const char* name = "mean";
  static constexpr bool needs_elements = true;
  template <class E>
  static auto all(const E& e) { return et::mean(e); }
  template <class E>
  static auto along(const E& e, int axis) { return et::mean(e, axis); }
  static double ref(const std::vector<double>& v) { return SumReduction::ref(v) / static_cast<double>(v.size()); }
};
struct MaxReduction {
  static constexpr const char* name = "max";
  static constexpr bool needs_elements = true;
  template <class E>
  static auto all(const E& e) { return et::max(e); }
  template <class E>
  static auto along(const E& e, int axis) { return et::max(e, axis); }
  static double ref(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
};
struct MinReduction {
  static constexpr const char* name = "min";
  static constexpr bool needs_elements = true;
  template <class E>
  static auto all(const E& e) { return et::min(e); }
  template <class E>
  static auto along(const E& e, int axis) { return et::min(e, axis); }
  static double ref(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
};

/// One reduction case: a random shape and layout, the whole tensor or one random axis.
/// The tolerance scales with the sum of magnitudes (the rounding of a sum's partial sums);
/// an empty reduction that needs elements must throw.
template <class T, class Op, class D>
bool run_reduction_case(D dev, std::mt19937_64& rng, std::uint64_t seed, std::int64_t index) {
  static constexpr std::int64_t extents[] = {0, 1, 1, 2, 3, 3, 4, 5, 5, 7, 8, 9, 11, 13, 17, 31};
  RShape shape{};
  for (int d = 0; d < 3; ++d) shape[d] = extents[rng() % 16];
  const auto x = random_operand<T>(dev, shape, rng);
  const int axis = static_cast<int>(rng() % 4) - 1;  // -1: every element
  // The groups of values each output reduces, in the output's row-major order.
  std::vector<std::vector<double>> groups;
  if (axis < 0) {
    groups.push_back(x.values);
  } else {
    RShape out_shape = shape, i{};
    out_shape[axis] = 1;
    groups.resize(static_cast<std::size_t>(count_of(out_shape)));
    std::size_t k = 0;
    for (i[0] = 0; i[0] < shape[0]; ++i[0])
      for (i[1] = 0; i[1] < shape[1]; ++i[1])
        for (i[2] = 0; i[2] < shape[2]; ++i[2], ++k) {
          RShape o = i;
          o[axis] = 0;
          groups[static_cast<std::size_t>(offset_of(out_shape, o))].push_back(x.values[k]);
        }
  }
  std::ostringstream what;
  what << "seed " << seed << ", case " << index << ": " << Op::name << " on " << type_name(T{}) << " "
       << shape_text(shape) << " " << x.layout << (axis < 0 ? ", every element" : ", axis ")
       << (axis < 0 ? std::string() : std::to_string(axis));
  INFO(what.str());
  const bool empty_group = !groups.empty() && groups.front().empty();
  if (Op::needs_elements && empty_group) {
    if (axis < 0) CHECK_THROWS_AS(Op::all(x.tensor), et::Error);
    else CHECK_THROWS_AS(Op::along(x.tensor, axis), et::Error);
    return true;
  }
  std::vector<T> got;
  if (axis < 0) got = Op::all(x.tensor).to_vector();
  else got = Op::along(x.tensor, axis).to_vector();
  if (got.size() != groups.size()) {
    CHECK(got.size() == groups.size());
    return false;
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    double magnitude = 0;
    for (const double v : groups[g]) magnitude += std::fabs(v);
    const double want = Op::ref(groups[g]);
    const double allowed = random_tolerance<T>() * std::max(1.0, std::fabs(want)) + 1e-6 * magnitude;
    if (!(std::fabs(static_cast<double>(got[g]) - want) <= allowed)) {
      CAPTURE(g, static_cast<double>(got[g]), want, allowed);
      CHECK(false);
      return false;
    }
  }
  return true;
}

/// The reduction family: sum, mean, max and min over the four floating types.
template <class D>
void run_reduction_family(const char* where, D dev) {
  const std::uint64_t seed = random_seed() + 1;
  std::mt19937_64 rng(seed);
  run_family("reductions", where, seed, rng, [&](auto tag, std::int64_t c) {
    using T = decltype(tag);
    switch (rng() % 4) {
      case 0: return run_reduction_case<T, SumReduction>(dev, rng, seed, c);
      case 1: return run_reduction_case<T, MeanReduction>(dev, rng, seed, c);
      case 2: return run_reduction_case<T, MaxReduction>(dev, rng, seed, c);
      default: return run_reduction_case<T, MinReduction>(dev, rng, seed, c);
    }
  });
}

}  // namespace test
