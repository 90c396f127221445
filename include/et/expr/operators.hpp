// The public elementwise vocabulary: operators and named functions. Each builds a lazy
// expression node; nothing runs until the expression is assigned or reduced.
// Operands on different devices stop compilation with a message naming both; each
// function checks its own operands first thing, so the message comes with the shortest
// instantiation backtrace the compiler can print (device.hpp, same_devices).
#pragma once

#include "et/expr/functors.hpp"
#include "et/expr/node.hpp"

namespace et {

/// At least one side of a binary operator must be an etensor expression.
template <class A, class B>
concept ExpressionPair = Operand<A> && Operand<B> && (Expression<A> || Expression<B>);

// Arithmetic: NumPy broadcasting, PyTorch type promotion (types.hpp), integer wraparound.
template <class A, class B> requires ExpressionPair<A, B>
auto operator+(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Add>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator-(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Sub>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator*(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Mul>(a, b);
}
/// True division: integer operands give float, as in PyTorch.
template <class A, class B> requires ExpressionPair<A, B>
auto operator/(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Div>(a, b);
}
template <Expression E>
auto operator-(const E& e) { return detail::make_map<detail::Negate>(e); }

// Comparisons give bool masks.
template <class A, class B> requires ExpressionPair<A, B>
auto operator==(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Equal>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator!=(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::NotEqual>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator<(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Less>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator<=(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::LessEqual>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator>(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Greater>(a, b);
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator>=(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::GreaterEqual>(a, b);
}

// Math functions: integer inputs compute in float.
template <Expression E> auto exp(const E& e) { return detail::make_map<detail::Exp>(e); }
template <Expression E> auto log(const E& e) { return detail::make_map<detail::Log>(e); }
template <Expression E> auto log1p(const E& e) { return detail::make_map<detail::Log1p>(e); }
template <Expression E> auto sqrt(const E& e) { return detail::make_map<detail::Sqrt>(e); }
/// 1/sqrt(x); on CUDA the hardware rsqrt (within 2 ulp in float).
template <Expression E> auto rsqrt(const E& e) { return detail::make_map<detail::Rsqrt>(e); }
template <Expression E> auto sin(const E& e) { return detail::make_map<detail::Sin>(e); }
template <Expression E> auto cos(const E& e) { return detail::make_map<detail::Cos>(e); }
template <Expression E> auto tanh(const E& e) { return detail::make_map<detail::Tanh>(e); }
template <Expression E> auto sigmoid(const E& e) { return detail::make_map<detail::Sigmoid>(e); }
/// Exact GELU, x * Phi(x) with erf (PyTorch's approximate='none').
template <Expression E> auto gelu(const E& e) { return detail::make_map<detail::Gelu>(e); }
/// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (PyTorch's
/// approximate='tanh'); after a matmul plus bias it fuses into the cuBLASLt call.
template <Expression E> auto gelu_tanh(const E& e) { return detail::make_map<detail::GeluTanh>(e); }
// These keep the element type.
template <Expression E> auto abs(const E& e) { return detail::make_map<detail::Abs>(e); }
template <Expression E> auto square(const E& e) { return detail::make_map<detail::Square>(e); }
/// max(x, 0); NaN stays NaN.
template <Expression E> auto relu(const E& e) { return detail::make_map<detail::Relu>(e); }

/// x to the power p (either may be a scalar); computes in floating point.
template <class A, class B> requires ExpressionPair<A, B>
auto pow(const A& x, const B& p) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Pow>(x, p);
}
/// Elementwise maximum; a NaN on either side gives NaN (torch.maximum).
template <class A, class B> requires ExpressionPair<A, B>
auto maximum(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Maximum>(a, b);
}
/// Elementwise minimum; a NaN on either side gives NaN (torch.minimum).
template <class A, class B> requires ExpressionPair<A, B>
auto minimum(const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Minimum>(a, b);
}
/// minimum(maximum(x, lo), hi); lo and hi may be scalars or expressions.
template <Expression E, Operand L, Operand H>
auto clamp(const E& x, const L& lo, const H& hi) {
  [[maybe_unused]] detail::same_device_operands<E, L, H> check;
  return detail::make_map<detail::Clamp>(x, lo, hi);
}
/// a where mask is true, b elsewhere; all three broadcast together.
template <Expression M, Operand A, Operand B>
auto where(const M& mask, const A& a, const B& b) {
  [[maybe_unused]] detail::same_device_operands<M, A, B> check;
  return detail::make_map<detail::Where>(mask, a, b);
}
/// Converts each element to U (float -> int truncates toward zero; nonzero -> true).
template <Element U, Expression E>
auto cast(const E& e) { return detail::make_map<detail::Cast<U>>(e); }

}  // namespace et
