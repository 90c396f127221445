// How every etensor kernel is launched: through the driver's cuLaunchKernel with the
// kernel's CUfunction, looked up once per kernel and device. Only for nvcc.
//
// Why not <<<>>> (or cudaLaunchKernel, which it calls): the runtime's launch costs host
// time in proportion to the length of the kernel's mangled name, about 2 ns a character
// on the lent H100s, and a fused expression's kernel is named by its whole expression type
// (230 to over 1000 characters). Measured there, per launch of an empty kernel: a
// 16-character name 3.8 us through the runtime and 3.6 us through cuLaunchKernel; a
// 1380-character name 6.3 to 7.6 us through the runtime (also with a cudaKernel_t handle)
// and 3.6 us through cuLaunchKernel. The driver entry point comes from the runtime
// (cudaGetDriverEntryPointByVersion): nothing links libcuda.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/launch.hpp launches kernels: compile this file with nvcc"
#endif

#include <atomic>
#include <cstddef>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "et/runtime/error.hpp"
#include "et/runtime/stream.hpp"

namespace et::detail::cuda_backend {

/// The driver's cuLaunchKernel, or null where the driver does not give it out.
inline PFN_cuLaunchKernel_v4000 driver_launch() {
  static const PFN_cuLaunchKernel_v4000 function = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", &entry, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuLaunchKernel_v4000>(nullptr);
    }
    return reinterpret_cast<PFN_cuLaunchKernel_v4000>(entry);
  }();
  return function;
}

/// Kernel's function on the call's device (the current one), looked up on first use per
/// device; null where the runtime does not give it out.
template <auto Kernel>
CUfunction kernel_function(int device) {
  static std::atomic<CUfunction> functions[max_cuda_devices] = {};
  CUfunction function = functions[device].load(std::memory_order_acquire);
  if (!function) {
    cudaFunction_t found = nullptr;
    if (cudaGetFuncBySymbol(&found, reinterpret_cast<const void*>(Kernel)) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    function = reinterpret_cast<CUfunction>(found);
    functions[device].store(function, std::memory_order_release);
  }
  return function;
}

/// The launch itself, with every argument already of its parameter's type.
template <auto Kernel, class... Params>
void launch_with(const CudaCall& call, dim3 grid, dim3 block, std::size_t shared_bytes, Params... values) {
  void* pointers[] = {static_cast<void*>(&values)..., nullptr};
  const PFN_cuLaunchKernel_v4000 driver = driver_launch();
  const CUfunction function = driver ? kernel_function<Kernel>(call.device()) : nullptr;
  if (function && driver(function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                         static_cast<unsigned>(shared_bytes), reinterpret_cast<CUstream>(call.stream()), pointers,
                         nullptr) == CUDA_SUCCESS)
    return;
  ET_CUDA_CHECK(
      cudaLaunchKernel(reinterpret_cast<const void*>(Kernel), grid, block, pointers, shared_bytes, call.stream()));
}
template <auto Kernel, class... Params, class... Args>
void launch_as(void (*)(Params...), const CudaCall& call, dim3 grid, dim3 block, std::size_t shared_bytes,
               const Args&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "et: a kernel launch with the wrong number of arguments");
  launch_with<Kernel, Params...>(call, grid, block, shared_bytes, args...);
}

/// Kernel<<<grid, block, shared_bytes, call.stream()>>>(args...) on call.device(), each
/// argument converted to its parameter's type as <<<>>> converts it, and checked. Where the
/// driver's launch fails (no current context on this host thread yet, a bad configuration,
/// an earlier kernel's fault), the same launch goes through the runtime, which makes the
/// context current or reports the error as before (et::CudaError).
template <auto Kernel, class... Args>
void launch(const CudaCall& call, dim3 grid, dim3 block, std::size_t shared_bytes, const Args&... args) {
  launch_as<Kernel>(Kernel, call, grid, block, shared_bytes, args...);
}

}  // namespace et::detail::cuda_backend
