// Shared subexpressions (include/et/eval/program.hpp), checked on any device against
// double-precision loops over host copies: the CPU tests (test_sharing.cpp) and the GPU
// tests (tests/gpu/test_sharing.cu) run the same cases.
#pragma once

#include <et/core.hpp>

#include <cstdint>
#include <vector>

#include "reference.hpp"

namespace sharing {

/// e_k = e_{k-1} * a / b * (b - e_{k-1}), e_0 = x: every level names the previous one and
/// uses it twice, so the TREE of e_depth doubles per level (4 * (2^depth - 1) operations).
template <int Depth, class X, class A, class B>
auto shared_form(const X& x, const A& a, const B& b) {
  if constexpr (Depth == 0) {
    return x;
  } else {
    const auto e = shared_form<Depth - 1>(x, a, b);
    return e * a / b * (b - e);
  }
}

inline double shared_form_reference(double x, double a, double b, int depth) {
  for (int k = 0; k < depth; ++k) x = x * a / b * (b - x);
  return x;
}

/// Inputs that keep the recurrence bounded: x in (0, 1), a in (0.5, 1), b in (1.5, 2.5).
struct Inputs {
  std::vector<float> x, a, b;
  explicit Inputs(std::size_t n)
      : x(test::random_values<float>(n, 11, 0.05, 0.95)),
        a(test::random_values<float>(n, 12, 0.5, 1.0)),
        b(test::random_values<float>(n, 13, 1.5, 2.5)) {}
};

/// How many node types of E the program binds (computes once per element).
template <class E>
constexpr std::size_t bound_nodes() {
  return et::detail::list_size(et::detail::shared_bindings_t<std::remove_cvref_t<E>>{});
}

// The depth-6 tree has 252 operations; its program binds e1 ... e5 (each computed once per
// element) and holds each leaf once per DAG edge.
using Vector = et::Tensor<float, 1, et::Cpu>;
using Depth6 = decltype(shared_form<6>(std::declval<Vector>(), std::declval<Vector>(), std::declval<Vector>()));
static_assert(et::detail::tree_ops_v<Depth6> == 252);
static_assert(bound_nodes<Depth6>() == 5, "the depth-6 shared form must be evaluated as a DAG: e1 ... e5 bound");
static_assert(sizeof(et::detail::program_t<1, std::int32_t, Depth6>) < 512,
              "the program of the depth-6 shared form must grow with the DAG, not the tree (4 KB)");
static_assert(!et::detail::has_bindings_v<decltype(shared_form<3>(std::declval<Vector>(), std::declval<Vector>(),
                                                                   std::declval<Vector>()))>,
              "small trees stay trees");

/// out = e6 over n elements, contiguous (vector and linear paths).
template <class D>
void check_depth6(D dev, std::int64_t n) {
  CAPTURE(n);
  const Inputs in(static_cast<std::size_t>(n));
  const auto x = et::from_vector(dev, in.x), a = et::from_vector(dev, in.a), b = et::from_vector(dev, in.b);
  const et::Tensor<float, 1, D> out = shared_form<6>(x, a, b);
  std::vector<double> expected(in.x.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = shared_form_reference(in.x[i], in.a[i], in.b[i], 6);
  test::check_all_close(out.to_vector(), expected, 1e-4);
  // A reduction consumes the same program without materializing e6.
  if (n > 0) {
    double total = 0;
    for (double v : expected) total += v;
    CHECK(test::close(static_cast<double>(et::sum(shared_form<6>(x, a, b)).item()), total, 1e-4));
  }
}

/// The shared form over a transposed x, a broadcast row and a broadcast column: the
/// strided path, with bindings read at broadcast coordinates; and an axis reduction.
template <class D>
void check_depth5_strided(D dev, std::int64_t rows, std::int64_t cols) {
  CAPTURE(rows, cols);
  const Inputs in(static_cast<std::size_t>(rows * cols));
  // x: [cols, rows] storage read transposed; a: one value per column; b: one per row.
  const auto x = et::from_vector(dev, in.x, {cols, rows}).transpose(0, 1);
  const std::vector<float> a_row(in.a.begin(), in.a.begin() + cols), b_col(in.b.begin(), in.b.begin() + rows);
  const auto a = et::from_vector(dev, a_row, {cols});
  const auto b = et::from_vector(dev, b_col, {rows, std::int64_t{1}});
  const et::Tensor<float, 2, D> out = shared_form<5>(x, a, b);
  std::vector<double> expected(static_cast<std::size_t>(rows * cols)), row_sums(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double v = shared_form_reference(in.x[static_cast<std::size_t>(c * rows + r)], a_row[std::size_t(c)],
                                             b_col[std::size_t(r)], 5);
      expected[static_cast<std::size_t>(r * cols + c)] = v;
      row_sums[static_cast<std::size_t>(r)] += v;
    }
  test::check_all_close(out.to_vector(), expected, 1e-4);
  const et::Tensor<float, 1, D> sums = et::sum(shared_form<5>(x, a, b), 1);
  test::check_all_close(sums.to_vector(), row_sums, 1e-4);
}

/// The operands of the f(x) / f(y) cases on device D, f being the depth-4 shared form:
/// x and y (y holds the values of a), a and b, and f's double-precision value at every
/// element for x and for y.
template <class D>
struct TwoOperands {
  Inputs in;
  et::Tensor<float, 1, D> x, y, a, b;
  std::vector<double> fx, fy;
  TwoOperands(D dev, std::int64_t n)
      : in(static_cast<std::size_t>(n)),
        x(et::from_vector(dev, in.x)),
        y(et::from_vector(dev, in.a)),
        a(et::from_vector(dev, in.a)),
        b(et::from_vector(dev, in.b)),
        fx(in.x.size()),
        fy(in.x.size()) {
    for (std::size_t i = 0; i < in.x.size(); ++i) {
      fx[i] = shared_form_reference(in.x[i], in.a[i], in.b[i], 4);
      fy[i] = shared_form_reference(in.a[i], in.a[i], in.b[i], 4);
    }
  }
  template <class X>
  auto f(const X& u) const {
    return shared_form<4>(u, a, b);
  }
};

/// f(x) + f(y): both operands have ONE type but different tensors, so the second f's
/// shared nodes differ from the first's and are materialized before the fused kernel
/// runs. f(x) + f(x) (equal operands) shares everything.
template <class D>
void check_same_type_different_operands(D dev, std::int64_t n) {
  CAPTURE(n);
  const TwoOperands<D> t(dev, n);
  static_assert(std::is_same_v<decltype(t.f(t.x)), decltype(t.f(t.y))>);
  const et::Tensor<float, 1, D> different = t.f(t.x) + t.f(t.y) * 3.0f;
  const et::Tensor<float, 1, D> same = t.f(t.x) - t.f(t.x) * 3.0f;
  std::vector<double> expected_different(t.fx.size()), expected_same(t.fx.size());
  for (std::size_t i = 0; i < t.fx.size(); ++i) {
    expected_different[i] = t.fx[i] + 3 * t.fy[i];
    expected_same[i] = t.fx[i] - 3 * t.fx[i];
  }
  test::check_all_close(different.to_vector(), expected_different, 1e-4);
  test::check_all_close(same.to_vector(), expected_same, 1e-4);
}

/// g(u, v) = f(u) * 2 + f(v) used as g(x, y) - g(y, x) / 2: the second g's bound nodes
/// need f's bindings to hold f(y) and f(x) at once, so one of them is materialized first.
template <class D>
void check_conflicting_uses(D dev, std::int64_t n) {
  CAPTURE(n);
  const TwoOperands<D> t(dev, n);
  auto g = [&](const auto& u, const auto& v) { return t.f(u) * 2.0f + t.f(v); };
  const et::Tensor<float, 1, D> out = g(t.x, t.y) - g(t.y, t.x) * 0.5f;
  std::vector<double> expected(t.fx.size());
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = (2 * t.fx[i] + t.fy[i]) - (2 * t.fy[i] + t.fx[i]) * 0.5;
  test::check_all_close(out.to_vector(), expected, 1e-4);
}

}  // namespace sharing
