// The random op-gradient family's elementwise operations (the functors, fused expressions,
// clamp, where), reductions, and softmax, log_softmax and logsumexp
// (random_op_grad_cases.hpp has the method).
#pragma once

#include "random_op_grad_setup.hpp"

namespace test::op_grad {

// --- Elementwise functors ----------------------------------------------------------------

template <class Fn>
struct Unary : OpCase {
  static constexpr const char* name = Fn::name;
  void draw(OpSetup& s, std::mt19937_64& rng) { s.add(any_shape(rng), rng, Fn::lo, Fn::hi); }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::eval(Fn::apply(e.template input<3>(0))));
  }
};
#define ET_TEST_UNARY(TYPE, TEXT, LO, HI, ...)                     \
  struct TYPE {                                                    \
    static constexpr const char* name = TEXT;                      \
    static constexpr double lo = LO, hi = HI;                      \
    template <class X>                                             \
    static auto apply(const X& x) { return __VA_ARGS__; }          \
  };
ET_TEST_UNARY(NegateFn, "-x", -3, 3, -x)
ET_TEST_UNARY(AbsFn, "abs(x)", -3, 3, et::abs(x))
ET_TEST_UNARY(SquareFn, "square(x)", -3, 3, et::square(x))
ET_TEST_UNARY(ReluFn, "relu(x)", -3, 3, et::relu(x))
ET_TEST_UNARY(ExpFn, "exp(x)", -3, 2, et::exp(x))
ET_TEST_UNARY(LogFn, "log(x)", 0.25, 3, et::log(x))
ET_TEST_UNARY(Log1pFn, "log1p(x)", -0.75, 3, et::log1p(x))
ET_TEST_UNARY(SqrtFn, "sqrt(x)", 0.25, 3, et::sqrt(x))
ET_TEST_UNARY(RsqrtFn, "rsqrt(x)", 0.25, 3, et::rsqrt(x))
ET_TEST_UNARY(SinFn, "sin(x)", -3, 3, et::sin(x))
ET_TEST_UNARY(CosFn, "cos(x)", -3, 3, et::cos(x))
ET_TEST_UNARY(TanhFn, "tanh(x)", -3, 3, et::tanh(x))
ET_TEST_UNARY(SigmoidFn, "sigmoid(x)", -3, 3, et::sigmoid(x))
ET_TEST_UNARY(GeluFn, "gelu(x)", -3, 3, et::gelu(x))
ET_TEST_UNARY(GeluTanhFn, "gelu_tanh(x)", -3, 3, et::gelu_tanh(x))
ET_TEST_UNARY(PowScalarFn, "pow(x, 2.5) + pow(x, -1.5)", 0.25, 3, et::pow(x, 2.5) + et::pow(x, -1.5))
#undef ET_TEST_UNARY

/// a op b with either side broadcast against the other.
template <class Fn>
struct Binary : OpCase {
  static constexpr const char* name = Fn::name;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng), part = broadcast_of(full, rng);
    const bool left = coin(rng);
    s.add(left ? part : full, rng, Fn::lo0, Fn::hi0);
    s.add(left ? full : part, rng, Fn::lo1, Fn::hi1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    e.output(et::eval(Fn::apply(e.template input<3>(0), e.template input<3>(1))));
  }
};
#define ET_TEST_BINARY(TYPE, TEXT, LO0, HI0, LO1, HI1, ...)       \
  struct TYPE {                                                    \
    static constexpr const char* name = TEXT;                      \
    static constexpr double lo0 = LO0, hi0 = HI0, lo1 = LO1, hi1 = HI1; \
    template <class X>                                             \
    static auto apply(const X& a, const X& b) { return __VA_ARGS__; } \
  };
ET_TEST_BINARY(AddFn, "a + b", -3, 3, -3, 3, a + b)
ET_TEST_BINARY(SubFn, "a - b", -3, 3, -3, 3, a - b)
ET_TEST_BINARY(MulFn, "a * b", -3, 3, -3, 3, a * b)
ET_TEST_BINARY(DivFn, "a / b", -3, 3, 0.5, 3, a / b)
ET_TEST_BINARY(PowFn, "pow(a, b)", 0.25, 2.5, -2, 2, et::pow(a, b))
ET_TEST_BINARY(MaximumFn, "maximum(a, b)", -3, 3, -3, 3, et::maximum(a, b))
ET_TEST_BINARY(MinimumFn, "minimum(a, b)", -3, 3, -3, 3, et::minimum(a, b))
#undef ET_TEST_BINARY

/// Scalars on either side of each operator, a leaf read three times (one node, one
/// gradient written by the first of its reads), an operand of rank 2 (broadcast along the
/// leading axis), cast<double>, assigned into a new tensor or a permuted destination.
struct Fused : OpCase {
  static constexpr const char* name =
      "(2 - a) * b + sin(a) * c / 4 - 1.5 / (1 + square(c)) + cast<double>(a) * 0.5, c of rank 2";
  bool into_permuted = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng), c = broadcast_of(full, rng);
    s.add(full, rng);
    s.add(broadcast_of(full, rng), rng);
    s.add({c[1], c[2]}, rng);
    into_permuted = coin(rng);
    if (into_permuted) s.note("into a permuted destination");
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    const auto c = e.template input<2>(2);
    const auto expr = (2.0 - a) * b + et::sin(a) * c / 4.0 - 1.5 / (1.0 + et::square(c)) + et::cast<double>(a) * 0.5;
    if (!into_permuted) return e.output(et::eval(expr));
    auto out = et::empty<double>(e.dev, std::array<std::int64_t, 3>{a.size(2), a.size(1), a.size(0)}).permute({2, 1, 0});
    out = expr;
    e.output(out);
  }
};

/// clamp(x, lo, hi), bounds broadcast tensors (hi < lo at places) or scalars.
struct Clamp : OpCase {
  static constexpr const char* name = "clamp(x, lo, hi)";
  bool scalar_bounds = false;
  double lo_at = 0, hi_at = 0;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng);
    s.add(full, rng);
    scalar_bounds = rng() % 3 == 0;
    if (scalar_bounds) {
      std::uniform_real_distribution<double> where(0.1, 0.9);
      lo_at = where(rng), hi_at = where(rng);
      s.note("scalar bounds");
    } else {
      s.add(broadcast_of(full, rng), rng);
      s.add(broadcast_of(full, rng), rng);
    }
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if (scalar_bounds) return e.output(et::eval(et::clamp(x, e.setup.boundary(0, lo_at), e.setup.boundary(0, hi_at))));
    e.output(et::eval(et::clamp(x, e.template input<3>(1), e.template input<3>(2))));
  }
};

/// where(mask, a, 2 b) with an int64 mask, or where(a > b, a * b, b - a).
struct Where : OpCase {
  static constexpr const char* name = "where(mask != 0, a, 2 b) or where(a > b, a * b, b - a)";
  bool compare = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    const Extents full = any_shape(rng);
    compare = coin(rng);
    s.add(compare || coin(rng) ? full : broadcast_of(full, rng), rng);
    s.add(broadcast_of(full, rng), rng);
    if (compare) s.note("the comparison");
    else s.add_index(broadcast_of(full, rng), rng, 0, 1);
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto a = e.template input<3>(0), b = e.template input<3>(1);
    if (compare) return e.output(et::eval(et::where(a > b, a * b, b - a)));
    e.output(et::eval(et::where(e.template index<3>() != 0, a, 2.0 * b)));
  }
};

// --- Reductions ---------------------------------------------------------------------------

/// Fn over all elements (mode 0), along an axis (1) or along it with keepdim (2).
template <class Fn>
struct Reduction : OpCase {
  static constexpr const char* name = Fn::name;
  int mode = 0, axis = 0;
  int zeros = 0;  // prod: exact zeros among the values
  void draw(OpSetup& s, std::mt19937_64& rng) {
    mode = static_cast<int>(rng() % 3);
    axis = any_axis(rng, 3);
    Extents shape = any_shape(rng);
    if (Fn::needs_elements && mode == 0) shape = some_shape(rng);
    if (Fn::needs_elements) shape[normalized(axis, 3)] = between(rng, 1, 5);
    s.add(shape, rng, Fn::lo, Fn::hi);
    if (Fn::binary) s.add(broadcast_of(shape, rng), rng);
    s.note(mode == 0 ? "every element" : "axis " + std::to_string(axis) + (mode == 2 ? ", keepdim" : ""));
    if (Fn::zeros) zeros = static_cast<int>(rng() % 3);
  }
  void adjust(OpSetup& s, std::mt19937_64& rng) const {
    OpInput& x = s.inputs[0];
    const std::int64_t n = product_of(x.shape);
    for (int z = 0; z < zeros && n > 0; ++z) x.values[x.leaf_offset(between(rng, 0, n - 1))] = 0.0;
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    auto reduce = [&](const auto& arg) {
      if (mode == 0) e.output(Fn::all(arg));
      else if (mode == 1) e.output(Fn::along(arg, axis));
      else e.output(Fn::along(arg, axis, true));
    };
    if constexpr (Fn::binary) reduce(Fn::operand(x, e.template input<3>(1)));
    else reduce(x);
  }
};
#define ET_TEST_REDUCTION(TYPE, TEXT, FUNCTION, BINARY, NEEDS_ELEMENTS, ZEROS, LO, HI, ...) \
  struct TYPE {                                                                              \
    static constexpr const char* name = TEXT;                                                \
    static constexpr bool binary = BINARY, needs_elements = NEEDS_ELEMENTS, zeros = ZEROS;  \
    static constexpr double lo = LO, hi = HI;                                                \
    template <class X>                                                                       \
    static auto operand(const X& a, const X& b) { return __VA_ARGS__; }                      \
    template <class E>                                                                       \
    static auto all(const E& e) { return et::FUNCTION(e); }                                  \
    template <class E>                                                                       \
    static auto along(const E& e, int axis) { return et::FUNCTION(e, axis); }                \
    template <class E>                                                                       \
    static auto along(const E& e, int axis, bool) { return et::FUNCTION(e, axis, true); }    \
  };
ET_TEST_REDUCTION(SumFn, "sum(a * b)", sum, true, false, false, -3, 3, a * b)
ET_TEST_REDUCTION(MeanFn, "mean(a - b)", mean, true, true, false, -3, 3, a - b)
ET_TEST_REDUCTION(MaxFn, "max(x)", max, false, true, false, -3, 3, a)
ET_TEST_REDUCTION(MinFn, "min(x)", min, false, true, false, -3, 3, a)
ET_TEST_REDUCTION(ProdFn, "prod(x), with 0, 1 or 2 exact zeros", prod, false, false, true, -1.5, 1.5, a)
ET_TEST_REDUCTION(NormFn, "norm(x)", norm, false, false, false, -3, 3, a)
#undef ET_TEST_REDUCTION

/// softmax, log_softmax, logsumexp along an axis (logsumexp: keepdim or not).
template <int Kind>
struct RowOperation : OpCase {
  static constexpr const char* name = Kind == 0 ? "softmax(x, axis)" : Kind == 1 ? "log_softmax(x, axis)"
                                                                                 : "logsumexp(x, axis)";
  int axis = 0;
  bool keep = false;
  void draw(OpSetup& s, std::mt19937_64& rng) {
    axis = any_axis(rng, 3);
    Extents shape = any_shape(rng);
    if (Kind == 2) shape[normalized(axis, 3)] = between(rng, 1, 5);  // an empty row's logsumexp is -inf
    s.add(shape, rng);
    keep = Kind == 2 && coin(rng);
    s.note("axis " + std::to_string(axis) + (keep ? ", keepdim" : ""));
  }
  template <class D>
  void f(OpEval<D>& e) const {
    const auto x = e.template input<3>(0);
    if constexpr (Kind == 0) e.output(et::softmax(x, axis));
    else if constexpr (Kind == 1) e.output(et::log_softmax(x, axis));
    else if (keep) e.output(et::logsumexp(x, axis, true));
    else e.output(et::logsumexp(x, axis));
  }
};

}  // namespace test::op_grad
