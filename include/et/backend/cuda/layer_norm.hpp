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

/// Chunks of 32 V values a row of cols takes.
template <int V>
std::int64_t layer_norm_row_chunks(std::int64_t cols) {
  return (cols + 32 * V - 1) / (32 * V);
}

template <int V, int I, class T, class P, class C>
void layer_norm_forward_with(const CudaCall& call, const LayerNormGeometry& g, const LayerNormForward<T, P, C>& b) {
  const auto blocks = static_cast<unsigned>((g.rows + kernels::layer_norm_rows_per_block - 1) /
                                            kernels::layer_norm_rows_per_block);
  constexpr int chunks = kernels::layer_norm_forward_chunks;
  if (layer_norm_row_chunks<V>(g.cols) <= chunks)
    launch<&kernels::layer_norm_forward_rows<T, P, C, V, chunks>>(call, blocks, 256, 0, g, b);
  else
    launch<&kernels::layer_norm_forward<T, P, C, V>>(call, blocks, 256, 0, g, b);
}

template <int I, class T, class P, class C>
void layer_norm_forward(Backend<I>, const LayerNormGeometry& g, const LayerNormForward<T, P, C>& b) {
  const CudaCall call(I, "layer_norm");
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (layer_norm_vector<T>(g.cols, {b.x, b.residual, b.h, b.y, b.weight, b.bias}) == wide)
    layer_norm_forward_with<wide, I>(call, g, b);
  else
    layer_norm_forward_with<1, I>(call, g, b);
}

/// The blocks a backward kernel keeps resident on every multiprocessor (at least one).
template <auto Kernel>
std::int64_t resident_blocks(int device, int threads) {
  int per_sm = 0;
  ET_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0));
  return std::int64_t{std::max(per_sm, 1)} * device_properties(device).multiprocessors;
}

/// The partials' column sums: 32 columns a block (kernels::layer_norm_columns).
template <int I, class P, class C>
void layer_norm_column_sums(const CudaCall& call, const std::shared_ptr<void>& partial, std::int64_t blocks,
                            const LayerNormGeometry& g, P* dweight, P* dbias) {
  launch<&kernels::layer_norm_columns<P, C>>(call, static_cast<unsigned>((g.cols + 31) / 32), 256, 0,
                                             static_cast<const C*>(partial.get()), blocks, g.cols, dweight, dbias);
}

/// Rows of at most the register kernel's chunks: layer_norm_backward_rows, as many blocks
/// as stay resident (each warp then strides over the rows, adding to its registers).
template <int V, int I, class T, class P, class C>
bool layer_norm_backward_rows(const CudaCall& call, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  constexpr int chunks = kernels::layer_norm_backward_chunks<V, C>, warps = kernels::layer_norm_backward_warps;
  if (layer_norm_row_chunks<V>(g.cols) > chunks) return false;
  constexpr auto kernel = &kernels::layer_norm_backward_rows<T, P, C, V, chunks>;
  const std::int64_t blocks = std::clamp<std::int64_t>((g.rows + warps - 1) / warps, 1, resident_blocks<kernel>(I, 32 * warps));
  const bool columns = b.dweight || b.dbias;
  std::shared_ptr<void> partial;
  if (columns) partial = allocate_on<Cuda<I>>(static_cast<std::size_t>(blocks * 2 * g.cols) * sizeof(C));
  launch<kernel>(call, static_cast<unsigned>(blocks), 32 * warps, 0, g, b, static_cast<C*>(partial.get()));
  if (columns) layer_norm_column_sums<I, P, C>(call, partial, blocks, g, b.dweight, b.dbias);
  return true;
}

template <int V, int I, class T, class P, class C>
void layer_norm_backward_with(const CudaCall& call, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  if (layer_norm_backward_rows<V, I>(call, g, b)) return;
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
  if (columns) layer_norm_column_sums<I, P, C>(call, partial, blocks, g, b.dweight, b.dbias);
}

template <int I, class T, class P, class C>
void layer_norm_backward(Backend<I>, const LayerNormGeometry& g, const LayerNormBackward<T, P, C>& b) {
  const CudaCall call(I, "layer_norm_backward");
  constexpr int wide = static_cast<int>(16 / sizeof(T));
  if (layer_norm_vector<T>(g.cols, {b.x, b.dy, b.dh, b.dx, b.weight}) == wide)
    layer_norm_backward_with<wide, I>(call, g, b);
  else
    layer_norm_backward_with<1, I>(call, g, b);
}

}  // namespace et::detail::cuda_backend
