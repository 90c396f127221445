// etensor's side of scripts/dlpack-interop: a shared library that Python loads with ctypes
// to pass tensors between etensor and PyTorch (and CuPy where it is installed) through
// DLPack, on cuda:0, without copies. Built by scripts/gpu-build (target et_dlpack_interop).
#include <et/et.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <limits>

extern "C" {

/// arange(n) * 0.5 as float32 on cuda:0, exported: the caller owns the DLManagedTensor and
/// its deleter releases etensor's storage. Synchronized, so that a consumer on another
/// stream reads finished values. Null (and a message) on error.
DLManagedTensor* et_interop_make(std::int64_t n) {
  try {
    auto t = et::eval(et::arange<float>(et::cuda<0>, n) * 0.5f);
    et::synchronize(et::cuda<0>);
    return t.to_dlpack();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_interop_make: %s\n", e.what());
    return nullptr;
  }
}

/// Takes a float32 rank-2 tensor on cuda:0 (any strides), doubles it in place and returns
/// the sum of the doubled values, computed by etensor; the DLPack tensor is released
/// (its producer's deleter called) before returning. NaN (and a message) on error, and
/// then `managed` stays the caller's.
double et_interop_double_and_sum(DLManagedTensor* managed) {
  try {
    auto t = et::from_dlpack<float, 2>(et::cuda<0>, managed);
    t *= 2.0f;
    return static_cast<double>(et::sum(t).item());  // item() waits for the kernels
  } catch (const std::exception& e) {
    std::fprintf(stderr, "et_interop_double_and_sum: %s\n", e.what());
    return std::numeric_limits<double>::quiet_NaN();
  }
}

}  // extern "C"
