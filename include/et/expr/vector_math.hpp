// Vectorized transcendental functions for the CPU loops: glibc's libmvec. Declaring the C
// library's functions with GCC's `simd` attribute (as glibc's own <math.h> does under
// -ffast-math) tells the vectorizer that vector variants exist, so the `omp simd` loops of
// backend/cpu/ call _ZGVdN8v_expf (8 floats, AVX2) or _ZGVbN4v_expf (4, SSE) instead of
// expf once per element; libmvec is linked through libm's linker script. The variants are
// accurate to 4 ulp (glibc's manual); a loop's tail stays scalar. Only GCC on x86-64 glibc,
// outside nvcc, and not with ET_NO_VECTOR_MATH; elsewhere the loops call the scalar functions.
#pragma once

#include <math.h>

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
ET_SIMD_MATH(tanh, (float), (double))
ET_SIMD_MATH(log1p, (float), (double))
ET_SIMD_MATH(erf, (float), (double))
#endif
#undef ET_SIMD_MATH
#endif
