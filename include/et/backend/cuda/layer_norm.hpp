// Layer normalization on a CUDA device (ops/layer_norm.hpp calls it through the backend tag,
// backend/backend.hpp): the launchers of kernels/et/kernels/layer_norm.cuh, with the
// contract backend/nn_shapes.hpp states. A row is read 16 bytes a lane a load where its
// length and its arrays' alignment allow (8 bfloat16, 4 float), else one value at a time.
// The backward's per-warp column accumulators are in shared memory up to the device's
// opt-in limit (227 KB on Hopper: rows of 7000 floats), in global scratch beyond. Only for
// nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/layer_norm.hpp launches kernels: compile this file with nvcc"
#endif

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "et/backend/cuda/launch.hpp"
#include "et/backend/nn_shapes.hpp"
#include "et/kernels/layer_norm.cuh"
#include "et/runtime/device_runtime.hpp"
#include "et/runtime/memory.hpp"

namespace et::detail::cuda_backend {

/// The widest V (16 bytes, or 1) that divides cols and to whose bytes every array is aligned.
template <class T>
int layer_norm_vector(std::int64_t cols, std::initializer_list<const void*> arrays) {
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (cols % wide != 0) return 1;
  for (const void* p : arrays)
    if (p && reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return 1;
  return wide;
}

template <int I, class T, class P, class C>
void layer_norm_forward(Backend<I>, const LayerNormGeometry& g, const LayerNormForward<T, P, C>& b) {
  const CudaCall call(I, "layer_norm");
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  const auto blocks = static_cast<unsigned>((g.rows + kernels::layer_norm_rows_per_block - 1) /
                                            kernels::layer_norm_rows_per_block);
  if (layer_norm_vector<T>(g.cols, {b.x, b.residual, b.h, b.y}) == wide)
    launch<&kernels::layer_norm_forward<T, P, C, wide>>(call, blocks, 256, 0, g, b);
  else
    launch<&kernels::layer_norm_forward<T, P, C, 1>>(call, blocks, 256, 0, g, b);
}

template <int V, int I, class T, class P, class C>
void layer_norm_backward_with(const CudaCall& call, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  constexpr int warps = kernels::layer_norm_backward_warps;
  const int sms = device_properties(I).multiprocessors;
  const std::int64_t blocks = std::clamp<std::int64_t>((g.rows + warps - 1) / warps, 1, std::int64_t{sms} * 8);
  const bool columns = b.dweight || b.dbias;
  const std::int64_t padded = kernels::layer_norm_padded<V>(g.cols);
  const std::size_t accumulators = columns ? static_cast<std::size_t>(warps * 2 * padded) * sizeof(C) : 0;
  int optin = 0;
  ET_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, call.device()));
  const bool in_shared = accumulators <= static_cast<std::size_t>(optin);
  constexpr auto kernel = &kernels::layer_norm_backward<T, P, C, V>;
  if (in_shared && accumulators > 48 * 1024)
    ET_CUDA_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(accumulators)));
  std::shared_ptr<void> scratch, partial;
  if (columns) {
    partial = allocate_on<Cuda<I>>(static_cast<std::size_t>(blocks * 2 * g.cols) * sizeof(C));
    if (!in_shared) scratch = allocate_on<Cuda<I>>(static_cast<std::size_t>(blocks) * accumulators);
  }
  launch<kernel>(call, static_cast<unsigned>(blocks), 32 * warps, in_shared ? accumulators : 0, g, b,
                 static_cast<C*>(scratch.get()), static_cast<C*>(partial.get()));
  if (columns)
    launch<&kernels::layer_norm_columns<P, C>>(call, static_cast<unsigned>((g.cols + 255) / 256), 256, 0,
                                               static_cast<const C*>(partial.get()), blocks, g.cols, b.dweight,
                                               b.dbias);
}

template <int I, class T, class P, class C>
void layer_norm_backward(Backend<I>, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  const CudaCall call(I, "layer_norm_backward");
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (layer_norm_vector<T>(g.cols, {b.x, b.dy, b.dh, b.dx}) == wide)
    layer_norm_backward_with<wide, I>(call, g, b);
  else
    layer_norm_backward_with<1, I>(call, g, b);
}

}  // namespace et::detail::cuda_backend
