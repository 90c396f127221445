// Vectorized transcendental functions for the CPU loops, two ways:
//
// 1. glibc's libmvec. Declaring the C library's functions with GCC's `simd` attribute (as
//    glibc's own <math.h> does under -ffast-math) tells the vectorizer that vector variants
//    exist, so the `omp simd` loops of backend/cpu/ call _ZGVdN8v_expf (8 floats, AVX2) or
//    _ZGVbN4v_expf (4, SSE) instead of expf once per element; libmvec is linked through
//    libm's linker script. The variants are accurate to 4 ulp (glibc's manual); a loop's
//    tail stays scalar. Only GCC on x86-64 glibc, outside nvcc, and not with
//    ET_NO_VECTOR_MATH; elsewhere the loops call the scalar functions.
// 2. vector_math::tanh (float): plain inline code that the vectorizer compiles into the loop
//    itself, on any host compiler and instruction set. libmvec's _ZGVdN8v_tanhf costs about
//    as much as the rest of a typical fused chain together, and a vector-ABI call clobbers
//    every vector register, so the loop also spills and reloads its constants around it.
//    With it, the 10-operation chain of bench/cpu_chain.cpp ran at 0.75-0.8x of Eigen's
//    speed on 1-2 cores; inline, as Eigen does it, at 0.95-1.0x.
#pragma once

#include <math.h>

#include <bit>
#include <cstdint>

#if !defined(__CUDACC__) && defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__GLIBC__) && !defined(ET_NO_VECTOR_MATH)
#define ET_VECTOR_MATH 1
#define ET_SIMD_MATH(NAME, ARGS_F, ARGS_D)                                                   \
  extern "C" float NAME##f ARGS_F noexcept __attribute__((__simd__("notinbranch"))); \
  extern "C" double NAME ARGS_D noexcept __attribute__((__simd__("notinbranch")));
ET_SIMD_MATH(exp, (float), (double))
ET_SIMD_MATH(log, (float), (double))
ET_SIMD_MATH(sin, (float), (double))
ET_SIMD_MATH(cos, (float), (double))
ET_SIMD_MATH(pow, (float, float), (double, double))
#if __GLIBC_PREREQ(2, 35)  // libmvec's hyperbolic and error functions came in glibc 2.35
ET_SIMD_MATH(tanh, (float), (double))  // the double one; float uses vector_math::tanh
ET_SIMD_MATH(log1p, (float), (double))
ET_SIMD_MATH(erf, (float), (double))
#endif
#undef ET_SIMD_MATH
#endif

namespace et::detail::vector_math {

/// m ? a : b, on the bits. Written as ?:, GCC turns the selects of tanh below into branches
/// and sinks the work of one side into them; with -ftrapping-math (the default) it may not
/// then execute that work on every path again, and the loop is not vectorized.
inline float select(bool m, float a, float b) noexcept {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(m);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & mask) | (std::bit_cast<std::uint32_t>(b) & ~mask));
}

/// tanh on the host CPU, branch-free so that it vectorizes inline (math::tanh(float) in
/// functors.hpp calls it outside device code). Eigen's approximation (MathFunctionsImpl.h,
/// generic_fast_tanh_float): a [13/6] rational function on [-c, c], beyond which tanh(x)
/// rounds to +-1 in float. Checked on every float against double tanh: within 5 ulp and
/// 3e-7 (the tests allow 2e-6), never above 1 in magnitude; -0, NaN and +-inf (-> +-1) kept.
inline float tanh(float x) noexcept {
#if defined(__FMA__)
  // Fused multiply-adds where the target has them: Eigen chose this clamp for that rounding.
  constexpr float clamp = 7.99881172180175781f;
  const auto madd = [](float a, float b, float c) { return __builtin_fmaf(a, b, c); };
#else
  constexpr float clamp = 7.90531110763549805f;
  const auto madd = [](float a, float b, float c) { return a * b + c; };
#endif
  const float lower = select(x < -clamp, -clamp, x);  // NaN compares false: stays NaN
  const float c = select(lower > clamp, clamp, lower);
  const float c2 = c * c;
  float p = madd(c2, -2.76076847742355e-16f, 2.00018790482477e-13f);  // odd numerator / c
  p = madd(c2, p, -8.60467152213735e-11f);
  p = madd(c2, p, 5.12229709037114e-08f);
  p = madd(c2, p, 1.48572235717979e-05f);
  p = madd(c2, p, 6.37261928875436e-04f);
  p = madd(c2, p, 4.89352455891786e-03f);
  float q = madd(c2, 1.19825839466702e-06f, 1.18534705686654e-04f);  // even denominator
  q = madd(c2, q, 2.26843463243900e-03f);
  q = madd(c2, q, 4.89352518554385e-03f);
  // Below 0.0004, tanh(x) rounds to x (and -0 stays -0).
  return select(__builtin_fabsf(x) < 0.0004f, x, c * p / q);
}

}  // namespace et::detail::vector_math
