// The CPU's threads: one OpenMP pool runs etensor's elementwise loops and reductions, the
// CBLAS's matrix products (OpenBLAS's OpenMP build, BLIS) and oneDNN's convolutions, so a
// single setting governs all of them and none starts a pool of its own beside the others.
//
//   et::set_num_threads(n)   every CPU operation after it uses at most n threads
//   et::get_num_threads()    the current setting (OMP_NUM_THREADS at start, else the cores)
//
// set_num_threads sets OpenMP's count for the calling thread and tells the BLAS (which keeps
// its own count: OpenBLAS's follows a changed OpenMP count only on some paths) the same. Call
// it rather than omp_set_num_threads. Inside a parallel region of the caller's, the BLAS and
// oneDNN run on the calling thread (no nested teams).
#pragma once

#include <string>

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(ET_WITH_CBLAS)
#include <cblas.h>
#endif
#if defined(ET_CBLAS_BLIS)
#include <blis.h>
#endif

#include "et/runtime/error.hpp"

namespace et {

/// Sets the number of threads CPU work uses from now on (n >= 1).
inline void set_num_threads(int n) {
  if (n < 1) throw Error("et: set_num_threads: the thread count must be positive, got " + std::to_string(n));
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
#if defined(ET_CBLAS_OPENBLAS)
  openblas_set_num_threads(n);
#elif defined(ET_CBLAS_BLIS)
  bli_thread_set_num_threads(n);
#endif
}

/// The number of threads CPU work uses.
inline int get_num_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

}  // namespace et
