// The public elementwise vocabulary: operators and named functions. Each builds a lazy
// expression node; nothing runs until the expression is assigned or reduced.
// Operands on different devices stop compilation with a message naming both; each
// function checks its own operands first thing, so the message comes with the shortest
// instantiation backtrace the compiler can print (device.hpp, same_devices).
#pragma once

#include "et/expr/functors.hpp"
#include "et/expr/node.hpp"

#include <utility>

namespace et {

/// At least one side of a binary operator must be an etensor expression.
template <class A, class B>
concept ExpressionPair = Operand<A> && Operand<B> && (Expression<A> || Expression<B>);

// Arithmetic: NumPy broadcasting, PyTorch type promotion (types.hpp), integer wraparound.
template <class A, class B> requires ExpressionPair<A, B>
auto operator+(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Add>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator-(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Sub>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator*(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Mul>(std::forward<A>(a), std::forward<B>(b));
}
/// True division: integer operands give float, as in PyTorch.
template <class A, class B> requires ExpressionPair<A, B>
auto operator/(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Div>(std::forward<A>(a), std::forward<B>(b));
}
template <Expression E>
auto operator-(E&& e) { return detail::make_map<detail::Negate>(std::forward<E>(e)); }

// Comparisons give bool masks.
template <class A, class B> requires ExpressionPair<A, B>
auto operator==(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Equal>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator!=(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::NotEqual>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator<(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Less>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator<=(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::LessEqual>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator>(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Greater>(std::forward<A>(a), std::forward<B>(b));
}
template <class A, class B> requires ExpressionPair<A, B>
auto operator>=(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::GreaterEqual>(std::forward<A>(a), std::forward<B>(b));
}

// Math functions: integer inputs compute in float.
template <Expression E> auto exp(E&& e) { return detail::make_map<detail::Exp>(std::forward<E>(e)); }
template <Expression E> auto log(E&& e) { return detail::make_map<detail::Log>(std::forward<E>(e)); }
template <Expression E> auto log1p(E&& e) { return detail::make_map<detail::Log1p>(std::forward<E>(e)); }
template <Expression E> auto sqrt(E&& e) { return detail::make_map<detail::Sqrt>(std::forward<E>(e)); }
/// 1/sqrt(x); on CUDA the hardware rsqrt (within 2 ulp in float).
template <Expression E> auto rsqrt(E&& e) { return detail::make_map<detail::Rsqrt>(std::forward<E>(e)); }
template <Expression E> auto sin(E&& e) { return detail::make_map<detail::Sin>(std::forward<E>(e)); }
template <Expression E> auto cos(E&& e) { return detail::make_map<detail::Cos>(std::forward<E>(e)); }
template <Expression E> auto tanh(E&& e) { return detail::make_map<detail::Tanh>(std::forward<E>(e)); }
template <Expression E> auto sigmoid(E&& e) { return detail::make_map<detail::Sigmoid>(std::forward<E>(e)); }
/// Exact GELU, x * Phi(x) with erf (PyTorch's approximate='none').
template <Expression E> auto gelu(E&& e) { return detail::make_map<detail::Gelu>(std::forward<E>(e)); }
/// GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (PyTorch's
/// approximate='tanh'); after a matmul plus bias it fuses into the cuBLASLt call.
template <Expression E> auto gelu_tanh(E&& e) { return detail::make_map<detail::GeluTanh>(std::forward<E>(e)); }
// These keep the element type.
template <Expression E> auto abs(E&& e) { return detail::make_map<detail::Abs>(std::forward<E>(e)); }
template <Expression E> auto square(E&& e) { return detail::make_map<detail::Square>(std::forward<E>(e)); }
/// max(x, 0); NaN stays NaN.
template <Expression E> auto relu(E&& e) { return detail::make_map<detail::Relu>(std::forward<E>(e)); }

/// Rounding: floor, ceil, trunc (toward zero) and round (to nearest, ties to even, as
/// torch.round); integer inputs come back as they are. Derivative 0.
template <Expression E> auto floor(E&& e) { return detail::make_map<detail::Floor>(std::forward<E>(e)); }
template <Expression E> auto ceil(E&& e) { return detail::make_map<detail::Ceil>(std::forward<E>(e)); }
template <Expression E> auto trunc(E&& e) { return detail::make_map<detail::Trunc>(std::forward<E>(e)); }
template <Expression E> auto round(E&& e) { return detail::make_map<detail::Round>(std::forward<E>(e)); }

/// a - trunc(a / b) * b, with a's sign (torch.fmod); either may be a scalar.
template <class A, class B> requires ExpressionPair<A, B>
auto fmod(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Fmod>(std::forward<A>(a), std::forward<B>(b));
}
/// a - floor(a / b) * b, with b's sign (torch.remainder, Python's %); either may be a scalar.
template <class A, class B> requires ExpressionPair<A, B>
auto remainder(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Remainder>(std::forward<A>(a), std::forward<B>(b));
}

/// x to the power p (either may be a scalar); computes in floating point.
template <class A, class B> requires ExpressionPair<A, B>
auto pow(A&& x, B&& p) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Pow>(std::forward<A>(x), std::forward<B>(p));
}
/// Elementwise maximum; a NaN on either side gives NaN (torch.maximum).
template <class A, class B> requires ExpressionPair<A, B>
auto maximum(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Maximum>(std::forward<A>(a), std::forward<B>(b));
}
/// Elementwise minimum; a NaN on either side gives NaN (torch.minimum).
template <class A, class B> requires ExpressionPair<A, B>
auto minimum(A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<A, B> check;
  return detail::make_map<detail::Minimum>(std::forward<A>(a), std::forward<B>(b));
}
/// minimum(maximum(x, lo), hi); lo and hi may be scalars or expressions.
template <Expression E, Operand L, Operand H>
auto clamp(E&& x, L&& lo, H&& hi) {
  [[maybe_unused]] detail::same_device_operands<E, L, H> check;
  return detail::make_map<detail::Clamp>(std::forward<E>(x), std::forward<L>(lo), std::forward<H>(hi));
}
/// a where mask is true, b elsewhere; all three broadcast together.
template <Expression M, Operand A, Operand B>
auto where(M&& mask, A&& a, B&& b) {
  [[maybe_unused]] detail::same_device_operands<M, A, B> check;
  return detail::make_map<detail::Where>(std::forward<M>(mask), std::forward<A>(a), std::forward<B>(b));
}
/// Converts each element to U (float -> int truncates toward zero; nonzero -> true).
template <Element U, Expression E>
auto cast(E&& e) { return detail::make_map<detail::Cast<U>>(std::forward<E>(e)); }

}  // namespace et
