# etensor's CUDA parts, added to an INTERFACE target (also an imported one): used by
# CMakeLists.txt for the build tree and by the installed etensorConfig.cmake, which decides
# at the consumer's configure time (so nothing about CUDA or cuDNN is baked into the
# package, and no absolute path is). Needs find_package(CUDAToolkit) first.
#
#   etensor_add_cuda(<target>)
#
# adds: ET_WITH_CUDA=1; cudart, cuBLASLt and cuBLAS; for CUDA sources nvcc's
# --expt-relaxed-constexpr, OpenMP for host code and C++20 (the cuda_std_20 feature where
# CMake knows nvcc's flag for it, else -std=c++20: CMake before 3.25.2 with a recent nvcc
# does not); and cuDNN where its library and header are found (ET_WITH_CUDNN=1), which sets
# ETENSOR_CUDNN_LIBRARY in the caller's scope (empty when not found); for C++ sources, the
# toolkit's libcu++ headers (cuda::std::mdspan).
include_guard(GLOBAL)

function(etensor_add_cuda target)
  target_compile_definitions(${target} INTERFACE ET_WITH_CUDA=1)
  target_link_libraries(${target} INTERFACE CUDA::cudart CUDA::cublasLt CUDA::cublas)
  target_compile_options(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-fopenmp>)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages AND DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    target_compile_features(${target} INTERFACE cuda_std_20)
  else()
    target_compile_options(${target} INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)
  endif()
  # libcu++'s headers (cuda::std::mdspan for et/interop/mdspan.hpp): nvcc finds them itself,
  # a C++ compiler needs the toolkit's cccl directory (CUDA 13 moved them there).
  find_path(ETENSOR_CCCL_INCLUDE_DIR cuda/std/mdspan HINTS ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES cccl
            NO_DEFAULT_PATH)
  if(ETENSOR_CCCL_INCLUDE_DIR)
    target_include_directories(${target} SYSTEM INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${ETENSOR_CCCL_INCLUDE_DIR}>)
  endif()
  find_library(ETENSOR_CUDNN_LIBRARY_PATH cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
  find_path(ETENSOR_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
  if(ETENSOR_CUDNN_LIBRARY_PATH AND ETENSOR_CUDNN_INCLUDE_DIR)
    target_compile_definitions(${target} INTERFACE ET_WITH_CUDNN=1)
    target_include_directories(${target} SYSTEM INTERFACE ${ETENSOR_CUDNN_INCLUDE_DIR})
    target_link_libraries(${target} INTERFACE ${ETENSOR_CUDNN_LIBRARY_PATH})
    set(ETENSOR_CUDNN_LIBRARY ${ETENSOR_CUDNN_LIBRARY_PATH} PARENT_SCOPE)
  else()
    set(ETENSOR_CUDNN_LIBRARY "" PARENT_SCOPE)
  endif()
endfunction()
