// Elementwise functors. Each one is the whole definition of an operation: it takes its
// operands in their compute types (types.hpp: half and bfloat16 arrive as float, so a
// functor only sees float, double, int32, int64 and bool), promotes them and computes.
// The same code runs in CUDA kernels and in the CPU loop. Adding a function = one
// functor here + one named function in operators.hpp.
//
// Beside its forward, a differentiable functor states its derivatives:
// `partial<K>(out, args...)` is d out / d args[K] at these operands, given the forward's
// result `out` (eval/tape.hpp multiplies it into the adjoint). Points where the
// derivative does not exist take PyTorch's documented conventions (subgradients).
#pragma once

#include <math.h>

#include <limits>
#include <type_traits>

#include "et/config.hpp"
#include "et/expr/vector_math.hpp"
#include "et/types.hpp"

namespace et::detail {

namespace math {
// Overloads on float and double of the C library's functions, callable on host and device.
#define ET_MATH_UNARY(NAME)                              \
  ET_HD float NAME(float x) { return ::NAME##f(x); }     \
  ET_HD double NAME(double x) { return ::NAME(x); }
ET_MATH_UNARY(exp)
ET_MATH_UNARY(log)
ET_MATH_UNARY(log1p)
ET_MATH_UNARY(sqrt)
ET_MATH_UNARY(sin)
ET_MATH_UNARY(cos)
ET_MATH_UNARY(erf)
ET_MATH_UNARY(fabs)
ET_MATH_UNARY(floor)
ET_MATH_UNARY(ceil)
ET_MATH_UNARY(trunc)
ET_MATH_UNARY(nearbyint)  // to nearest, ties to even in the default rounding mode
#undef ET_MATH_UNARY
ET_HD float fmod(float a, float b) { return ::fmodf(a, b); }
ET_HD double fmod(double a, double b) { return ::fmod(a, b); }
ET_HD double tanh(double x) { return ::tanh(x); }
ET_HD float tanh(float x) {
#if defined(__CUDA_ARCH__)
  return ::tanhf(x);
#else
  return vector_math::tanh(x);  // inline and branch-free: CPU loops vectorize it (vector_math.hpp)
#endif
}
ET_HD float fmax(float a, float b) { return ::fmaxf(a, b); }
ET_HD double fmax(double a, double b) { return ::fmax(a, b); }
ET_HD float pow(float x, float p) { return ::powf(x, p); }
ET_HD double pow(double x, double p) { return ::pow(x, p); }
ET_HD float rsqrt(float x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrtf(x);
#else
  return 1.0f / ::sqrtf(x);
#endif
}
ET_HD double rsqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::rsqrt(x);
#else
  return 1.0 / ::sqrt(x);
#endif
}
}  // namespace math

template <class T>
ET_HD bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) return x != x;
  else return false;
}

/// Integer arithmetic wraps (two's complement) instead of being undefined on overflow.
/// bool computes in int and tests for nonzero: + is "or", * is "and" (as in PyTorch).
template <class C, class F>
ET_HD C arithmetic(C a, C b, F f) {
  if constexpr (std::is_same_v<C, bool>) {
    return f(static_cast<int>(a), static_cast<int>(b)) != 0;
  } else if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<C>(f(a, b));
  }
}

struct PlusFn {
  template <class X> ET_HD X operator()(X a, X b) const { return a + b; }
  template <int K, class X> ET_HD static X partial(X, X) { return X(1); }
};
struct MinusFn {
  template <class X> ET_HD X operator()(X a, X b) const { return a - b; }
  template <int K, class X> ET_HD static X partial(X, X) { return K == 0 ? X(1) : X(-1); }
};
struct TimesFn {
  template <class X> ET_HD X operator()(X a, X b) const { return a * b; }
  template <int K, class X> ET_HD static X partial(X a, X b) { return K == 0 ? b : a; }
};

/// +, -, * on the promoted type (integers wrap).
template <class Fn>
struct Arithmetic {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = promote_t<A, B>;
    return arithmetic<C>(C(a), C(b), Fn{});
  }
  template <int K, class R, class A, class B> ET_HD static auto partial(R, A a, B b) {
    using C = promote_t<A, B>;
    return Fn::template partial<K>(C(a), C(b));
  }
};
using Add = Arithmetic<PlusFn>;
using Sub = Arithmetic<MinusFn>;
using Mul = Arithmetic<TimesFn>;
/// True division, as in PyTorch: integers divide as float (3 / 2 == 1.5).
struct Div {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = floating_t<promote_t<A, B>>;
    return C(a) / C(b);
  }
  template <int K, class R, class A, class B> ET_HD static auto partial(R, A a, B b) {
    using C = floating_t<promote_t<A, B>>;
    if constexpr (K == 0) return C(1) / C(b);
    else return -C(a) / (C(b) * C(b));
  }
};
struct Pow {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = floating_t<promote_t<A, B>>;
    return math::pow(C(a), C(b));
  }
  /// As PyTorch: d/dx is 0 where p == 0; d/dp is 0 where x == 0 and p >= 0.
  template <int K, class R, class A, class B> ET_HD static auto partial(R out, A a, B b) {
    using C = floating_t<promote_t<A, B>>;
    const C x = C(a), p = C(b);
    if constexpr (K == 0) return p == C(0) ? C(0) : p * math::pow(x, p - C(1));
    else return x == C(0) && p >= C(0) ? C(0) : C(out) * math::log(x);
  }
};
/// NaN-propagating, like torch.maximum (unlike IEEE fmax).
struct Maximum {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = promote_t<A, B>;
    const C x = C(a), y = C(b);
    if (is_nan(x)) return x;
    if (is_nan(y)) return y;
    return x > y ? x : y;
  }
  /// As torch.maximum: ties split the gradient in halves.
  template <int K, class R, class A, class B> ET_HD static auto partial(R, A a, B b) {
    using C = promote_t<A, B>;
    const C x = C(a), y = C(b);
    if (x == y) return C(0.5);
    return (K == 0 ? x < y : x > y) ? C(0) : C(1);
  }
};
struct Minimum {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = promote_t<A, B>;
    const C x = C(a), y = C(b);
    if (is_nan(x)) return x;
    if (is_nan(y)) return y;
    return x < y ? x : y;
  }
  template <int K, class R, class A, class B> ET_HD static auto partial(R, A a, B b) {
    using C = promote_t<A, B>;
    const C x = C(a), y = C(b);
    if (x == y) return C(0.5);
    return (K == 0 ? x > y : x < y) ? C(0) : C(1);
  }
};

/// Comparisons promote both sides, then compare; the result is a bool mask.
template <class Relation>
struct Comparison {
  template <class A, class B> ET_HD bool operator()(A a, B b) const {
    using C = promote_t<A, B>;
    return Relation{}(C(a), C(b));
  }
};
struct EqualTo { template <class X> ET_HD bool operator()(X a, X b) const { return a == b; } };
struct NotEqualTo { template <class X> ET_HD bool operator()(X a, X b) const { return a != b; } };
struct LessThan { template <class X> ET_HD bool operator()(X a, X b) const { return a < b; } };
struct LessOrEqual { template <class X> ET_HD bool operator()(X a, X b) const { return a <= b; } };
struct GreaterThan { template <class X> ET_HD bool operator()(X a, X b) const { return a > b; } };
struct GreaterOrEqual { template <class X> ET_HD bool operator()(X a, X b) const { return a >= b; } };
using Equal = Comparison<EqualTo>;
using NotEqual = Comparison<NotEqualTo>;
using Less = Comparison<LessThan>;
using LessEqual = Comparison<LessOrEqual>;
using Greater = Comparison<GreaterThan>;
using GreaterEqual = Comparison<GreaterOrEqual>;

struct Negate {
  template <class A> ET_HD A operator()(A a) const {
    static_assert(!std::is_same_v<A, bool>, "et: negating a bool mask is not defined; compare with == false instead");
    if constexpr (std::is_floating_point_v<A>) return -a;  // -(+0.0) is -0.0, as in PyTorch
    else return arithmetic<A>(A(0), a, MinusFn{});
  }
  template <int K, class R, class A> ET_HD static A partial(R, A) { return A(-1); }
};
struct Abs {
  template <class A> ET_HD A operator()(A a) const {
    if constexpr (std::is_floating_point_v<A>) return math::fabs(a);
    else if constexpr (std::is_unsigned_v<A> || std::is_same_v<A, bool>) return a;
    else return a < 0 ? arithmetic<A>(A(0), a, MinusFn{}) : a;
  }
  /// sign(x): 0 at 0, as PyTorch (only floating types have gradients).
  template <int K, class R, class A> ET_HD static A partial(R, A a) { return a > A(0) ? A(1) : a < A(0) ? A(-1) : A(0); }
};
struct Square {
  template <class A> ET_HD A operator()(A a) const { return arithmetic<A>(a, a, TimesFn{}); }
  template <int K, class R, class A> ET_HD static A partial(R, A a) { return A(2) * a; }
};
/// relu(NaN) is NaN, as in PyTorch.
struct Relu {
  template <class A> ET_HD A operator()(A a) const {
    if constexpr (std::is_unsigned_v<A>) return a;
    else return a < A(0) ? A(0) : a;
  }
  /// 0 at 0, as PyTorch (threshold_backward).
  template <int K, class R, class A> ET_HD static A partial(R, A a) { return a > A(0) ? A(1) : A(0); }
};

/// Math functions compute in floating_t<A>: integer and bool inputs give float results.
/// Fn::derivative(x, y) is dy/dx at x, given y = apply(x).
template <class Fn>
struct FloatingUnary {
  template <class A> ET_HD auto operator()(A a) const { return Fn::apply(floating_t<A>(a)); }
  template <int K, class R, class A> ET_HD static auto partial(R out, A a) {
    using C = floating_t<A>;
    return Fn::derivative(C(a), C(out));
  }
};
#define ET_UNARY_FN(NAME, FORWARD, DERIVATIVE)                      \
  struct NAME {                                                     \
    template <class C> ET_HD static C apply(C x) { return FORWARD; } \
    template <class C> ET_HD static C derivative([[maybe_unused]] C x, [[maybe_unused]] C y) { return DERIVATIVE; } \
  };
ET_UNARY_FN(ExpFn, math::exp(x), y)
ET_UNARY_FN(LogFn, math::log(x), C(1) / x)
ET_UNARY_FN(Log1pFn, math::log1p(x), C(1) / (C(1) + x))
ET_UNARY_FN(SqrtFn, math::sqrt(x), C(0.5) / y)
ET_UNARY_FN(RsqrtFn, math::rsqrt(x), C(-0.5) * y * y * y)
ET_UNARY_FN(SinFn, math::sin(x), math::cos(x))
ET_UNARY_FN(CosFn, math::cos(x), -math::sin(x))
ET_UNARY_FN(TanhFn, math::tanh(x), C(1) - y * y)
ET_UNARY_FN(SigmoidFn, C(1) / (C(1) + math::exp(-x)), y * (C(1) - y))
/// The exact (erf) form: PyTorch's default, approximate='none'.
ET_UNARY_FN(GeluFn, C(0.5) * x * (C(1) + math::erf(x * C(0.70710678118654752440))),
            C(0.5) * (C(1) + math::erf(x * C(0.70710678118654752440))) +
                x * C(0.39894228040143267794) * math::exp(C(-0.5) * x * x))
using Exp = FloatingUnary<ExpFn>;
using Log = FloatingUnary<LogFn>;
using Log1p = FloatingUnary<Log1pFn>;
using Sqrt = FloatingUnary<SqrtFn>;
using Rsqrt = FloatingUnary<RsqrtFn>;
using Sin = FloatingUnary<SinFn>;
using Cos = FloatingUnary<CosFn>;
using Tanh = FloatingUnary<TanhFn>;
using Sigmoid = FloatingUnary<SigmoidFn>;
using Gelu = FloatingUnary<GeluFn>;
/// The tanh approximation, PyTorch's approximate='tanh' (and cuBLASLt's GELU epilogue).
struct GeluTanhFn {
  template <class C> ET_HD static C apply(C x) {
    return C(0.5) * x * (C(1) + math::tanh(C(0.79788456080286535588) * (x + C(0.044715) * x * x * x)));
  }
  template <class C> ET_HD static C derivative(C x, C) {
    const C t = math::tanh(C(0.79788456080286535588) * (x + C(0.044715) * x * x * x));
    return C(0.5) * (C(1) + t) +
           C(0.5) * x * (C(1) - t * t) * C(0.79788456080286535588) * (C(1) + C(3 * 0.044715) * x * x);
  }
};
using GeluTanh = FloatingUnary<GeluTanhFn>;
#undef ET_UNARY_FN

/// floor, ceil, trunc and round (ties to even, as torch.round) keep integer and bool inputs
/// as they are (as PyTorch does) and have derivative 0 (PyTorch's convention).
template <class Fn>
struct Rounding {
  template <class A> ET_HD A operator()(A a) const {
    if constexpr (std::is_floating_point_v<A>) return Fn::apply(a);
    else return a;
  }
  template <int K, class R, class A> ET_HD static A partial(R, A) { return A(0); }
};
struct FloorFn { template <class C> ET_HD static C apply(C x) { return math::floor(x); } };
struct CeilFn { template <class C> ET_HD static C apply(C x) { return math::ceil(x); } };
struct TruncFn { template <class C> ET_HD static C apply(C x) { return math::trunc(x); } };
struct RoundFn { template <class C> ET_HD static C apply(C x) { return math::nearbyint(x); } };
using Floor = Rounding<FloorFn>;
using Ceil = Rounding<CeilFn>;
using Trunc = Rounding<TruncFn>;
using Round = Rounding<RoundFn>;

/// fmod(a, b): a - trunc(a / b) * b, with a's sign (C's fmod, torch.fmod); remainder(a, b):
/// a - floor(a / b) * b, with b's sign (Python's %, torch.remainder). Integers (in their
/// promoted type) divide exactly; an integer b of 0 gives 0 (PyTorch raises; a kernel cannot).
template <bool FloorDivision>
struct Modulo {
  template <class A, class B> ET_HD auto operator()(A a, B b) const {
    using C = promote_t<A, B>;
    const C x = C(a), y = C(b);
    if constexpr (std::is_floating_point_v<C>) {
      const C r = math::fmod(x, y);
      if constexpr (FloorDivision) return r != C(0) && ((r < C(0)) != (y < C(0))) ? r + y : r;
      else return r;
    } else if constexpr (std::is_same_v<C, bool>) {
      return false;  // x mod true is 0, x mod false 0 by the rule for 0
    } else {
      if (y == C(0)) return C(0);
      if constexpr (std::is_signed_v<C>) {
        if (y == C(-1)) return C(0);  // also the one quotient that overflows
      }
      const C r = x % y;
      if constexpr (FloorDivision && std::is_signed_v<C>) return r != C(0) && ((r < C(0)) != (y < C(0))) ? C(r + y) : r;
      else return r;
    }
  }
  /// d/da = 1; d/db = -trunc(a / b) (fmod) or -floor(a / b) (remainder), as PyTorch.
  template <int K, class R, class A, class B> ET_HD static auto partial(R, A a, B b) {
    using C = promote_t<A, B>;
    if constexpr (K == 0) return C(1);
    else return FloorDivision ? -math::floor(C(a) / C(b)) : -math::trunc(C(a) / C(b));
  }
};
using Fmod = Modulo<false>;
using Remainder = Modulo<true>;

/// clamp(x, lo, hi) = minimum(maximum(x, lo), hi); NaN in x propagates.
struct Clamp {
  template <class A, class L, class H> ET_HD auto operator()(A a, L lo, H hi) const {
    using C = promote_t<promote_t<A, L>, H>;
    return Minimum{}(Maximum{}(C(a), C(lo)), C(hi));
  }
  /// As PyTorch's clamp with tensor bounds: x where lo <= x <= hi; lo where x < lo < hi;
  /// hi where x > hi or hi < lo.
  template <int K, class R, class A, class L, class H> ET_HD static auto partial(R, A a, L l, H h) {
    using C = promote_t<promote_t<A, L>, H>;
    const C x = C(a), lo = C(l), hi = C(h);
    if constexpr (K == 0) return x >= lo && x <= hi ? C(1) : C(0);
    else if constexpr (K == 1) return x < lo && lo < hi ? C(1) : C(0);
    else return x > hi || hi < lo ? C(1) : C(0);
  }
};
/// where(mask, a, b): a where mask is true (non-zero), else b.
struct Where {
  template <class M, class A, class B>
  using element_type = promote_t<A, B>;
  template <class M, class A, class B> ET_HD auto operator()(M mask, A a, B b) const {
    using C = promote_t<A, B>;
    return static_cast<bool>(mask) ? C(a) : C(b);
  }
  template <int K, class R, class M, class A, class B> ET_HD static auto partial(R, M mask, A, B) {
    using C = promote_t<A, B>;
    if constexpr (K == 0) return C(0);  // a floating mask: no gradient
    else return static_cast<bool>(mask) == (K == 1) ? C(1) : C(0);
  }
};
/// Converts to U and goes on in U's compute type: cast<half>(x) rounds x to half precision.
/// A floating value cast to an integer type truncates toward zero; NaN gives 0 and values
/// past the type's range its nearest limit (C++ leaves both undefined; CUDA's conversions
/// and PyTorch on CUDA saturate alike), on every device.
template <class U>
struct Cast {
  template <class... Ts>
  using element_type = U;
  template <class A> ET_HD compute_t<U> operator()(A a) const {
    if constexpr (std::is_floating_point_v<A> && std::is_integral_v<U> && !std::is_same_v<U, bool>) {
      // U's min (0, -2^31 or -2^63) and one past its max: exact in float and double.
      constexpr A high = A(integer_end_v<U>);
      constexpr A low = A(std::numeric_limits<U>::min());
      if (!(a == a)) return U(0);
      if (a >= high) return std::numeric_limits<U>::max();
      if (a <= low) return std::numeric_limits<U>::min();
    }
    return compute_t<U>(static_cast<U>(a));
  }
  template <int K, class R, class A> ET_HD static R partial(R, A) { return R(1); }
};

}  // namespace et::detail
