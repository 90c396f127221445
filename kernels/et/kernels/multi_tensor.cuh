// Device code only: the multi-tensor kernels (optimizers, nn::clip_grad_norm_). Block b
// works on one chunk of one tensor of the list (et/backend/tensor_list.hpp): the update
// calls `update(arrays, i)` for each of its elements, with the K arrays of that tensor; the
// norm adds up the first array's elements. Included by
// include/et/backend/cuda/multi_tensor.hpp; compiled only by nvcc.
#pragma once

#include <cstdint>
#include <type_traits>

#include "et/backend/tensor_list.hpp"
#include "et/types.hpp"

namespace et::kernels {

template <class List, class Update>
__global__ void __launch_bounds__(256) multi_tensor_apply(List list, Update update) {
  const auto b = static_cast<std::int64_t>(blockIdx.x);
  const int k = list.tensor_of(b);
  const std::int64_t begin = (b - list.block_start[k]) * List::chunk;
  const std::int64_t end = begin + List::chunk < list.size[k] ? begin + List::chunk : list.size[k];
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) update(list.arrays[k], i);
}

/// kind's total over the first array of every tensor of the list, written to *out (combined
/// with *out when `accumulate`: the lists before it; the norm itself when `finish`): each
/// block combines its chunk's terms (a tree in shared memory) into partials[b]; the block
/// that ends last (the counter: backend/cuda/block_counter.hpp) combines the partials in a
/// fixed order, so the total is the same every run, then sets the counter back to 0.
template <class List>
__global__ void __launch_bounds__(256) multi_tensor_norm(List list, detail::NormKind kind, double* partials,
                                                         unsigned* counter, double* out, bool accumulate, bool finish) {
  __shared__ double shared[256];
  __shared__ bool last;
  const auto b = static_cast<std::int64_t>(blockIdx.x);
  const int k = list.tensor_of(b);
  const std::int64_t begin = (b - list.block_start[k]) * List::chunk;
  const std::int64_t end = begin + List::chunk < list.size[k] ? begin + List::chunk : list.size[k];
  using T = std::remove_cvref_t<decltype(*list.arrays[0][0])>;
  double total = 0;
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    total = kind.combine(total, kind.term(static_cast<double>(static_cast<detail::compute_t<T>>(list.arrays[k][0][i]))));
  auto reduce = [&](double value) {
    shared[threadIdx.x] = value;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half) shared[threadIdx.x] = kind.combine(shared[threadIdx.x], shared[threadIdx.x + half]);
      __syncthreads();
    }
    return shared[0];
  };
  total = reduce(total);
  if (threadIdx.x == 0) {
    partials[b] = total;
    __threadfence();  // the partial is visible to every block before the count says so
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  total = 0;
  for (unsigned p = threadIdx.x; p < gridDim.x; p += blockDim.x) total = kind.combine(total, __ldcg(partials + p));
  total = reduce(total);
  if (threadIdx.x == 0) {
    if (accumulate) total = kind.combine(*out, total);
    *out = finish ? kind.finish(total) : total;
    *counter = 0;
  }
}

}  // namespace et::kernels
