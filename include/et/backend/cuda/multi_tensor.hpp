// A multi-tensor update or norm on a CUDA device: ONE kernel launch for every tensor of
// the list, on the device's current stream. Only for nvcc.
#pragma once

#if !defined(__CUDACC__)
#error "et/backend/cuda/multi_tensor.hpp launches kernels: compile this file with nvcc"
#endif

#include "et/backend/backend.hpp"
#include "et/backend/cuda/block_counter.hpp"
#include "et/backend/cuda/elementwise.hpp"
#include "et/backend/tensor_list.hpp"
#include "et/kernels/multi_tensor.cuh"
#include "et/runtime/stream.hpp"

namespace et::detail::cuda_backend {

template <int I, class T, int K, class Update>
void run_multi_tensor(Backend<I>, const TensorList<T, K>& list, const Update& update) {
  if (list.count == 0) return;
  const CudaCall call(I, "optimizer step");
  launch<&kernels::multi_tensor_apply<TensorList<T, K>, Update>>(call, static_cast<unsigned>(list.blocks()),
                                                                  block_threads, 0, list, update);
}

/// kind's total over the first array of every tensor of the list into *out (device memory;
/// combined with *out when `accumulate`, the norm itself when `finish`).
template <int I, class T, int K>
void run_multi_tensor_norm(Backend<I>, const TensorList<T, K>& list, const NormKind& kind, double* out, bool accumulate,
                           bool finish) {
  const CudaCall call(I, "multi-tensor norm");
  const auto partials = allocate_bytes(I, sizeof(double) * static_cast<std::size_t>(list.blocks()));
  launch<&kernels::multi_tensor_norm<TensorList<T, K>>>(call, static_cast<unsigned>(list.blocks()), block_threads, 0,
                                                         list, kind, static_cast<double*>(partials.get()),
                                                         block_counter(call), out, accumulate, finish);
}

}  // namespace et::detail::cuda_backend
