# etensor's CPU libraries, added to an INTERFACE target (also an imported one): used by
# CMakeLists.txt for the build tree and by the installed etensorConfig.cmake, which looks
# for them at the consumer's configure time (no absolute path is baked into the package).
#
#   etensor_add_cpu_libraries(<target>)
#
# adds, from what is found (Debian: scripts/install-deps installs both):
#   - a CBLAS for float and double matrix products (backend/cpu/gemm.hpp), chosen by the
#     cache variable ET_CPU_BLAS: auto (OpenBLAS's OpenMP build, else BLIS, else Eigen's
#     GEMM), OpenBLAS, BLIS or Eigen. OpenBLAS: ET_WITH_CBLAS=1 ET_CBLAS_OPENBLAS=1 and
#     libopenblas from its openmp folder (the OpenMP build shares etensor's threads; the
#     pthreads build would start a pool of its own beside them). BLIS (its OpenMP build, for
#     the same reason): ET_WITH_CBLAS=1 ET_CBLAS_BLIS=1 and libblis. Eigen: ET_NO_CBLAS=1
#     (intended; no warning). Where oneDNN is also found, float products take its sgemm and
#     the CBLAS serves double (backend/cpu/gemm.hpp).
#   - oneDNN for float convolution and pooling (backend/cpu/dnnl_*.hpp), unless ET_WITH_ONEDNN
#     is OFF: ET_WITH_DNNL=1 and libdnnl; else ET_NO_DNNL=1 (im2col and loops).
# and sets ETENSOR_CPU_BLAS (OpenBLAS, BLIS or Eigen) and ETENSOR_DNNL_LIBRARY (empty when
# not used) in the caller's scope. A translation unit compiled by hand without these
# definitions gets a #warning naming them (et/config.hpp).
include_guard(GLOBAL)

set(ET_CPU_BLAS "auto" CACHE STRING "etensor: the CPU's BLAS: auto, OpenBLAS, BLIS or Eigen")
set_property(CACHE ET_CPU_BLAS PROPERTY STRINGS auto OpenBLAS BLIS Eigen)
option(ET_WITH_ONEDNN "etensor: oneDNN for CPU convolution and pooling where found" ON)

function(etensor_add_cpu_libraries target)
  set(blas ${ET_CPU_BLAS})
  if(blas STREQUAL "auto" OR blas STREQUAL "OpenBLAS")
    find_library(ETENSOR_OPENBLAS_LIBRARY openblas PATH_SUFFIXES openblas-openmp
                 HINTS /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/aarch64-linux-gnu/openblas-openmp)
    find_path(ETENSOR_OPENBLAS_INCLUDE_DIR cblas.h
              HINTS /usr/include/x86_64-linux-gnu/openblas-openmp /usr/include/aarch64-linux-gnu/openblas-openmp
              PATH_SUFFIXES openblas-openmp openblas)
    if(ETENSOR_OPENBLAS_LIBRARY AND ETENSOR_OPENBLAS_INCLUDE_DIR)
      set(blas OpenBLAS)
    elseif(blas STREQUAL "OpenBLAS")
      message(FATAL_ERROR "etensor: ET_CPU_BLAS=OpenBLAS but OpenBLAS's OpenMP build was not found "
                          "(Debian: libopenblas-openmp-dev)")
    endif()
  endif()
  if(blas STREQUAL "auto" OR blas STREQUAL "BLIS")
    # Debian's OpenMP build first (libblis-openmp-dev), as for OpenBLAS.
    find_library(ETENSOR_BLIS_LIBRARY blis
                 HINTS /usr/lib/x86_64-linux-gnu/blis-openmp /usr/lib/aarch64-linux-gnu/blis-openmp)
    find_path(ETENSOR_BLIS_INCLUDE_DIR blis.h
              HINTS /usr/include/x86_64-linux-gnu/blis-openmp /usr/include/aarch64-linux-gnu/blis-openmp
              PATH_SUFFIXES blis)
    if(ETENSOR_BLIS_LIBRARY AND ETENSOR_BLIS_INCLUDE_DIR)
      set(blas BLIS)
    elseif(blas STREQUAL "BLIS")
      message(FATAL_ERROR "etensor: ET_CPU_BLAS=BLIS but BLIS was not found (Debian: libblis-openmp-dev)")
    endif()
  endif()
  if(blas STREQUAL "OpenBLAS")
    target_compile_definitions(${target} INTERFACE ET_WITH_CBLAS=1 ET_CBLAS_OPENBLAS=1)
    target_include_directories(${target} SYSTEM INTERFACE ${ETENSOR_OPENBLAS_INCLUDE_DIR})
    target_link_libraries(${target} INTERFACE ${ETENSOR_OPENBLAS_LIBRARY})
  elseif(blas STREQUAL "BLIS")
    target_compile_definitions(${target} INTERFACE ET_WITH_CBLAS=1 ET_CBLAS_BLIS=1)
    target_include_directories(${target} SYSTEM INTERFACE ${ETENSOR_BLIS_INCLUDE_DIR})
    target_link_libraries(${target} INTERFACE ${ETENSOR_BLIS_LIBRARY})
  else()
    set(blas Eigen)
    target_compile_definitions(${target} INTERFACE ET_NO_CBLAS=1)
  endif()
  set(ETENSOR_CPU_BLAS ${blas} PARENT_SCOPE)

  set(dnnl_library "")
  if(ET_WITH_ONEDNN)
    find_library(ETENSOR_DNNL_LIBRARY_PATH dnnl)
    find_path(ETENSOR_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
    if(ETENSOR_DNNL_LIBRARY_PATH AND ETENSOR_DNNL_INCLUDE_DIR)
      set(dnnl_library ${ETENSOR_DNNL_LIBRARY_PATH})
    endif()
  endif()
  if(dnnl_library)
    target_compile_definitions(${target} INTERFACE ET_WITH_DNNL=1)
    target_include_directories(${target} SYSTEM INTERFACE ${ETENSOR_DNNL_INCLUDE_DIR})
    target_link_libraries(${target} INTERFACE ${dnnl_library})
  else()
    target_compile_definitions(${target} INTERFACE ET_NO_DNNL=1)
  endif()
  set(ETENSOR_DNNL_LIBRARY ${dnnl_library} PARENT_SCOPE)
endfunction()
