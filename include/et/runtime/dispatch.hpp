// Run-time -> compile-time device choice. A program picks Cpu or Cuda<I> at start-up
// and hands the device tag to a generic lambda; every path is compiled, so every path
// is type-checked, and the one taken runs with the device in its types.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <utility>

#include "et/device.hpp"
#include "et/runtime/device_runtime.hpp"

namespace et {

/// The seeds' try_gpu(): calls f(et::cuda<I>) if CUDA device I exists, else f(et::cpu).
/// Both branches must return the same type. Only the CPU branch is compiled, and taken,
/// in a file that nvcc does not compile (there no kernel could run, so a GPU branch that
/// computes would not compile) and in a build without CUDA.
template <int I = 0, class F>
decltype(auto) try_gpu(F&& f) {
#if defined(ET_DEVICE_COMPILER)
  if (I < device_count()) return std::forward<F>(f)(cuda<I>);
#endif
  return std::forward<F>(f)(cpu);
}

namespace detail {
template <int I, int MaxCuda, class F>
decltype(auto) with_cuda_index(int index, F&& f) {
  if constexpr (I + 1 < MaxCuda) {
    if (index != I) return with_cuda_index<I + 1, MaxCuda>(index, std::forward<F>(f));
  } else {
    if (index != I)
      throw Error("et: device index " + std::to_string(index) + " is past the " + std::to_string(MaxCuda) +
                  " CUDA device(s) this call was compiled for (raise MaxCuda)");
  }
  check_device_index(I);
  return std::forward<F>(f)(cuda<I>);
}
}  // namespace detail

/// Calls f(et::cpu) for index < 0, else f(et::cuda<index>) for index < MaxCuda.
/// Throws et::Error for an index past MaxCuda or past device_count().
template <int MaxCuda = 1, class F>
decltype(auto) with_device(int index, F&& f) {
#if defined(ET_HAS_CUDA_RUNTIME)
  if (index >= 0) return detail::with_cuda_index<0, MaxCuda>(index, std::forward<F>(f));
#else
  if (index >= 0) detail::throw_missing_device(index);
#endif
  return std::forward<F>(f)(cpu);
}

/// Same, from a name: "cpu", "cuda" (device 0) or "cuda:N". Throws et::Error otherwise.
template <int MaxCuda = 1, class F>
decltype(auto) with_device(std::string_view name, F&& f) {
  int index = -1;
  if (name == "cuda") {
    index = 0;
  } else if (name.substr(0, 5) == "cuda:") {
    const auto digits = name.substr(5);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (error != std::errc{} || end != digits.data() + digits.size() || index < 0)
      throw Error("et: cannot read a device from \"" + std::string(name) + "\" (use cpu, cuda or cuda:N)");
  } else if (name != "cpu") {
    throw Error("et: cannot read a device from \"" + std::string(name) + "\" (use cpu, cuda or cuda:N)");
  }
  return with_device<MaxCuda>(index, std::forward<F>(f));
}

}  // namespace et
