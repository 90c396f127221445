// Device code only: scatter_add's kernel (ops/index.hpp), one thread per element of the
// index, adding with atomics (so repeated indices add up, in no fixed order), and the
// conversions CUB's scans and sorts read and write through. Included by
// include/et/backend/cuda/index.hpp; nvcc only.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "et/backend/index_ops.hpp"
#include "et/half.hpp"

namespace et::kernels {

__device__ __forceinline__ void atomic_add(float* at, float v) { atomicAdd(at, v); }
__device__ __forceinline__ void atomic_add(double* at, double v) { atomicAdd(at, v); }
__device__ __forceinline__ void atomic_add(std::int32_t* at, std::int32_t v) { atomicAdd(at, v); }
__device__ __forceinline__ void atomic_add(std::int64_t* at, std::int64_t v) {
  // Two's complement: adding the unsigned bits is the signed sum.
  atomicAdd(reinterpret_cast<unsigned long long*>(at), static_cast<unsigned long long>(v));
}
/// CUDA has no 8-bit atomicAdd: compare-and-swap the aligned 32-bit word that holds the
/// byte (the sum wraps modulo 256, as uint8 arithmetic does).
__device__ __forceinline__ void atomic_add(std::uint8_t* at, std::uint8_t v) {
  const auto address = reinterpret_cast<std::uintptr_t>(at);
  auto* word = reinterpret_cast<unsigned int*>(address & ~std::uintptr_t{3});
  const unsigned int shift = static_cast<unsigned int>(address & 3) * 8;
  unsigned int old = *word, assumed;
  do {
    assumed = old;
    const unsigned int byte = ((assumed >> shift) + v) & 0xFFu;
    old = atomicCAS(word, assumed, (assumed & ~(0xFFu << shift)) | (byte << shift));
  } while (assumed != old);
}
__device__ __forceinline__ void atomic_add(et::half* at, et::half v) {
  atomicAdd(reinterpret_cast<__half*>(at), __float2half(static_cast<float>(v)));
}
__device__ __forceinline__ void atomic_add(et::bfloat16* at, et::bfloat16 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(at), __float2bfloat16(static_cast<float>(v)));
}

template <class T, int R>
__global__ void scatter_add(T* out, const std::int64_t* index, const T* src, et::detail::ScatterGeometry<R> g) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < g.count; i += stride) {
    std::int64_t at_index = 0, at_src = 0, at_out = 0;
    g.offsets(i, at_index, at_src, at_out);
    atomic_add(out + at_out + index[at_index] * g.axis_stride, src[at_src]);
  }
}

/// Element i's row (CUB's segment key) and where each row begins (its offsets).
struct RowOf {
  std::int64_t length;
  __host__ __device__ std::int64_t operator()(std::int64_t i) const { return i / length; }
};
struct RowStart {
  std::int64_t length;
  __host__ __device__ std::int64_t operator()(std::int64_t row) const { return row * length; }
};
/// Element i's position in its row (the values sorted with the keys).
struct InRow {
  std::int64_t length;
  __host__ __device__ std::int64_t operator()(std::int64_t i) const { return i % length; }
};
template <class To>
struct ConvertTo {
  template <class From>
  __host__ __device__ To operator()(From v) const {
    return static_cast<To>(static_cast<et::detail::compute_t<From>>(v));
  }
};

/// The unsigned key CUB sorts for an element (index_ops.hpp's ordered_key).
struct OrderedKeyOf {
  template <class T>
  __host__ __device__ auto operator()(T v) const {
    return et::detail::ordered_key(v);
  }
};

}  // namespace et::kernels
