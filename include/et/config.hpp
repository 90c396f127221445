// Host/device annotations and build-mode detection, defined once for the whole library.
#pragma once

#if defined(__CUDACC__)
#define ET_HD __host__ __device__ inline
#define ET_DEVICE_COMPILER 1
#else
#define ET_HD inline
#endif

// Without OpenMP the CPU loops run on one thread, silently: say so once, at compile time.
// (nvcc: -Xcompiler=-fopenmp; CMake's et::et adds it.) ET_NO_OPENMP: that is intended.
#if !defined(_OPENMP) && !defined(ET_NO_OPENMP) && !defined(__CUDA_ARCH__)
#warning "et: compiled without OpenMP (-fopenmp): CPU work runs on one thread (define ET_NO_OPENMP if intended)"
#endif

// The CPU's libraries are chosen when etensor is configured (cmake/EtensorCpu.cmake): CMake's
// et::et defines one macro of each pair. A translation unit compiled by hand without them
// would quietly fall back to Eigen's GEMM and im2col convolutions: say so, in one warning of
// one line whichever pair is missing (docs/guide.md, "Without CMake", lists the flags).
#if !defined(__CUDA_ARCH__) && !defined(ET_WITH_CBLAS) && !defined(ET_NO_CBLAS) && !defined(ET_WITH_DNNL) && \
    !defined(ET_NO_DNNL)
#warning "et: no CPU libraries configured: Eigen GEMM, im2col convolutions (-DET_WITH_CBLAS=1 -DET_CBLAS_OPENBLAS=1 -DET_WITH_DNNL=1 -lopenblas -ldnnl, or -DET_NO_CBLAS -DET_NO_DNNL)"
#elif !defined(__CUDA_ARCH__) && !defined(ET_WITH_CBLAS) && !defined(ET_NO_CBLAS)
#warning "et: no CBLAS configured: Eigen GEMM (-DET_WITH_CBLAS=1 -DET_CBLAS_OPENBLAS=1 -lopenblas, or -DET_NO_CBLAS)"
#elif !defined(__CUDA_ARCH__) && !defined(ET_WITH_DNNL) && !defined(ET_NO_DNNL)
#warning "et: no oneDNN configured: im2col convolutions (-DET_WITH_DNNL=1 -ldnnl, or -DET_NO_DNNL)"
#endif

namespace et::detail {
/// Whether this translation unit can run kernels (for `if constexpr` where an operation's
/// CUDA branch must not be instantiated outside nvcc).
#if defined(ET_DEVICE_COMPILER)
inline constexpr bool device_compiler = true;
#else
inline constexpr bool device_compiler = false;
#endif
}  // namespace et::detail

// The CUDA runtime (cudart) is usable from plain C++ translation units when the
// et::et target found a CUDA toolkit (it defines ET_WITH_CUDA). Kernels, however,
// can only be compiled by nvcc: see ET_DEVICE_COMPILER.
#if defined(__CUDACC__) || defined(ET_WITH_CUDA)
#define ET_HAS_CUDA_RUNTIME 1
#include <cuda_runtime.h>
#endif

// Loop unrolling hint for device code; host compilers unroll on their own.
#if defined(__CUDA_ARCH__)
#define ET_UNROLL _Pragma("unroll")
#else
#define ET_UNROLL
#endif
