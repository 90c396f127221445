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
// would quietly fall back to Eigen's GEMM and im2col convolutions: say so.
#if !defined(ET_WITH_CBLAS) && !defined(ET_NO_CBLAS) && !defined(__CUDA_ARCH__)
#warning "et: compiled without a CBLAS: CPU matrix products use Eigen (define ET_WITH_CBLAS=1 ET_CBLAS_OPENBLAS=1 and link -lopenblas, or ET_NO_CBLAS if intended)"
#endif
#if !defined(ET_WITH_DNNL) && !defined(ET_NO_DNNL) && !defined(__CUDA_ARCH__)
#warning "et: compiled without oneDNN: CPU convolutions use im2col (define ET_WITH_DNNL=1 and link -ldnnl, or ET_NO_DNNL if intended)"
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
